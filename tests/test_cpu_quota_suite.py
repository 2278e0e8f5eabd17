"""A real suite run inside a 1-CPU cgroup quota on a machine of 2 or more cores (scripts/in_cpu_quota.py makes the
child cgroup): its default thread budget is 1, the runtime reads 1 back, and env.json holds the quota and its
throttle counters at the run's start and end, the timed record its own. Where no cgroup can be made here (not
root, no writable cpu controller) it is skipped with the reason."""

from __future__ import annotations

import json
import sys

import pytest

from harness import threads
from tests.conftest import REPO
from tests.reliability_helpers import suite

CELL = "yolo26n-detect-e2e-onnxruntime-cpu-160x160-b1-fp32"


# slow: a real export (shared through the session's cache) and a suite run
@pytest.mark.slow
@pytest.mark.process
def test_a_run_in_a_one_cpu_quota_takes_one_thread_and_records_the_quota(tmp_path, cache_dir):
    cores = threads.physical_cores()
    if cores < 2:
        pytest.skip(
            f"this process can use {cores} core: a 1-CPU quota changes nothing here (2 or more needed)"
        )
    results = tmp_path / "results"
    prefix = [sys.executable, str(REPO / "scripts" / "in_cpu_quota.py"), "--cpus", "1", "--"]
    p = suite("--sizes", "n", "--tasks", "detect", "--heads", "e2e", "--backends", "onnxruntime",
              "--devices", "cpu", "--shapes", "160", "--precisions", "fp32", "--rounds", "40", "--no-accuracy",
              "--scenarios", "none", "--no-history", "--no-report", "--no-e2e", "--results-dir", str(results),
              "--cache-dir", str(cache_dir), "--run-id", "quota", prefix=prefix)  # fmt: skip
    out = p.stdout + p.stderr
    if p.returncode == 77:
        pytest.skip(next((x for x in p.stderr.splitlines() if "SKIP" in x), "no cgroup could be made here"))
    assert p.returncode == 0, out[-4000:]
    env = json.loads((results / "quota" / "env.json").read_text())
    # the default budget is the physical cores within the quota: 1 of this machine's `cores`
    t = env["threads"]
    assert t["budget"] == 1 < cores and "within the cgroup CPU quota of 1 CPU" in t["source"], t
    assert t["cpu_budget"] == 1.0 and t["cpu_budget_bound_by"] == "cgroup CPU quota"
    q = env["host"]["cpu_quota"]
    assert (
        q["cpus"] == 1.0
        and q["quota_us"] == q["period_us"]
        and q["source"].endswith(("cpu.cfs_quota_us", "cpu.max"))
    )
    assert "yolo26-quota-" in q["cgroup"], q
    counters = env["cpu_throttle"]
    start, end = counters["start"], counters["end"]
    assert start is not None and end is not None, counters
    assert end["nr_periods"] > start["nr_periods"] and end["nr_throttled"] >= start["nr_throttled"]
    assert counters["during_run"]["periods"] == end["nr_periods"] - start["nr_periods"]
    recs = [json.loads(x) for x in (results / "quota" / "cells.jsonl").read_text().splitlines()]
    rec = next(r for r in recs if r["cell_id"] == CELL)
    assert rec["status"] == "ok" and rec["threads"] == 1, (rec["status"], rec["threads"], rec["reason"])
    th = rec["throttle"]
    assert th["quota_cpus"] == 1.0 and th["periods"] >= 1 and 0 <= th["throttled"] <= th["periods"], th
    assert "the command was throttled in" in p.stderr  # the wrapper's own count, from the same cpu.stat
