"""Each cell's expected seconds and its source (harness.plan.durations), from fake (synthetic) records."""

from __future__ import annotations

import pytest

from harness.history import synthetic
from harness.plan.durations import WORK_EXPONENT, estimate_cells, history_from_runs

N640 = synthetic.cell("onnxruntime", size="n", device="cpu", height=640)
S640 = synthetic.cell("onnxruntime", size="s", device="cpu", height=640)
OV = synthetic.cell("openvino", size="s", device="cpu", height=640)


def rec(c, *, status="ok", export_s=10.0, p50=5.0, at="2026-12-01T01:00:00+00:00", duration_s=40.0) -> dict:
    """A record's fields the plan reads (synthetic)."""
    return {
        "synthetic": True, "cell_id": c.id, "status": status, "backend": c.backend, "device": c.device,
        "size": c.size, "height": c.shape.height, "width": c.shape.width, "batch": c.batch, "cache_hit": False,
        "export_s": export_s, "load_s": 0.0, "started_at": at, "duration_s": duration_s,
        "latency_ms": {"p50": p50},
    }  # fmt: skip


def night(run_id: str, at: str, records: list[dict], selected: list[str] | None = None):
    env = {"plan": {"selected_ids": selected}} if selected else {}
    return (run_id, at, records, env)


def test_history_cost_is_the_records_parts_scaled_to_the_runs_wall():
    # two cells of 10 s of export each, a run of 40 s: each costs 20 s; a cached export drops its share
    hist = history_from_runs([night("n1", "2026-12-01", [rec(N640), rec(OV)])])
    costs = estimate_cells([N640, OV], hist, cached=[OV.id])
    assert costs[N640.id].source == "history" and costs[N640.id].seconds == pytest.approx(20.0)
    assert costs[OV.id].seconds == pytest.approx(2.0)  # the cached-prep default, not the 20 s export share


def test_nearest_cell_of_the_same_backend_and_device_scaled_by_work():
    hist = history_from_runs([night("n1", "2026-12-01", [rec(N640)], None)])
    costs = estimate_cells([S640, OV], hist)
    assert costs[S640.id].source == "nearest"
    assert costs[S640.id].seconds == pytest.approx(40.0 * (20.7 / 5.4) ** WORK_EXPONENT)
    # the other way: no measured cell of openvino on cpu, so the defaults
    assert costs[OV.id].source == "default" and costs[OV.id].seconds > 0
    # and a skip here costs nothing, whatever is known
    assert estimate_cells([N640], hist, skips=[N640.id])[N640.id].seconds == 0.0


def test_regressed_failed_and_missing_from_the_history():
    runs = [
        night("n1", "2026-12-01", [rec(N640, p50=5.0), rec(S640, p50=5.0)]),
        night("n2", "2026-12-02", [rec(N640, p50=6.0), rec(S640, p50=5.2), rec(OV, status="run_failed")],
              selected=[N640.id, S640.id, OV.id, "yolo26x-never-recorded"]),
    ]  # fmt: skip
    hist = history_from_runs(runs)
    assert hist.regressed == {N640.id}  # 20% slower; S640 4% slower is not
    assert hist.failed == {OV.id}
    assert hist.missing == {"yolo26x-never-recorded"}
    assert hist.measured[N640.id].started_at == "2026-12-02"
