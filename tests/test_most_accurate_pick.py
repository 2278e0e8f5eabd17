"""The latency-bound use cases' two answers, on hand-made records (synthetic: no record here was measured): the
most accurate configuration that meets the bound among those whose accuracy is known, and the fastest that meets
it with what it gives up; accuracy known only as measured on the user's data or published (never a stand-in ratio
multiplied into a published figure); a pick at its limit named so, with the next candidate with margin; the size
ladder. Each verdict has its case where it must come out the other way."""

from __future__ import annotations

import json
from pathlib import Path

from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.record import CellRecord, Memory, new_record
from harness.core.record_codec import record_to_json
from harness.core.results_dir import Run
from harness.decide import registry
from harness.decide.accuracy import MEASURED, NOT_KNOWN, PUBLISHED, PUBLISHED_MAP_640, accuracy_of
from harness.decide.by_candidates import answer_of, decide
from harness.decide.index import index_runs
from harness.decide.picks import ACCURACY_FLOORS, Constraints
from harness.measure.stats import latency_from_samples
from harness.report.cli import main
from harness.report.decision import answer
from harness.report.front import machine_front

CAMERA, SERVER = (registry.get(k).case for k in ("camera", "server"))
STANDIN = "standin:synthetic"  # the stand-in's label, for hand-made records
USER = "/synthetic/weights/yolo26n.pt"  # the user's weights (--weights-dir), scored on their --data


def steady(center: float, n: int = 120, spread: float = 0.01) -> list[float]:
    return [round(center * (1 + spread * (2 * k / (n - 1) - 1)), 5) for k in range(n)]


def cell(
    backend: str,
    e2e: float | list[float],
    *,
    side: int = 640,
    size: str = "n",
    precision: str = "fp32",
    weights: str = "random-init:0",
    map50_95: float | None = None,
    ref_map: float | None = None,
    memory: float = 300.0,
) -> CellRecord:
    """An ok CPU cell timed end to end (`e2e`: the rounds, or a steady centre) with, where `map50_95` is given,
    its accuracy scored against its fp32 reference `ref_map` at the same shape (synthetic figures)."""
    c = Cell(size, "detect", "e2e", backend, "cpu", Shape(side, side), 1, precision)
    r = new_record("synthetic", c, weights)
    r.status = "ok"
    rounds = e2e if isinstance(e2e, list) else steady(e2e)
    r.samples_ms = [0.7 * x for x in rounds[:30]]
    r.latency_ms = latency_from_samples(r.samples_ms, "model")
    r.latency_e2e_ms = latency_from_samples(rounds, "end-to-end")
    r.memory = Memory(host_peak_rss_mib=memory)
    if map50_95 is not None:
        ref = ref_map if ref_map is not None else map50_95
        r.accuracy = {"map50_95": map50_95, "reference_map50_95": ref, "ratio": map50_95 / ref, "images": 32}
    return r


def machine(*records: CellRecord):
    return index_runs(
        [Run(Path("/synthetic"), "synthetic", {"host": {"cpu_model": "AMD EPYC"}}, list(records))]
    )


def run(case, records: list[CellRecord], **cons):
    idx = machine(*records)
    return decide(case, idx[0], idx, Constraints(**{"floors": dict(ACCURACY_FLOORS), **cons}))


def shape_of(s) -> int:
    return int(s.cand.rec.height)


def test_a_known_640_cell_meeting_the_frame_time_is_picked_over_a_faster_320_of_unknown_accuracy():
    at_640, at_320 = cell("openvino", 25.0), cell("openvino", 8.0, side=320)
    dec = run(CAMERA, [at_640, at_320])
    assert dec.pick.cand.rec is at_640 and dec.pick.cand.accuracy.source == PUBLISHED
    assert dec.accuracy_scale == PUBLISHED
    # the 320 cell is named as the faster alternative, with what it gives up
    assert dec.fastest.cand.rec is at_320
    assert dec.gives_up.startswith("320 instead of 640: accuracy cost not known here")
    assert "--data" in dec.gives_up
    lines = answer(answer_of(dec)).lines
    assert any(line.startswith("fastest that meets it: openvino yolo26n 320 fp32") for line in lines)
    # the other way: the 640 cell misses the frame time, so the 320 one is the pick, said to be of unknown accuracy
    dec = run(CAMERA, [cell("openvino", 40.0), at_320])
    assert dec.pick.cand.rec is at_320 and dec.fastest is None
    assert "none of them has a known accuracy" in dec.reason


