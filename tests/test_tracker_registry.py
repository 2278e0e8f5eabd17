"""Trackers register themselves in their own modules; harness.measure.trackers finds them (issue 26: adding a
quantity is its measurement, the record type and the report section, with no registration list to edit)."""

from __future__ import annotations

from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.measure import base
from harness.measure.trackers import discover, tracker_modules, trackers_for


def _cell(device: str = "cpu") -> Cell:
    return Cell(
        size="n", task="detect", head="e2e", backend="onnxruntime", device=device, shape=Shape(64, 64)
    )


def test_the_tracker_modules_are_found_by_their_registration():
    assert tracker_modules() == [
        "harness.measure.cuda_timing",
        "harness.measure.energy",
        "harness.measure.gpu_memory",
        "harness.measure.host_bound",
        "harness.measure.host_memory",
        "harness.measure.throttle",
    ]
    discover()
    assert sorted(base.TRACKERS, key=lambda n: base.TRACKER_ORDER[n])[:4] == [
        "host_memory",
        "gpu_memory",
        "energy",
        "cuda_events",
    ]


def test_a_new_tracker_runs_in_its_order_and_a_name_registers_once(monkeypatch):
    discover()
    monkeypatch.setattr(base, "TRACKERS", dict(base.TRACKERS))
    monkeypatch.setattr(base, "TRACKER_ORDER", dict(base.TRACKER_ORDER))
    import harness.measure.trackers as trackers

    monkeypatch.setattr(trackers, "TRACKERS", base.TRACKERS)
    monkeypatch.setattr(trackers, "TRACKER_ORDER", base.TRACKER_ORDER)

    class First(base.Tracker):
        field = "first"

    base.register_tracker("first", order=0)(lambda cell: First())
    names = [type(t).__name__ for t in trackers_for(_cell())]
    assert names[0] == "First" and names[1] == "HostMemoryTracker"
    assert "First" not in [type(t).__name__ for t in trackers_for(_cell(), skip=("first",))]
    try:
        base.register_tracker("first")(lambda cell: First())
    except ValueError as e:
        assert "registered twice" in str(e)
    else:
        raise AssertionError("a second registration under one name was accepted")
