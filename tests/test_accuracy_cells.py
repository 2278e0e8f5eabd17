"""The accuracy pass wired into the cells: stand-in weights by default for yolo26n detect, each cell's mAP beside
the PyTorch fp32 reference's, a null with its reason where it would mean nothing, and a spoiled runner's mAP falls."""

from __future__ import annotations

import pytest

from harness.accuracy import per_cell
from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.null_reasons import unexplained_nulls
from harness.execute.runner import CellRunner, RunConfig
from harness.measure.corrupt import CORRUPT_ENV

SHAPE = Shape(320, 320)
BACKENDS = ("torch-eager", "onnxruntime")


def _runner(out, cache_dir, **kw) -> CellRunner:
    cfg = RunConfig(
        run_id=kw.pop("run_id", "r"),
        results_dir=out,
        cache_dir=cache_dir,
        max_time_s=0.2,
        block_s=0.02,
        **{"e2e": False, "scenarios": "none", **kw},  # these tests read accuracy and status
    )
    return CellRunner(cfg, progress=lambda m: None)


def _run(runner: CellRunner, backends=BACKENDS) -> dict[str, dict]:
    cells = [Cell("n", "detect", "e2e", b, "cpu", SHAPE) for b in backends]
    runner.prepare(cells)
    by_id = runner.run_workload(cells)
    return {c.backend: by_id[c.id][0] for c in cells}


@pytest.mark.slow
@pytest.mark.export
def test_standin_cells_score_their_map_against_the_reference(tmp_path, cache_dir):
    recs = _run(_runner(tmp_path, cache_dir, accuracy_images=16))
    ref = recs["torch-eager"]
    assert ref.weights.startswith("standin:")
    for backend, rec in recs.items():
        assert rec.status == "ok", rec.reason
        acc = rec.accuracy
        assert acc["images"] == 16 and acc["dataset"].endswith("data.yaml")
        assert acc["reference_map50_95"] == ref.accuracy["map50_95"] > 0.2  # a trained model, not noise
        assert acc["ratio"] == pytest.approx(acc["map50_95"] / acc["reference_map50_95"])
        assert acc["ratio"] > 0.99 and acc["tier"] == "within 99%", (backend, acc)
        assert rec.calibration is None and "nothing is calibrated" in rec.null_reasons["calibration"]
        assert unexplained_nulls(rec) == []
    assert ref.accuracy["ratio"] == 1.0  # the torch-eager fp32 cell is the reference


@pytest.mark.slow
@pytest.mark.export
def test_a_runner_whose_outputs_are_spoiled_loses_its_accuracy_tier(tmp_path, cache_dir, monkeypatch):
    monkeypatch.setenv(CORRUPT_ENV, "onnxruntime=shift-classes")
    recs = _run(_runner(tmp_path, cache_dir, accuracy_images=16))
    assert recs["onnxruntime"].status == "parity_failed"  # parity sees it too; accuracy still says how much
    acc = recs["onnxruntime"].accuracy
    assert acc["ratio"] < 0.95 and acc["tier"] == "below 95%", acc
    assert recs["torch-eager"].accuracy["ratio"] == 1.0


@pytest.mark.slow
@pytest.mark.export
def test_random_weights_and_switched_off_accuracy_are_nulls_with_reasons(tmp_path, cache_dir):
    rec = _run(_runner(tmp_path, cache_dir, standin=False, run_id="a"), ("onnxruntime",))["onnxruntime"]
    assert rec.weights == "random-init:0" and rec.accuracy is None
    assert "their accuracy means nothing" in rec.null_reasons["accuracy"]
    rec = _run(_runner(tmp_path, cache_dir, accuracy=False, run_id="b"), ("onnxruntime",))["onnxruntime"]
    assert rec.weights.startswith("standin:") and rec.accuracy is None
    assert "--no-accuracy" in rec.null_reasons["accuracy"]


@pytest.mark.process
def test_tiers():
    assert per_cell.tier(1.0) == per_cell.tier(0.99) == "within 99%"
    assert per_cell.tier(0.985) == "within 95%"
    assert per_cell.tier(0.949) == "below 95%"
    assert per_cell.tier(None) is None


@pytest.mark.parametrize(
    ("kw", "why"),
    [
        ({"enabled": False}, "--no-accuracy"),
        ({"task": "depth"}, "no accuracy metric for task 'depth'"),
        ({"task": "seg"}, None),
        ({"task": "cls"}, None),
        ({"dynamic": True}, "dynamic-shape"),
        ({"remedy": True}, "remedy attempt"),
        ({"weights": "random-init:0"}, "their accuracy means nothing"),
        ({"user_data": True}, "stand-in weights were trained on the generated dataset"),
        ({"weights": "/w/yolo26n.pt"}, "give --data"),
        ({"weights": "/w/yolo26n.pt", "user_data": True}, None),
        ({}, None),
    ],
)
def test_when_accuracy_is_scored(kw, why):
    args = {
        "enabled": True,
        "task": "detect",
        "dynamic": False,
        "weights": "standin:abc",
        "user_data": False,
        "remedy": False,
        **kw,
    }
    got = per_cell.skip_reason(**args)
    assert (got is None) if why is None else (why in got)


def test_int8_cells_are_timed_with_the_fp32_cells_of_their_shape():
    from harness.execute.workload import group, workload_key

    def cell(backend, precision, shape=SHAPE):
        return Cell("n", "detect", "e2e", backend, "cpu", shape, 1, precision)

    cells = [
        cell("torch-eager", "fp32"),
        cell("onnxruntime", "fp32"),
        cell("onnxruntime", "int8"),
        cell("openvino", "int8"),
        cell("onnxruntime", "fp32", Shape(640, 640)),
    ]
    groups = group(cells)
    assert [len(g) for g in groups] == [4, 1]
    # they stay separate workloads for the report's comparisons
    assert workload_key(cells[1]) != workload_key(cells[2])


def test_the_paired_reference_of_a_mixed_group_is_an_fp32_cell():
    from types import SimpleNamespace

    from harness.execute.workload import _order

    def st(backend, precision):
        return SimpleNamespace(cell=Cell("n", "detect", "e2e", backend, "cpu", SHAPE, 1, precision))

    assert min([st("openvino", "int8"), st("onnxruntime", "fp32")], key=_order).cell.precision == "fp32"
    mixed = [st("onnxruntime", "int8"), st("torch-eager", "fp32"), st("openvino", "fp32")]
    assert min(mixed, key=_order).cell.backend == "torch-eager"


def test_fewer_images_above_640_pixels_the_same_for_every_cell_of_a_shape():
    assert per_cell.images_for(32, 640, 640) == per_cell.images_for(32, 320, 320) == 32
    assert per_cell.images_for(32, 384, 640) == 32
    assert per_cell.images_for(32, 1280, 1280) == 8
    assert per_cell.images_for(32, 4096, 4096) == per_cell.MIN_IMAGES
    assert per_cell.images_for(4, 1280, 1280) == 4  # never more than asked