def test_the_most_accurate_size_that_meets_the_bound_wins_and_the_smaller_size_is_the_faster_one():
    small, large = cell("openvino", 15.0), cell("openvino", 30.0, size="s")
    dec = run(CAMERA, [small, large])
    assert dec.pick.cand.rec is large and dec.fastest.cand.rec is small
    got = (PUBLISHED_MAP_640["e2e"]["n"], PUBLISHED_MAP_640["e2e"]["s"])
    assert f"COCO mAP50-95 {got[0]:.1f} against {got[1]:.1f} (published, at 640)" in dec.gives_up
    # the other way: yolo26s over the frame time, yolo26n is the pick and nothing faster is named
    dec = run(CAMERA, [small, cell("openvino", 40.0, size="s")])
    assert dec.pick.cand.rec is small and dec.fastest is None
    # the server's bound: the same rule on its rate figure (screened from the e2e p50)
    srv = run(SERVER, [small, large], server_bound_ms=100.0)
    assert srv.pick.cand.rec is large and srv.fastest.cand.rec is small
    assert run(SERVER, [small, large], server_bound_ms=20.0).pick.cand.rec is small


def test_with_accuracy_measured_at_both_shapes_the_trade_is_priced_from_the_users_data():
    at_640 = cell("onnxruntime", 25.0, weights=USER, map50_95=0.300)
    at_320 = cell("onnxruntime", 8.0, side=320, weights=USER, map50_95=0.270)
    dec = run(CAMERA, [at_640, at_320])
    assert dec.accuracy_scale == MEASURED
    assert dec.pick.cand.rec is at_640 and dec.fastest.cand.rec is at_320
    assert dec.gives_up == "320 instead of 640: mAP50-95 0.270 against 0.300 (0.900×, measured on your data)"
    assert "640→320: 0.900× the 640 mAP (measured on your data" in dec.fastest.cand.accuracy.cost
    # the other way: the user's data says 320 keeps the accuracy (within 1%): the faster 320 is the pick
    same = cell("onnxruntime", 8.0, side=320, weights=USER, map50_95=0.299)
    dec = run(CAMERA, [at_640, same])
    assert dec.pick.cand.rec is same and dec.fastest is None


def test_a_standin_ratio_above_1_never_raises_a_coco_figure():
    published = PUBLISHED_MAP_640["e2e"]["n"]
    fp32_640 = cell("openvino", 25.0, weights=STANDIN, map50_95=0.270)
    # the stand-in on the generated images scores 320 above 640 (1.10x) and int8 above fp32 (1.012x)
    fp32_320 = cell("openvino", 8.0, side=320, weights=STANDIN, map50_95=0.297)
    int8_640 = cell("openvino", 12.0, precision="int8", weights=STANDIN, map50_95=0.2733, ref_map=0.270)
    idx = machine(fp32_640, fp32_320, int8_640)
    acc = {r.cell_id: accuracy_of(r, idx[0].cells) for r in idx[0].cells}
    # the fp32 640 cell carries the published figure exactly (the other way: not lowered, not raised)
    assert acc[fp32_640.cell_id].source == PUBLISHED and acc[fp32_640.cell_id].coco == published
    for r in (fp32_320, int8_640):
        a = acc[r.cell_id]
        assert a.source == NOT_KNOWN and a.coco is None and a.value is None
        assert "stand-in weights" in a.standin and "not of COCO" in a.standin
    assert "1.100× the one at 640" in acc[fp32_320.cell_id].standin
    # the front and every pick show no COCO figure above the published one of its size at 640
    front = machine_front(idx[0], idx, Constraints())
    assert front.rows and all(row.y <= published for row in front.rows)
    assert all("COCO" not in row.accuracy or f"{published:.1f}" in row.accuracy for row in front.rows)
    dec = run(CAMERA, [fp32_640, fp32_320, int8_640])
    assert dec.pick.cand.rec is fp32_640 and dec.pick.cand.accuracy.value == published
    assert "(stand-in" not in dec.gives_up and "accuracy cost not known here" in dec.gives_up


