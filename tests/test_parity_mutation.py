"""Mutation tests of parity on real outputs: yolo26n exported and run through real runtimes at 320x320.

The broken variants (the corruption knob's modes, harness.measure.corrupt) of a real ONNX Runtime output must fail
at fp32 and at fp16; the output as it came passes fp32; a real fp16 run passes fp16: the ONNX export converted to
fp16 (every initializer, activation and the input) and run by ONNX Runtime, which reads fp16 back from the graph.
(OpenVINO's f16 hint runs bf16 on a CPU without native fp16; with random-init weights bf16 moves boxes by tens of
pixels, and such a cell is parity_failed at the fp16 bounds, as torch's own bf16 autocast is.) The knob is also
checked end to end on a real run. Exports go to the session's tmp cache (tests/conftest.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import backends
from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.record import CellRecord
from harness.execute.runner import CellRunner, RunConfig
from harness.measure.corrupt import CORRUPT_ENV, corrupt
from harness.measure.parity import compare
from harness.yolo.inputs import letterboxed
from tests.conftest import LEAN_RUN

SHAPE = Shape(320, 320)
# each mode and the metric that must name it
BREAKS = {"zero-scores": "unmatched_frac", "shift-classes": "class_agreement", "shift-boxes": "box_offset_px"}


def _runner(results, cache_dir, run_id) -> CellRunner:
    # random-init weights, as the fp16 bounds were set from: they amplify rounding (a trained network's fp16 run,
    # the stand-in's, passes even the fp32 bounds)
    cfg = RunConfig(
        run_id=run_id,
        results_dir=results,
        cache_dir=cache_dir,
        max_time_s=0.1,
        block_s=0.02,
        warmup=1,
        standin=False,
        **LEAN_RUN,  # these tests read parity and status
    )
    return CellRunner(cfg, progress=lambda m: None)


def _outputs(cell: Cell, rec: CellRecord):
    """The backend's outputs on the cell's input: the record's artifact loaded and run once more."""
    runner = backends.get(cell.backend).load(Path(rec.artifact), cell, {})
    try:
        x = runner.prepare(letterboxed(cell.shape.height, cell.shape.width, cell.batch))
        result = runner.run(x)
        runner.synchronize()
        return runner.outputs(result)
    finally:
        runner.close()


class Ran:
    """A cell run through the runner: its record, the backend's outputs, the reference and their layout."""

    def __init__(self, runner: CellRunner, cell: Cell) -> None:
        self.cell = cell
        self.rec = runner.run_cell(cell)
        assert self.rec.status == "ok", self.rec.reason
        self.outputs = _outputs(cell, self.rec)
        mat = runner.materialize(cell)
        h, w = cell.shape.height, cell.shape.width
        self.reference = runner.references.get(mat, cell, h, w, {})
        self.layout = runner.references.layout(mat, cell, h, w, {})


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return tmp_path_factory.mktemp("mutation-results")


@pytest.fixture(scope="module")
def detect(results, cache_dir) -> Ran:
    return Ran(
        _runner(results, cache_dir, "m-detect"), Cell("n", "detect", "e2e", "onnxruntime", "cpu", SHAPE)
    )


@pytest.fixture(scope="module")
def detect_fp16(detect, tmp_path_factory):
    """The detect cell's ONNX export converted to fp16 and run by ONNX Runtime on the CPU: (runner, outputs)."""
    import onnx
    import onnxruntime as ort

    from harness.backends.onnxruntime import OrtRunner, session_options

    try:
        from onnxruntime.transformers.float16 import convert_float_to_float16
    except ImportError as e:
        pytest.skip(f"onnxruntime.transformers.float16 is not importable ({e})")
    path = tmp_path_factory.mktemp("fp16") / "fp16.onnx"
    onnx.save(convert_float_to_float16(onnx.load(detect.rec.artifact), keep_io_types=False), str(path))
    session = ort.InferenceSession(
        str(path), sess_options=session_options(1), providers=["CPUExecutionProvider"]
    )
    runner = OrtRunner(session, path)
    return runner, runner.outputs(runner.run(runner.prepare(letterboxed(SHAPE.height, SHAPE.width, 1))))


@pytest.mark.slow
@pytest.mark.export
def test_real_fp32_output_passes_fp32_and_says_what_it_compared(detect):
    p = detect.rec.parity
    assert p["ok"] and p["failed"] == [] and p["method"] == "detections" and p["precision"] == "fp32"
    c = p["compared"]
    assert c["rows_ref"] == c["rows_out"] == 300 and 0 < c["ref_above_floor"] < 300
    assert c["matched"] >= c["ref_above_floor"] - p["metrics"]["unmatched_ref"]
    assert p["metrics"]["box_iou_mean"] > 0.999 and p["metrics"]["class_agreement"] == 1.0
    assert compare(detect.outputs, detect.reference, detect.layout, "fp32").ok  # the reloaded run agrees too


