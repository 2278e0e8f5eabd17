"""Parity per output and per quantity, on constructed outputs whose right verdict is known.

Each verdict is tested both ways: the agreeing output passes and the broken one fails, naming the metric that
failed. Real exports and the mutation tests on them are in tests/test_parity_mutation.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from harness.measure.corrupt import MODES, CorruptionError, corrupt, corruptions
from harness.measure.parity import FLOOR_REL, PRECISIONS, THRESHOLDS, Layout, bounds, compare

DETECT = Layout("detect", "e2e", nc=80, imgsz=(320, 320))


def _dets(n=300, seed=0, extra=0):
    """End-to-end rows like the random-init model's: a few clear detections over a long flat tail of scores."""
    rng = np.random.default_rng(seed)
    xy = rng.uniform(0, 240, (1, n, 2))
    wh = rng.uniform(20, 80, (1, n, 2))
    scores = np.sort(np.concatenate([rng.uniform(0.02, 0.05, 40), rng.uniform(0.001, 0.004, n - 40)]))[::-1]
    cls = rng.integers(0, 80, (1, n, 1)).astype(float)
    parts = [xy, xy + wh, scores.reshape(1, n, 1), cls]
    if extra:
        parts.append(rng.normal(size=(1, n, extra)))
    return np.concatenate(parts, axis=-1).astype(np.float32)


def test_threshold_table_is_one_table_strict_to_loose():
    for metric, (kind, *col) in THRESHOLDS.items():
        assert kind in ("min", "max") and len(col) == len(PRECISIONS), metric
        judged = [c for c in col if c is not None]
        # fp32 is the strictest, int8 the loosest: a bound never tightens as the precision drops
        assert judged == sorted(judged, reverse=kind == "min"), metric
    assert bounds("fp16")["box_iou_mean"] == ("min", THRESHOLDS["box_iou_mean"][2])


def test_reordered_rows_agree_and_the_record_says_what_was_compared():
    ref = _dets()
    out = ref[:, np.random.default_rng(1).permutation(300)]
    p = compare([out], [ref], DETECT, "fp32")
    assert p.ok and p.failed == [] and p.method == "detections"
    m = p.metrics
    assert m["box_iou_mean"] == pytest.approx(1.0) and m["box_iou_min"] == pytest.approx(1.0)
    assert m["class_agreement"] == 1.0 and m["score_max_diff"] == 0.0
    assert m["unmatched_ref"] == m["unmatched_out"] == 0 and m["map50"] > 0.99
    c = p.to_dict()["compared"]
    assert c["rows_ref"] == c["rows_out"] == 300
    above = int((ref[0, :, 4] >= FLOOR_REL * ref[0, :, 4].max()).sum())
    assert c["ref_above_floor"] == c["out_above_floor"] == c["matched"] == above
    assert 0 < above < 300  # the flat tail is left out


def test_same_box_twice_with_two_classes_is_matched_by_class():
    """The top-k holds one anchor once per class: identical boxes, so only the class can pair them right."""
    ref = _dets()
    ref[0, 1, :4] = ref[0, 0, :4]
    ref[0, 1, 4] = ref[0, 0, 4]
    ref[0, 0, 5], ref[0, 1, 5] = 3, 7
    out = ref.copy()
    out[0, [0, 1]] = out[0, [1, 0]]
    p = compare([out], [ref], DETECT, "fp32")
    assert p.ok and p.metrics["class_agreement"] == 1.0


def test_zeroed_scores_fail_although_boxes_dominate_a_pooled_norm():
    ref = _dets()
    out = ref.copy()
    out[..., 4] = 0.0
    # the old pooled comparison: boxes in pixels swamp the scores
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < 1e-3
    for precision in ("fp32", "fp16", "int8"):
        p = compare([out], [ref], DETECT, precision)
        assert not p.ok and {"unmatched_frac", "map50"} <= set(p.failed), p.failed
    assert "unmatched_frac" in p.reason() and "map50" in p.reason()


def test_shifted_classes_fail_on_class_agreement():
    ref = _dets()
    out = ref.copy()
    out[..., 5] = (out[..., 5] + 1) % 80
    p = compare([out], [ref], DETECT, "fp16")
    assert not p.ok and "class_agreement" in p.failed and p.metrics["class_agreement"] < 0.1
    assert "map50" in p.failed


def test_boxes_shifted_by_a_few_pixels_fail_fp32_and_fp16_but_not_sub_pixel_noise():
    ref = _dets()
    out = ref.copy()
    out[..., :4] += 4.0
    for precision in ("fp32", "fp16"):
        p = compare([out], [ref], DETECT, precision)
        assert not p.ok and "box_iou_mean" in p.failed, (precision, p.metrics)
    noisy = ref.copy()
    noisy[..., :4] += np.random.default_rng(2).normal(0, 0.01, noisy[..., :4].shape)
    assert compare([noisy], [ref], DETECT, "fp32").ok


