"""The main job's plan on the suite (harness.plan.screen_budget through the plugin): a budget too small for the
first-screen cells says so in one line and runs what fits; `--resume` with a larger budget runs only the cells
still missing. The cells' prices come from a fake timeline (invented seconds, no speed figures: taken as they
are), so what fits is decided far above any noise of the speed probe."""

from __future__ import annotations

import json

import pytest

from harness.plan.durations import TIMELINE, TIMELINE_VERSION
from harness.plan.screen_budget import WAIT_BUDGET
from tests.reliability_helpers import suite

ORT = "yolo26n-detect-e2e-onnxruntime-cpu-320x320-b1-fp32"
EAGER = "yolo26n-detect-e2e-torch-eager-cpu-320x320-b1-fp32"


def fake_prices(results, seconds: float) -> None:
    """An earlier run's timeline pricing each cell at `seconds` (its load), the run's end at nothing."""
    run = results / "fake-prices"
    run.mkdir(parents=True)
    doc = {"version": TIMELINE_VERSION, "run_id": "fake-prices", "finish_s": 0.0,
           "cell_s": {c: {"load": seconds} for c in (ORT, EAGER)}}  # fmt: skip
    (run / TIMELINE).write_text(json.dumps(doc))


def cells_recorded(run_dir) -> list[str]:
    lines = (run_dir / "cells.jsonl").read_text().splitlines()
    return [r["cell_id"] for r in map(json.loads, lines) if not r.get("remedy_of")]


# slow: real exports and a suite run, twice
@pytest.mark.slow
@pytest.mark.process
def test_a_small_budget_runs_what_fits_and_resume_with_a_larger_one_runs_only_the_missing_cell(tmp_path):
    results = tmp_path / "results"
    fake_prices(results, 100.0)
    args = ["--sizes", "n", "--backends", "onnxruntime,torch-eager", "--devices", "cpu", "--shapes", "320",
            "--precisions", "fp32", "--rounds", "3",
            "--no-accuracy", "--scenarios", "none", "--no-history", "--no-report", "--no-e2e", "--results-dir",
            str(results), "--cache-dir", str(tmp_path / "cache"), "--run-id", "budgeted"]  # fmt: skip
    p = suite(*args, "--time-budget", "150s")  # one 100 s cell fits, not two
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-4000:]
    warnings = [line for line in out.splitlines() if "plan: WARNING" in line]
    assert len(warnings) == 1 and "too small for the first-screen cells (2 cells" in warnings[0], out[-4000:]
    assert "plan: 1 of 2 cells in 2 min 30 s; left for later: yolo26n at 320 (1 cell)" in out, out[-4000:]
    run = results / "budgeted"
    first = cells_recorded(run)
    assert len(first) == 1 and first[0] in (ORT, EAGER)
    plan = json.loads((run / "env.json").read_text())["plan"]
    assert plan["kind"] == "screen" and plan["left_out"] == {WAIT_BUDGET: list({ORT, EAGER} - set(first))}
    # resumed with a budget that holds both: only the missing cell runs, the recorded one is not run again
    p = suite(*args, "--resume", "--time-budget", "1h")
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-4000:]
    assert "plan: 2 of 2 cells in 1 h 00 min: every cell fits" in out, out[-4000:]
    assert "already recorded in run budgeted" in out or "1 skipped" in out, out[-4000:]
    second = cells_recorded(run)
    assert sorted(second) == sorted([ORT, EAGER]) and second[0] == first[0]  # each once: the first kept
    plan = json.loads((run / "env.json").read_text())["plan"]
    assert not plan["left_out"] and len(plan["sessions"]) == 2
