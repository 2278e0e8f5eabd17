"""The time budget held while a suite runs (harness.plan.replan through the plugin): a run slower than its estimate
leaves its lowest-ranked cell not yet started for later, in one line, as no record, in env.json's plan, and
`--resume` with a larger budget runs it.

The cells' prices come from a fake timeline (invented seconds, no speed figures: taken as they are): torch-eager's
cell at 45 s, onnxruntime's at 0.5 s, their export phase at 0.01 s, and a budget of 49 s that holds both with the
plan's reserve (5%). The export phase's real seconds (an export and two fresh-process probes: more than 3.5 s on
any machine, well under 48 s on a loaded 2-core one) leave the 45 s cell past the budget: the re-plan after the
export phase must leave it, and only it (torch-eager ranks below onnxruntime in the price table)."""

from __future__ import annotations

import json

import pytest

from harness.plan.durations import TIMELINE, TIMELINE_VERSION
from harness.plan.replan import WAIT_REPLAN
from tests.reliability_helpers import suite

ORT = "yolo26n-detect-e2e-onnxruntime-cpu-320x320-b1-fp32"
EAGER = "yolo26n-detect-e2e-torch-eager-cpu-320x320-b1-fp32"


def fake_prices(results, seconds: dict[str, float]) -> None:
    """An earlier run's timeline pricing each cell's load at its `seconds`, its fresh export and probe at 0.01 s,
    the run's end at nothing."""
    run = results / "fake-prices"
    run.mkdir(parents=True)
    doc = {"version": TIMELINE_VERSION, "run_id": "fake-prices", "finish_s": 0.0,
           "prep_s": {c: [0.01, False] for c in seconds},
           "cell_s": {c: {"load": s} for c, s in seconds.items()}}  # fmt: skip
    (run / TIMELINE).write_text(json.dumps(doc))


def records(run_dir) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "cells.jsonl").read_text().splitlines()]


# slow: a real export and suite runs
@pytest.mark.slow
@pytest.mark.process
def test_a_run_slower_than_its_estimate_leaves_its_lowest_cell_for_later_and_resume_runs_it(tmp_path):
    results = tmp_path / "results"
    fake_prices(results, {ORT: 0.5, EAGER: 45.0})
    args = ["--sizes", "n", "--backends", "onnxruntime,torch-eager", "--devices", "cpu", "--shapes", "320",
            "--precisions", "fp32", "--rounds", "3", "--no-accuracy", "--scenarios", "none", "--no-history",
            "--no-report", "--no-e2e", "--results-dir", str(results), "--cache-dir", str(tmp_path / "cache"),
            "--run-id", "held"]  # fmt: skip
    p = suite(*args, "--time-budget", "49s", "-rs")
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-4000:]
    assert "plan: 2 of 2 cells in 49 s: every cell fits" in out, out[-4000:]  # the plan held both
    lines = [x for x in out.splitlines() if "[yolo26-bench] re-plan after the export phase" in x]
    assert len(lines) == 1 and "left for later: yolo26n at 320 (1 cell)" in lines[0], out[-4000:]
    assert "--resume --run-id held --time-budget" in lines[0]
    assert "left for later by the re-plan after the export phase" in out  # the cell's skip says why
    run = results / "held"
    assert [r["cell_id"] for r in records(run)] == [ORT]  # no record for the cell left: --resume runs it
    plan = json.loads((run / "env.json").read_text())["plan"]
    assert plan["left_out"] == {WAIT_REPLAN: [EAGER]} and plan["selected_ids"] == [ORT]
    (replan,) = plan["replans"]
    assert replan["after"] == "the export phase" and replan["cells"] == [EAGER] and replan["saved_s"] >= 45
    assert replan["elapsed_s"] + replan["estimate_left_s"] > replan["budget_s"] == 49
    # resumed with a budget that holds it: only the cell left for later runs
    p = suite(*args, "--resume", "--time-budget", "1h")
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-4000:]
    assert "re-plan" not in out, out[-4000:]
    assert sorted(r["cell_id"] for r in records(run)) == sorted([ORT, EAGER])
    plan = json.loads((run / "env.json").read_text())["plan"]
    assert not plan["left_out"] and len(plan["sessions"]) == 2