def test_a_pick_whose_interval_reaches_the_frame_time_is_at_the_limit_with_the_next_with_margin():
    edgy = cell("openvino", [*steady(31.0, 119), 34.0], size="s")  # p99 within 33.3 ms, slowest round over it
    margin = cell("openvino", 20.0)
    dec = run(CAMERA, [edgy, margin])
    assert dec.pick.cand.rec is edgy  # the most accurate that meets it
    assert dec.at_limit.startswith("at the limit") and "33.3 ms limit" in dec.at_limit
    assert dec.with_margin.cand.rec is margin
    assert any("with margin: openvino yolo26n 640" in line for line in answer(answer_of(dec)).lines)
    # the other way: a steady yolo26s well inside the frame time is not at the limit
    dec = run(CAMERA, [cell("openvino", 25.0, size="s"), margin])
    assert not dec.at_limit and dec.with_margin is None
    # --headroom 0.8: figures within 26.7 ms; yolo26s misses it, yolo26n is the pick, not at the limit
    dec = run(CAMERA, [edgy, margin], headroom=0.8)
    assert dec.pick.cand.rec is margin and not dec.at_limit
    assert any("26.7 ms limit (80% of the 33.3 ms frame time" in m.rejection.why for m in dec.misses)


def _write_run(path: Path, records: list[CellRecord]) -> Path:
    path.mkdir(parents=True)
    (path / "cells.jsonl").write_text("".join(record_to_json(r) + "\n" for r in records))
    (path / "env.json").write_text(json.dumps({"run_id": "synthetic", "host": {"cpu_model": "AMD EPYC"}}))
    return path


def test_decision_json_carries_the_source_the_fastest_and_the_ladder_and_headroom_decides_again(tmp_path):
    records = [
        cell("openvino", 25.0),
        cell("openvino", 8.0, side=320),
        cell("openvino", 30.0, size="s", side=320),
        cell("openvino", 60.0, size="s"),
    ]
    run_dir = _write_run(tmp_path / "run", records)
    assert main([str(run_dir), "-o", str(tmp_path / "a"), "-q"]) == 0
    doc = json.loads(next((tmp_path / "a").glob("*/decision.json")).read_text())
    cam = next(e for e in doc["decisions"] if e["use_case"] == "camera")
    assert cam["pick"]["accuracy_source"] == PUBLISHED and cam["pick"]["configuration"]["shape"] == "640"
    assert (
        cam["fastest"]["accuracy_source"] == NOT_KNOWN and cam["fastest"]["configuration"]["shape"] == "320"
    )
    ladder = [(r["size"], r["shape"], r["camera"]) for r in cam["ladder"]]
    assert ladder == [("s", "640", False), ("s", "320", True), ("n", "640", True), ("n", "320", True)]
    assert cam["largest_fitting"].startswith("largest model that keeps the 33.3 ms frame time: yolo26s 320")
    # --headroom 0.8 from the same records: yolo26s 320 (30 ms) no longer fits 26.7 ms
    assert main([str(run_dir), "-o", str(tmp_path / "b"), "-q", "--headroom", "0.8"]) == 0
    doc = json.loads(next((tmp_path / "b").glob("*/decision.json")).read_text())
    cam = next(e for e in doc["decisions"] if e["use_case"] == "camera")
    assert cam["largest_fitting"].startswith("largest model that keeps the 26.7 ms frame time: yolo26n 640")
    assert cam["constraints"]["in_words"].endswith("(--headroom 0.8)")
