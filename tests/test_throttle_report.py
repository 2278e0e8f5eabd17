"""What the report says of a CPU quota: beside a figure whose timed rounds the quota throttled (the latency table's
rounds, where "unstable" is said), and in the run's header (the quota, how often it throttled during the run), each
both ways: a record the quota never throttled, and a run without a quota, say nothing of it."""

from __future__ import annotations

from types import SimpleNamespace

from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.cpu_quota import Quota
from harness.core.record import new_record
from harness.core.results_dir import dig
from harness.measure.stats import latency_from_samples
from harness.measure.throttle import section, words
from harness.report.fmt import Notes
from harness.report.header import _quota_line
from harness.report.tables import p50_spread

QUOTA = Quota(0.5, 50000, 100000, "/sys/fs/cgroup/cpu/job/cpu.cfs_quota_us", stat_file="/x/cpu.stat")


def record(throttle: dict | None):
    rec = new_record("r", Cell("n", "detect", "e2e", "onnxruntime", "cpu", Shape(640, 640)), "seeded")
    rec.latency_ms = latency_from_samples([40.0 + (i % 7) for i in range(60)], "model")
    rec.throttle = throttle
    return rec


def test_a_figure_taken_while_throttled_says_so_beside_its_rounds():
    _, rounds = p50_spread(record(section(60, 42, 1.3, QUOTA)), Notes())
    assert (
        rounds.text == "60 taken while the CPU quota of 0.5 CPU throttled (42 of 60 periods, 1.3 s held back)"
    )
    # the other way: rounds the quota never throttled, and a record from a machine without a quota
    for quiet in (section(60, 0, 0.0, QUOTA), None):
        _, rounds = p50_spread(record(quiet), Notes())
        assert rounds.text == "60" and words(quiet) == ""


class FakeRun(SimpleNamespace):
    def env_value(self, *keys, default="unknown"):
        value = dig(self.env, ".".join(keys))
        return default if value is None or value == "" else value


def test_the_header_names_the_quota_and_the_throttling_of_the_run():
    env = {
        "host": {"cpu_quota": QUOTA.to_env()},
        "cpu_throttle": {"during_run": {"periods": 9269, "throttled": 8915, "throttled_s": 412.0}},
    }
    line = _quota_line(FakeRun(env=env))
    assert line.startswith("0.5 CPU (50000/100000 us, /sys/fs/cgroup/cpu/job/cpu.cfs_quota_us)")
    assert "throttled in 8915 of 9269 periods during the run" in line
    none = Quota(None, reason="no CPU quota: cpu.max is 'max' from /sys/fs/cgroup up to /sys/fs/cgroup")
    assert _quota_line(FakeRun(env={"host": {"cpu_quota": none.to_env()}})).startswith(
        "none (no CPU quota: cpu.max"
    )
    assert _quota_line(FakeRun(env={"host": {}})).startswith("not recorded")
