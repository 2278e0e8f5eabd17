"""The screen that picks which cells run the scenarios in the default mode (harness.execute.screen): the fastest
per image from the timing phase are kept, the others carry why not with their figure; hand-made timings."""

from __future__ import annotations

from types import SimpleNamespace

from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.execute.screen import SCREEN_KEEP, screen
from harness.execute.usecase import wants_scenarios
from harness.measure.interleave import Timing


def _state(backend: str, shape: int, p50_ms: float, batch: int = 1, remedy: bool = False, error=None):
    cell = Cell("n", "detect", "e2e", backend, "cpu", Shape(shape, shape), batch=batch)
    t = Timing(cell.id, 5)
    t.samples = [p50_ms * 0.98, p50_ms, p50_ms * 1.02]
    t.error = error
    return SimpleNamespace(
        cell=cell,
        attempt=SimpleNamespace(cell_id=cell.id, remedy=remedy),
        timed=SimpleNamespace(timings={cell.id: t}),
        rec={"status": None},
    )


def test_the_fastest_per_image_are_kept_and_the_others_say_why():
    states = [
        _state("onnxruntime", 640, 30.0),
        _state("openvino", 320, 9.0),
        _state("onnxruntime", 320, 8.0),
        _state("torch-eager", 320, 20.0),
        _state("openvino", 640, 80.0, batch=8),  # 10 ms per image: third fastest
        _state("executorch-xnnpack", 320, 11.0),
    ]
    out = screen(states)
    kept = {cid for cid, why in out.items() if why is None}
    assert len(kept) == SCREEN_KEEP == 3
    assert kept == {states[2].cell.id, states[1].cell.id, states[4].cell.id}
    why = out[states[5].cell.id]
    assert "11.0 ms per image" in why and "up to 10.0 ms per image" in why and "--scenarios all" in why
    # the other way: with a faster executorch cell, executorch is kept and the batch-8 cell is screened out
    states[5] = _state("executorch-xnnpack", 320, 7.0)
    out = screen(states)
    assert out[states[5].cell.id] is None and out[states[4].cell.id] is not None


def test_failed_timings_remedies_and_dynamic_cells_are_not_ranked():
    failed = _state("openvino", 320, 1.0, error=RuntimeError("device lost"))
    remedy = _state("onnxruntime", 320, 1.0, remedy=True)
    plain = _state("torch-eager", 320, 20.0)
    out = screen([failed, remedy, plain])
    assert out == {plain.cell.id: None}


def test_the_scenario_mode_follows_the_screen_where_the_run_had_one():
    kept, dropped = _state("onnxruntime", 320, 8.0), _state("onnxruntime", 640, 30.0)
    n640 = dropped.cell  # yolo26n at 640, batch 1: the n640 rule's cell
    screened = screen([kept, dropped], keep=1)
    assert wants_scenarios("screen", kept.cell, screened) is None
    assert wants_scenarios("screen", n640, screened).startswith("screened out: model-only p50 30.0 ms")
    # no timing phase (one episode, --rounds): the n640 rule, and the others say why
    assert wants_scenarios("screen", n640, None) is None
    assert "no timing phase" in wants_scenarios("screen", kept.cell, None)
    assert wants_scenarios("n640", kept.cell, screened).startswith("scenarios run on yolo26n at 640")
    assert wants_scenarios("all", kept.cell, screened) is None
    assert wants_scenarios("none", kept.cell, screened).startswith("scenarios switched off")