def test_fp16_bounds_are_looser_than_fp32():
    ref = _dets()
    out = ref.copy()
    out[..., 4] *= 1.02  # 2% score error: beyond fp32, within fp16
    assert compare([out], [ref], DETECT, "fp32").failed == ["score_max_diff_rel"]
    assert compare([out], [ref], DETECT, "fp16").ok


def test_shape_mismatch_and_nan_fail():
    ref = _dets()
    p = compare([ref, ref], [ref], DETECT, "fp32")
    assert not p.ok and p.failed == ["comparable"] and "2 outputs" in p.compared["what"]
    bad = ref.copy()
    bad[0, 0, 0] = np.nan
    p = compare([bad], [ref], DETECT, "fp32")
    assert p.failed == ["nonfinite"] and p.metrics["nonfinite"] == 1
    raw = np.zeros((1, 84, 100))
    p = compare([np.zeros((1, 84, 99))], [raw], Layout("detect", "raw", nc=80), "fp32")
    assert p.failed == ["comparable"]


def _raw(seed=0, anchors=400, nc=80):
    rng = np.random.default_rng(seed)
    xy = rng.uniform(20, 300, (1, 2, anchors))
    wh = rng.uniform(10, 60, (1, 2, anchors))
    scores = rng.uniform(0, 0.01, (1, nc, anchors))
    scores[0, rng.integers(0, nc, 30), rng.choice(anchors, 30, replace=False)] = rng.uniform(0.03, 0.06, 30)
    return np.concatenate([xy, wh, scores], axis=1).astype(np.float32)


def test_raw_head_groups_are_judged_apart():
    layout = Layout("detect", "raw", nc=80, imgsz=(320, 320))
    ref = _raw()
    p = compare([ref.copy()], [ref], layout, "fp32")
    assert p.ok and p.method == "raw-head" and p.metrics["scores_rel_l2"] == 0.0 and p.metrics["map50"] > 0.99
    zero = ref.copy()
    zero[:, 4:] = 0.0
    p = compare([zero], [ref], layout, "fp32")
    assert p.metrics["boxes_rel_l2"] == 0.0 and "scores_rel_l2" in p.failed and "boxes_rel_l2" not in p.failed
    moved = ref.copy()
    moved[:, :2] += 4.0
    p = compare([moved], [ref], layout, "fp16")
    assert {"boxes_rel_l2", "box_iou_mean"} <= set(p.failed) and "scores_rel_l2" not in p.failed


def test_classification_top1_top5():
    layout = Layout("cls", "e2e")
    rng = np.random.default_rng(0)
    ref = rng.dirichlet(np.ones(1000), size=2).astype(np.float32)
    assert compare([ref * (1 + 1e-6)], [ref], layout, "fp32").ok
    p = compare([np.roll(ref, 1, axis=1)], [ref], layout, "fp32")
    assert not p.ok and {"top1_agreement", "top5_agreement"} <= set(p.failed)


def test_obb_rotated_iou():
    layout = Layout("obb", "e2e", nc=15, imgsz=(320, 320))
    rng = np.random.default_rng(0)
    n = 50
    xy = rng.uniform(50, 250, (1, n, 2))
    wh = np.stack([rng.uniform(60, 90, n), rng.uniform(8, 12, n)], -1)[None]  # elongated: rotation shows
    score = np.sort(rng.uniform(0.01, 0.05, n))[::-1].reshape(1, n, 1)
    ref = np.concatenate([xy, wh, score, rng.integers(0, 15, (1, n, 1)), rng.uniform(0, 1, (1, n, 1))], -1)
    assert compare([ref.copy()], [ref], layout, "fp32").ok
    turned = ref.copy()
    turned[..., 6] += 0.3
    p = compare([turned], [ref], layout, "fp16")
    assert not p.ok and "box_iou_mean" in p.failed


def test_pose_keypoints_by_oks():
    layout = Layout("pose", "e2e", nc=1, kpt_shape=(17, 3), imgsz=(320, 320))
    ref = _dets(extra=51)
    ref[..., 5] = 0
    kpt = ref[..., 6:].reshape(1, 300, 17, 3)
    kpt[..., :2] = ref[..., None, :2] + 20 + kpt[..., :2]
    ref[..., 6:] = kpt.reshape(1, 300, 51)
    assert compare([ref.copy()], [ref], layout, "fp32").ok
    moved = ref.copy()
    moved[..., 6::3] += 8.0  # every keypoint 8 px off, boxes untouched
    p = compare([moved], [ref], layout, "fp16")
    assert not p.ok and p.failed == ["oks_mean"] and p.metrics["box_iou_mean"] == pytest.approx(1.0)


