"""The progress line's clock (harness.pytest_plugin.eta.RunClock) on a fake session: the start line's form (which
benchmarks/cold_default.sh parses), the rescaled lines after a part is done, and the timeline it leaves (what
scripts/plan_prices.py and the next run read). Figures are invented (synthetic); nothing runs."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest

from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.execute.config import RunConfig
from harness.execute.workload import workload_label
from harness.plan import estimate as est
from harness.pytest_plugin import eta

ORT = Cell("n", "detect", "e2e", "onnxruntime", "cpu", Shape(640, 640))
OV = Cell("n", "detect", "e2e", "openvino", "cpu", Shape(640, 640))
W = workload_label(ORT)
SPEED = {"python_s": 0.02, "compute_s": 0.03}


@pytest.fixture
def clock(tmp_path, monkeypatch, request):
    monkeypatch.setattr(eta, "cannot_run", lambda cell, probes: False)
    monkeypatch.setattr(eta, "run_speed", lambda run_dir: SPEED)
    rounds = getattr(request, "param", None)
    cfg = RunConfig("this", tmp_path / "results", tmp_path / "cache", scenarios="none", export_workers=2,
                    rounds=rounds)  # fmt: skip
    cfg.run_dir.mkdir(parents=True)
    lines: list[str] = []
    session = SimpleNamespace(run_config=cfg, results_dir=cfg.results_dir, cache_dir=cfg.cache_dir,
                              run_id="this", progress=lines.append)  # fmt: skip
    c = eta.plan_of(session, [ORT, OV], [])
    return c, lines


def record(c: Cell, scenarios: bool = False) -> SimpleNamespace:
    return SimpleNamespace(cell_id=c.id, status="ok", remedy_of=None, load_s=0.2, first_run_ms=50.0,
                           timing={"elapsed_s": 6.0, "with": ["x"], "trials": 20},
                           scenarios={"offline": {}} if scenarios else None)  # fmt: skip


def test_the_start_line_keeps_its_form_and_says_where_the_prices_came_from(clock):
    c, lines = clock
    c.say_start()
    assert re.search(r"estimate: about (.+?) left \(", lines[0])  # what benchmarks/cold_default.sh reads
    assert "1 workload(s): export phase" in lines[0] and "2 from the plan (prices.yaml)" in lines[0]
    assert c.timeline["estimate_at_start_s"] == pytest.approx(c.at_start_s, abs=0.1)
    assert c.timeline["machine_speed"] == SPEED


def test_a_part_done_slower_than_priced_rescales_the_rest_and_says_so(clock, monkeypatch):
    c, lines = clock
    monkeypatch.setattr(est, "RESCALE_MIN_S", 1.0)  # the fake run's export phase is a few seconds
    planned = c.estimate.parts[est.EXPORT_PHASE].seconds
    left = c.estimate.remaining_s() - planned
    prepared = {
        x.id: SimpleNamespace(prep_s=planned, rec=SimpleNamespace(cache_hit=False)) for x in (ORT, OV)
    }
    c.export_phase_done(2 * planned, prepared)  # twice its estimate
    assert "the rest x2.00" in lines[-1] and "after the export phase" in lines[-1]
    assert c.estimate.remaining_s() == pytest.approx(2 * left)
    # the other way: a part done as priced says nothing of a rescale
    c2_lines: list[str] = []
    c.session.progress = c2_lines.append
    c.estimate.done_estimated_s, c.estimate.done_actual_s = 100.0, 100.0
    c.say_left("x")
    assert "the rest x" not in c2_lines[-1]


def test_the_timeline_holds_each_cells_parts(clock):
    c, _ = clock
    c.export_phase_done(10.0, {x.id: SimpleNamespace(prep_s=10.0, rec=SimpleNamespace(cache_hit=False))
                               for x in (ORT, OV)})  # fmt: skip
    c.timing_phase_done(8.0)
    c.workload_done(W, 12.0, [record(ORT), record(OV)])
    c.finish(1.0)
    timeline = json.loads((c.session.run_config.run_dir / est.TIMELINE).read_text())
    assert timeline["timing_s"] == {W: 8.0}
    parts = timeline["cell_s"]
    assert set(parts) == {ORT.id, OV.id}
    assert parts[ORT.id]["load"] == pytest.approx(0.25) and parts[ORT.id]["timing"] == pytest.approx(3.75)
    assert sum(p["stages"] for p in parts.values()) == pytest.approx(12.0)  # the workload's own seconds
    assert timeline["machine_speed"] == SPEED and timeline["estimate_at_start_parts"]["cells_by_source"]


@pytest.mark.parametrize("clock", [10], indirect=True)
def test_with_rounds_each_workloads_own_seconds_hold_its_loads_and_timing(clock):
    c, _ = clock
    assert est.TIMING_PHASE not in c.estimate.parts
    c.timing_phase_done(0.01)  # the plugin still calls it: nothing was timed there
    c.workload_done(W, 12.0, [record(ORT), record(OV)])
    parts = c.cell_parts()
    assert parts[ORT.id]["timing"] == pytest.approx(3.0)  # the workload's 6 s of timing over its 2 cells
    assert sum(p["stages"] for p in parts.values()) == pytest.approx(12.0 - 0.5 - 6.0)