@pytest.mark.slow
@pytest.mark.export
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("mode", list(BREAKS))
def test_broken_outputs_fail(detect, mode, precision):
    broken, _ = corrupt(detect.outputs, (mode,), detect.layout)
    p = compare(broken, detect.reference, detect.layout, precision)
    assert not p.ok and BREAKS[mode] in p.failed, (mode, precision, p.metrics)
    assert BREAKS[mode] in p.reason()


@pytest.mark.slow
@pytest.mark.export
def test_real_fp16_run_passes_fp16_not_fp32_and_its_broken_variants_fail(detect, detect_fp16):
    runner, outputs = detect_fp16
    assert runner.precision_executed == "fp16", runner.precision_detail
    p = compare(outputs, detect.reference, detect.layout, "fp16")
    assert p.ok, (p.failed, p.metrics)
    assert not compare(outputs, detect.reference, detect.layout, "fp32").ok  # fp32 bounds are stricter
    for mode, metric in BREAKS.items():
        broken, _ = corrupt(outputs, (mode,), detect.layout)
        q = compare(broken, detect.reference, detect.layout, "fp16")
        assert not q.ok and metric in q.failed, (mode, q.metrics)


@pytest.mark.slow
@pytest.mark.export
def test_knob_on_a_real_run_fails_the_named_backend_only(detect, results, cache_dir, monkeypatch):
    monkeypatch.setenv(CORRUPT_ENV, "onnxruntime=shift-classes")
    runner = _runner(results, cache_dir, "m-knob")
    rec = runner.run_cell(detect.cell)
    assert rec.status == "parity_failed" and rec.corrupted == ["shift-classes"]
    assert rec.parity["corrupted"] == ["shift-classes"] and "class_agreement" in rec.parity["failed"]
    assert CORRUPT_ENV in rec.reason and "class_agreement" in rec.reason
    assert rec.failure["class"] == "numerical_mismatch"
    eager = runner.run_cell(detect.cell.with_(backend="torch-eager"))
    assert eager.status == "ok" and eager.corrupted is None


@pytest.mark.slow
@pytest.mark.export
def test_seg_masks_dropped_fail(results, cache_dir):
    seg = Ran(_runner(results, cache_dir, "m-seg"), Cell("n", "seg", "e2e", "onnxruntime", "cpu", SHAPE))
    p = seg.rec.parity
    assert p["ok"] and p["metrics"]["mask_iou_mean"] > 0.99, p
    broken, notes = corrupt(seg.outputs, ("drop-masks",), seg.layout)
    assert notes == ["drop-masks: mask prototypes zeroed"]
    for precision in ("fp32", "fp16"):
        q = compare(broken, seg.reference, seg.layout, precision)
        assert not q.ok and "mask_iou_mean" in q.failed, q.metrics


@pytest.mark.slow
@pytest.mark.export
def test_raw_head_passes_and_zeroed_scores_fail(results, cache_dir):
    raw = Ran(_runner(results, cache_dir, "m-raw"), Cell("n", "detect", "raw", "onnxruntime", "cpu", SHAPE))
    p = raw.rec.parity
    assert p["ok"] and p["method"] == "raw-head" and p["metrics"]["boxes_rel_l2"] < 1e-4, p
    broken, _ = corrupt(raw.outputs, ("zero-scores",), raw.layout)
    q = compare(broken, raw.reference, raw.layout, "fp16")
    assert not q.ok and "scores_rel_l2" in q.failed and "boxes_rel_l2" not in q.failed


def test_every_break_fails_a_constructed_output_too():
    """The fast tier's case: each break this module applies to real outputs, applied to constructed end-to-end
    rows (tests/test_parity.py's), fails naming the same metric; the unbroken rows pass."""
    from harness.measure.corrupt import MODES
    from harness.measure.parity import Layout
    from tests.test_parity import _dets

    layout = Layout("detect", "e2e", nc=80, imgsz=(SHAPE.height, SHAPE.width))
    ref = _dets()
    assert set(BREAKS) <= set(MODES)
    assert compare([ref.copy()], [ref], layout, "fp32").ok
    for mode, metric in BREAKS.items():
        broken, _ = corrupt([ref.copy()], (mode,), layout)
        p = compare(broken, [ref], layout, "fp32")
        assert not p.ok and metric in p.failed, (mode, p.metrics)
