"""`--time-budget` on the suite: the collected cells cut to the plan, from a fake (synthetic) history database."""

from __future__ import annotations

import subprocess
import sys

import pytest

from harness.core.envinfo import LIBRARIES
from harness.core.version import library_version
from harness.history import synthetic
from harness.history.store import import_run_dir
from tests.conftest import REPO

ORT = synthetic.cell("onnxruntime", device="cpu", height=320)
EAGER = synthetic.cell("torch-eager", device="cpu", height=320)


def fake_history(results, p50_ms: dict[int, float]) -> None:
    """Two synthetic nights of the two cells: each 10 s of load (so 10 s a cell); onnxruntime's p50 per night."""
    for night, ort_p50 in p50_ms.items():
        run_id = f"synthetic-night-{night}"
        at = f"2026-12-0{night}T01:23:00+00:00"
        records = []
        for c, p50 in ((ORT, ort_p50), (EAGER, 10.0)):
            rec = synthetic.make_record(run_id, c, samples_ms=[p50] * 20)
            rec.load_s, rec.started_at, rec.duration_s = 10.0, at, 20.0  # the run's wall: 20 s, 10 s a cell
            records.append(rec)
        # this machine's library versions: no library change touches a cell (tests/test_night_changes.py does)
        env = synthetic.make_env(run_id, at, libraries={n: library_version(n) for n in LIBRARIES})
        run = synthetic.write_run(results, env, records)
        import_run_dir(results / "history.sqlite", run)


def collect(results, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "suites/", "--benchmark-only", "--profile", "quick", "--collect-only",
         "-q", "-p", "no:randomly", "--results-dir", str(results), "--cache-dir", str(results.parent / "cache"),
         *args],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


# slow: a suite run of real cells (the budget's and the resume's figures need cells that ran)
@pytest.mark.slow
@pytest.mark.process
def test_time_budget_takes_the_regressed_cell_and_deselects_the_rest(tmp_path):
    results = tmp_path / "results"
    fake_history(results, {1: 10.0, 2: 13.0})  # onnxruntime 30% slower on the second night: regressed
    p = collect(results, "--time-budget", "15s")
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert "plan:   regressed, failed or missing: 1 cells, 10 s" in out, out
    assert f"{ORT.id}]" in p.stdout and f"{EAGER.id}]" not in p.stdout  # 5 s left: torch-eager waits
    assert "deselected" in out and "the quick profile is covered every" in out
    assert "cells never fit" in out  # the default-priced exports (about 20 s each) exceed 15 s
    # the other way: a budget that holds every cell deselects none
    p = collect(results, "--time-budget", "2h")
    out = p.stdout + p.stderr
    assert p.returncode == 0 and "deselected" not in out, out
    assert f"{ORT.id}]" in p.stdout and f"{EAGER.id}]" in p.stdout


@pytest.mark.process
def test_bad_time_budget_is_one_error_line(tmp_path):
    p = collect(tmp_path / "results", "--time-budget", "soon")
    errors = [line for line in p.stderr.splitlines() if line.startswith("ERROR:")]
    assert p.returncode == 4 and len(errors) == 1 and "--time-budget: 'soon' is not a duration" in errors[0]
    assert not (tmp_path / "results").exists()


# slow: a suite run of real cells (the budget's and the resume's figures need cells that ran)
@pytest.mark.slow
@pytest.mark.process
def test_cells_the_run_already_recorded_cost_nothing_under_resume(tmp_path):
    """--resume skips the cells the run holds, so the budget goes to the others: torch-eager is taken in 15 s
    although the regressed onnxruntime cell (already recorded tonight) comes first otherwise."""
    results = tmp_path / "results"
    fake_history(results, {1: 10.0, 2: 13.0})
    env = synthetic.make_env("tonight", "2026-12-03T01:23:00+00:00")
    synthetic.write_run(results, env, [synthetic.make_record("tonight", ORT, samples_ms=[13.0] * 20)])
    # the two cells alone: a never-measured cell priced under 15 s (openvino's, from the plan's table) would be
    # the rotation's first and leave torch-eager waiting
    p = collect(results, "--time-budget", "15s", "--run-id", "tonight", "--resume", "--backends",
                "onnxruntime,torch-eager")  # fmt: skip
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert f"{EAGER.id}]" in p.stdout and "regressed, failed or missing" not in out, out