def test_seg_masks_by_iou():
    layout = Layout("seg", "e2e", nc=80, imgsz=(320, 320))
    rng = np.random.default_rng(0)
    ref = _dets(extra=32)
    proto = rng.normal(size=(1, 32, 80, 80)).astype(np.float32)
    p = compare([ref.copy(), proto.copy()], [ref, proto], layout, "fp32")
    assert p.ok and p.metrics["mask_iou_mean"] == pytest.approx(1.0)
    p = compare([ref.copy(), np.zeros_like(proto)], [ref, proto], layout, "fp16")
    assert not p.ok and p.failed == ["mask_iou_mean"]


# -- the corruption knob ------------------------------------------------------------------------------------------
KNOWN = ("onnxruntime", "openvino")


def test_knob_parses_and_refuses_with_one_clear_error():
    assert corruptions("", KNOWN) == {}
    assert corruptions("onnxruntime=zero-scores, openvino=shift-boxes,onnxruntime=drop-masks", KNOWN) == {
        "onnxruntime": ("zero-scores", "drop-masks"),
        "openvino": ("shift-boxes",),
    }
    for bad, says in (
        ("onnxruntime", "not backend=mode"),
        ("onnxruntime=", "not backend=mode"),
        ("onnxruntime=flip", "unknown mode 'flip'"),
        ("onnxrt=zero-scores", "unknown backend 'onnxrt'"),
    ):
        with pytest.raises(CorruptionError, match=says):
            corruptions(bad, KNOWN)


def test_knob_modes_change_what_they_name():
    ref = _dets()
    for mode in MODES:
        (out,), notes = corrupt([ref], (mode,), DETECT)
        changed = np.flatnonzero((out != ref).any(axis=(0, 1)))
        expected = {"zero-scores": [4], "shift-classes": [5], "shift-boxes": [0, 1, 2, 3], "drop-masks": []}[
            mode
        ]
        assert changed.tolist() == expected, mode
        assert notes[0].startswith(mode)
    assert "nothing changed" in corrupt([ref], ("drop-masks",), DETECT)[1][0]
    assert np.array_equal(ref, _dets())  # the caller's outputs are not touched


# -- the report shows every metric per cell and marks the failing one ----------------------------------------------
SAMPLE = Path(__file__).resolve().parent.parent / "results" / "samples" / "2026-11-22-cpu-2core"


def test_report_shows_metrics_per_cell_marks_the_failure_and_reads_older_records(tmp_path):
    from harness.report import render_report
    from tests.test_report_render import parse

    run = tmp_path / SAMPLE.name
    shutil.copytree(SAMPLE, run)
    lines = (run / "cells.jsonl").read_text().splitlines()
    recs = [json.loads(line) for line in lines]
    target = next(r for r in recs if r["status"] == "ok" and r["backend"] == "onnxruntime")
    legacy = next(r for r in recs if r["status"] == "ok" and r["backend"] == "openvino")
    ref = _dets()
    out = ref.copy()
    out[..., 5] = (out[..., 5] + 1) % 80
    p = compare([out], [ref], DETECT, "fp32")
    target.update(status="parity_failed", reason=p.reason(), parity=p.to_dict())
    (run / "cells.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))

    doc = parse(render_report([run], tmp_path / "reports"))
    table = doc.one("table", cls="parity")
    row = table.one("tr", data_cell_id=target["cell_id"])
    assert row.attrs["data-parity"] == "failed" and "class_agreement" in row.attrs["data-failed"].split()
    failing = row.one("div", cls="fail", data_metric="class_agreement")
    assert "≥ 0.99" in failing.text()
    assert row.one("div", data_metric="box_iou_mean").attrs["class"] == "metric"  # measured, passed
    assert "above the floor" in row.text() and "matched" in row.text()
    old = table.one("tr", data_cell_id=legacy["cell_id"])
    assert old.attrs["data-parity"] == "ok" and "pooled rel. L2 (older record)" in old.text()
    assert old.one("div", data_metric="rel_l2").attrs["class"] == "metric"


@pytest.mark.process
def test_invalid_knob_stops_the_suite_with_one_error_line(tmp_path, monkeypatch):
    from tests.test_cli_input import _pytest_suites

    monkeypatch.setenv("YOLO26_BENCH_CORRUPT", "onnxruntime=scramble")
    p = _pytest_suites("--results-dir", str(tmp_path / "res"))
    assert p.returncode == 4, p.stdout + p.stderr
    errors = [line for line in p.stderr.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1 and "YOLO26_BENCH_CORRUPT: unknown mode 'scramble'" in errors[0], p.stderr
    assert not (tmp_path / "res").exists(), "no work starts on bad input"
