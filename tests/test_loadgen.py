"""The scenarios driven by MLPerf LoadGen (harness.scenarios): LoadGen's single-stream p90 against the harness's
clock over the same queries, on a sleep with a known service time and on a real runner (yolo26n at 160 through ONNX
Runtime); a server rate LoadGen rejects never reported as passing (the runner slowed with YOLO26_BENCH_SLOWDOWN);
LoadGen's verdicts and logs in the record; the stream count and the rate search; the durations; the camera check."""

from __future__ import annotations

import dataclasses
import itertools
import time
from pathlib import Path

import pytest

from harness.scenarios import camera, loadgen
from harness.scenarios import server as sv
from harness.scenarios import settings as st
from harness.scenarios.logs import DETAIL, read_detail
from harness.scenarios.results import (
    CLOCK_SLACK_MS,
    Target,
    clocks_agree,
    loadgen_percentile,
    multi_stream,
    single_stream,
)

pytestmark = [
    pytest.mark.skipif(loadgen.missing() is not None, reason=str(loadgen.missing())),
    # LoadGen keeps a real clock: these run under load in scripts/flaky_check.sh
    pytest.mark.timing,
]

#: a uniform service time on [LOW_MS, LOW_MS + SPAN_MS): its p90 is LOW_MS + 0.9 SPAN_MS (plus the sleep's overshoot)
LOW_MS, SPAN_MS = 4.0, 4.0
KNOWN_P90_MS = LOW_MS + 0.9 * SPAN_MS


def _uniform_sleep(scale: float = 1.0):
    """A query whose service time cycles through 50 evenly spaced values on [LOW_MS, LOW_MS + SPAN_MS) x scale."""
    steps = itertools.cycle(range(50))

    def query(_i: int = 0) -> None:
        time.sleep(scale * (LOW_MS + SPAN_MS * next(steps) / 50) / 1e3)

    return query


def _target(tmp_path: Path, query, durations: st.Durations = st.SHORT) -> Target:
    return Target(
        lambda n: ([query] * n, "sleep"), 2, 1, tmp_path / "loadgen" / "cell", tmp_path, durations, 0
    )


# -- single-stream: LoadGen and the harness agree ------------------------------------------------------------------
def test_single_stream_p90_of_a_known_service_time_agrees_with_the_harness_within_loadgens_interval(tmp_path):
    """LoadGen's single-stream p90 of a sleep with a known service time, and the harness's clock over the same
    queries (the record's `harness_p90`): it lies in LoadGen's interval, at most LoadGen's p90, and a system 4x slower
    comes out disagreeing. (The harness's own timing loop, run in another window, is not compared: under load its
    p90 once came out 15.5 ms, above the whole interval of LoadGen's next window, [10.1, 13.3] ms.)"""
    res = single_stream(_target(tmp_path, _uniform_sleep()), expected_ms=LOW_MS)
    lo, hi = res["p90_interval"]
    assert res["valid"] is True and res["loadgen"]["result"] == "VALID", res.get("reason")
    # LoadGen's p90 is at least the known one (a sleep never returns early) and below three times it: how far above
    # is the sleep's overshoot, a fraction of a ms idle, 2.7 ms in a loaded flaky-check pass, 7.9 ms under more load
    assert KNOWN_P90_MS <= res["p90"] < 3 * KNOWN_P90_MS
    assert lo <= res["p90"] <= hi == res["p90_guaranteed"]
    # LoadGen's clock contains the harness's on every query, and both p90s are the same order statistic
    assert res["clocks_agree"] is True and res["harness_p90"] <= res["p90"] + CLOCK_SLACK_MS
    # the other way: the interval of a system 4x slower (its lower end above 3x the known p90) excludes this figure
    slow = single_stream(_target(tmp_path / "slow", _uniform_sleep(4.0)), expected_ms=4 * LOW_MS)
    assert slow["valid"] is True, slow.get("reason")
    assert not clocks_agree(res["harness_p90"], slow["p90_interval"]), (
        res["harness_p90"],
        slow["p90_interval"],
    )
    assert slow["p90_interval"][0] - CLOCK_SLACK_MS > res["harness_p90"]


def test_the_harness_p90_is_loadgens_order_statistic_and_never_above_loadgens(tmp_path):
    """`loadgen_percentile` is LoadGen's own percentile rule (its p90 of its sample latencies, to the nanosecond),
    and the harness's clock over the same queries, at that order statistic, is at most LoadGen's p90: LoadGen stamps
    each query before the issue callback and its completion after the worker's clock stops."""
    settings = st.loadgen_settings(st.SINGLE_STREAM, st.SHORT, seed=0, expected_ms=LOW_MS)
    run, harness_ms = loadgen.run_test(st.SINGLE_STREAM, settings, [_uniform_sleep()], 2, tmp_path / "ss")
    lat, p90 = run.latencies_ms(), run.percentiles_ms()["p90"]
    assert len(harness_ms) == len(lat) >= st.SHORT.single_queries
    assert loadgen_percentile(lat, 0.9) == pytest.approx(p90, abs=1e-6)
    assert loadgen_percentile(harness_ms, 0.9) <= p90 + CLOCK_SLACK_MS
    # the rule itself: of 1..10, the p90 is the 10th value (index floor(0.9 x 10) = 9), not an interpolation
    assert loadgen_percentile([float(v) for v in range(10, 0, -1)], 0.9) == 10.0
    assert loadgen_percentile([3.0], 0.9) == 3.0 and loadgen_percentile([], 0.9) is None


def test_loadgen_keeps_its_logs_and_its_verdict_per_scenario(tmp_path):
    target = _target(tmp_path, _uniform_sleep())
    res = multi_stream(target, 2, expected_ms=LOW_MS)
    summary = tmp_path / res["loadgen"]["logs"]
    assert summary == tmp_path / "loadgen" / "cell" / "multi-stream" / "mlperf_log_summary.txt"
    assert "MultiStream" in summary.read_text() and "Result is : VALID" in summary.read_text()
    detail = read_detail(summary.parent / DETAIL)
    assert detail["effective_samples_per_query"] == 2 and res["streams"] == 2
    assert detail["effective_target_latency_percentile"] == pytest.approx(st.SHORT.multi_percentile)
    assert res["valid"] is (detail["result_validity"] == "VALID") is True
    assert (summary.parent / "mlperf_log_trace.json.gz").is_file()
    # query latency: two samples at once on two streams, each about LOW..LOW+SPAN ms
    assert LOW_MS <= res["p50"] <= LOW_MS + SPAN_MS + 1.0
    assert res["queries"] >= st.SHORT.multi_queries


# -- server: a rate LoadGen rejects is never reported as passing ---------------------------------------------------
@pytest.mark.slow  # a search of LoadGen server runs (7 s idle)
def test_server_search_reports_the_highest_rate_loadgen_calls_valid(tmp_path):
    d = dataclasses.replace(st.SHORT, server_steps=4)
    p50 = LOW_MS + SPAN_MS / 2  # within the bound: the search runs its steps
    # a 50 ms bound: under the flaky check's load the 4-8 ms sleep's p90 was 19-21 ms at every rate tried, which a
    # 20 ms bound made INVALID throughout (with 50 ms, under the same load: VALID to 73.8 q/s, INVALID from 81.7)
    res = sv.server(
        _target(tmp_path, _uniform_sleep(), d), 1, "sleep", 50.0, 1000 / 6.0, LOW_MS, service_ms=p50
    )
    tried = res["tried"]
    assert len(tried) == 4
    for t in tried:  # each verdict is the one LoadGen wrote in its own detail log
        detail = read_detail((tmp_path / t["logs"]).parent / DETAIL)
        assert t["ok"] is (detail["result_validity"] == "VALID")
        assert detail["effective_target_qps"] == pytest.approx(t["rate"], rel=1e-3)
        assert t["ok"] or t["reason"].startswith("LoadGen: INVALID")
    valid = [t["rate"] for t in tried if t["ok"]]
    verdicts = [(t["rate"], t["p90_ms"], t.get("reason")) for t in tried]
    assert valid and res["value"] == max(valid) and res["valid"] is True, verdicts
    lo, hi = res["rate_interval"]
    assert hi is None or (hi > lo and not next(t for t in tried if t["rate"] == hi)["ok"])
    # one server (a 6 ms mean service) cannot be VALID above its capacity
    assert res["value"] < 1000 / 6.0


@pytest.mark.slow
@pytest.mark.export
def test_server_never_reports_a_rate_loadgen_rejects_when_the_runner_is_slowed(tmp_path, monkeypatch, ort160):
    """yolo26n at 160 through ONNX Runtime: the search finds a rate LoadGen calls VALID under a generous bound (8x
    the single-stream p90: a sparse Poisson load on this shared machine costs 3x the back-to-back p90 already);
    the same runner slowed x20 by YOLO26_BENCH_SLOWDOWN (its median query alone then over the bound): LoadGen
    rejects that rate, and the slowed search reports no rate, with LoadGen's reason, never the plain one."""
    from harness.execute.runner import slowdown_factors
    from harness.scenarios import ScenarioConfig, streams_for

    runner, cell = ort160
    d = dataclasses.replace(st.SHORT, server_steps=4)
    # the slowed runs only need LoadGen to see the bound missed: 20 queries of a runner slowed x20 take 1/5 of
    # the 100 a VALID verdict needs (each query then takes ~20 median queries' time)
    few = dataclasses.replace(d, server_ms=200, server_queries=20)

    def target(cfg: ScenarioConfig, name: str) -> Target:
        return Target(
            streams_for(runner, cell, cfg), 2, 1, tmp_path / name, tmp_path, few if cfg.slowdown > 1 else d, 0
        )

    plain = ScenarioConfig(threads=1)
    ss = single_stream(target(plain, "plain"), expected_ms=2.0)
    bound, capacity = 8.0 * ss["p90"], 1000.0 / ss["p50"]
    found = sv.server(target(plain, "plain"), 1, "plain", bound, capacity, ss["p50"], service_ms=ss["p50"])
    rate = found["value"]
    assert found["valid"] is True and rate is not None, found.get("reason")

    monkeypatch.setenv("YOLO26_BENCH_SLOWDOWN", "onnxruntime=20")
    factor = slowdown_factors()["onnxruntime"]
    slowed = ScenarioConfig(threads=1, slowdown=factor)
    rejected = sv.server_step(target(slowed, "slowed"), 1, rate, bound, ss["p50"])
    assert rejected.valid is False and rejected.entry["ok"] is False
    assert rejected.entry["reason"].startswith("LoadGen: INVALID (latency constraint not met")
    assert rejected.entry["target_ms"] > bound
    res = sv.server(
        target(slowed, "slowed-search"), 1, "slowed", bound, capacity / factor, ss["p50"], factor * ss["p50"]
    )
    assert res["value"] is None and res["valid"] is False and "LoadGen: INVALID" in res["reason"]
    assert all(t["ok"] is False for t in res["tried"])


def test_server_whose_service_time_is_over_the_bound_stops_after_one_loadgen_run(tmp_path):
    sleep = _uniform_sleep()
    p50 = LOW_MS + SPAN_MS / 2  # the median query alone takes longer than the 5 ms bound
    res = sv.server(_target(tmp_path, sleep), 1, "sleep", 5.0, 1000 / 6.0, LOW_MS, service_ms=p50)
    (only,) = res["tried"]
    assert only["ok"] is False and only["reason"].startswith("LoadGen: INVALID (latency constraint not met")
    assert res["value"] is None and res["valid"] is False
    assert "is itself over the bound, so no lower rate was tried" in res["reason"]
    assert "against the 5 ms bound" in res["reason"]


# -- the rate search and the stream count, without LoadGen ---------------------------------------------------------
def test_rate_search_brackets_the_threshold_and_never_returns_a_failing_rate():
    def at(limit):
        return lambda r: sv.Step(r, r <= limit, {"rate": r})

    lo, hi, tried = sv.search(at(37.0), start=10.0, steps=12)
    assert lo <= 37.0 < hi and hi / lo <= sv.PRECISION
    assert all(s.valid == (s.rate <= 37.0) for s in tried)
    lo, hi, tried = sv.search(at(1.0), start=10.0, steps=3, floor=10.0 / 16)
    assert lo is None and hi == min(s.rate for s in tried) and len(tried) == 3
    lo, hi, _ = sv.search(at(1e9), start=10.0, steps=3)
    assert hi is None and lo == 10.0 * sv.RATE_STEP**2


def test_stream_count_is_the_fewest_within_the_best_concurrencys_interval():
    rows = [
        {"concurrency": 1, "ips": 40.0, "ips_interval": [37.0, 43.0]},
        {"concurrency": 2, "ips": 44.0, "ips_interval": [42.0, 46.0]},
        {"concurrency": 4, "ips": 45.0, "ips_interval": [41.5, 47.0]},
    ]
    assert sv.choose_streams(rows) == 1  # 1 stream's best round reaches the best's worst: noise could flip it
    rows[0]["ips_interval"] = [30.0, 41.0]
    assert sv.choose_streams(rows) == 2
    rows[1]["ips_interval"] = [38.0, 41.4]
    assert sv.choose_streams(rows) == 4
    assert sv.choose_streams([]) is None


@pytest.mark.slow  # a sweep of LoadGen offline runs (5 s idle)
def test_offline_sweep_runs_loadgen_offline_rounds_interleaved(tmp_path):
    d = dataclasses.replace(st.SHORT, offline_rounds=2)
    res = sv.offline_sweep(_target(tmp_path, lambda _i: time.sleep(0.004), d), (1, 2), 240.0, 2)
    by_c = {r["concurrency"]: r for r in res["sweep"]}
    assert [len(by_c[c]["rounds"]) for c in (1, 2)] == [2, 2]
    # two sleeping streams serve twice the images/s of one: the intervals are apart, so 2 is chosen
    assert by_c[2]["ips"] > 1.6 * by_c[1]["ips"]
    assert res["concurrency"] == 2 and res["value"] == by_c[2]["ips"] and res["valid"] is True
    assert (tmp_path / by_c[1]["logs"][1]).parent.name == "c1-r2"


# -- durations and availability ------------------------------------------------------------------------------------
def test_durations_say_how_they_differ_from_mlperfs_rules():
    assert st.durations("mlperf").differs_from_mlperf() == []
    said = " ".join(st.durations("short").differs_from_mlperf())
    assert "server: p90 target (MLPerf: p99)" in said and "(MLPerf: 600 s" in said
    with pytest.raises(ValueError, match="valid: short, mlperf"):
        st.durations("long")
    s = st.loadgen_settings(st.SERVER, st.MLPERF, seed=3, expected_ms=5, rate=7.0, bound_ms=100)
    assert (s.min_duration_ms, s.server_target_latency_percentile, s.server_target_latency_ns) == (
        600_000,
        0.99,
        100_000_000,
    )
    assert s.schedule_rng_seed == s.sample_index_rng_seed == 3
    with pytest.raises(ValueError, match="rate and its latency bound"):
        st.loadgen_settings(st.SERVER, st.SHORT, seed=0, expected_ms=5)


def test_missing_loadgen_is_a_reason_not_a_result(monkeypatch):
    import sys

    assert loadgen.missing() is None
    monkeypatch.setitem(sys.modules, "mlperf_loadgen", None)
    why = loadgen.missing()
    assert why and "mlperf_loadgen" in why and "wheels for CPython 3.10-3.13" in why


def test_a_failing_query_is_raised_after_loadgen_finishes(tmp_path):
    def broken(_i):
        raise RuntimeError("runtime gone")

    with pytest.raises(RuntimeError, match="runtime gone"):
        single_stream(_target(tmp_path, broken), expected_ms=1.0)


def test_a_grouped_target_gets_every_query_of_multi_stream_as_one_batch_call(tmp_path):
    """The camera-capacity search's batched mechanism: LoadGen's N samples issued together reach one call with all N
    indices; the other way, a plain target's N streams get one index per call."""
    grouped_calls: list[list[int]] = []
    plain_calls: list[object] = []
    sleep = _uniform_sleep()

    def batch_query(indices) -> None:
        grouped_calls.append(list(indices))
        sleep()

    def one(i) -> None:
        plain_calls.append(i)
        sleep()

    grouped = dataclasses.replace(
        _target(tmp_path / "g", None), streams_for=lambda n: ([batch_query], "one call of n"), grouped=True
    )
    res = multi_stream(grouped, 3, expected_ms=LOW_MS)
    assert res["valid"] is True and res["streams"] == 3 and "as one batched call" in res["rule"]
    assert grouped_calls and all(len(c) == 3 for c in grouped_calls)  # every query: one call of 3 samples
    assert len(grouped_calls) == res["queries"]
    multi_stream(_target(tmp_path / "p", one), 3, expected_ms=LOW_MS)
    assert plain_calls and all(isinstance(i, int) for i in plain_calls)  # one sample per call


# -- the camera check stays the harness's -----------------------------------------------------------------------------
def test_camera_counts_late_and_dropped_frames():
    fast = camera.camera(lambda: time.sleep(0.002), rates=(30,), seconds=1.0)
    slow = camera.camera(lambda: time.sleep(0.05), rates=(30,), seconds=2.0)
    assert fast["value"] == 0.0 and fast["valid"] is True and fast["driver"].startswith("harness")
    # a 50 ms query at 30 FPS (33 ms frames): every processed frame is late, and about every other one is dropped
    assert slow["value"] == 1.0 and slow["fps"]["30"]["processed"] < 0.7 * slow["fps"]["30"]["frames"]


# -- a real runner ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ort160(tmp_path_factory, cache_dir):
    """yolo26n at 160 exported through the session's cache and loaded in ONNX Runtime (1 thread)."""
    from harness import backends
    from harness.core.axes import Shape
    from harness.core.cell import Cell
    from harness.execute.runner import CellRunner, RunConfig

    out = tmp_path_factory.mktemp("loadgen-ort")
    svc = CellRunner(
        RunConfig(run_id="lg", results_dir=out, cache_dir=cache_dir, canary=False, threads=1), print
    )
    cell, be = Cell("n", "detect", "e2e", "onnxruntime", "cpu", Shape(160, 160)), backends.get("onnxruntime")
    mat = svc.materialize(cell)
    o = svc.export(be, cell, mat, out / "export.log", {})
    assert o.status == "ok", o.message
    runner = be.load(Path(o.artifact), cell, o.info)
    yield runner, cell
    runner.close()


@pytest.mark.slow
@pytest.mark.export
def test_single_stream_of_a_real_runner_agrees_with_the_harness_within_loadgens_interval(tmp_path, ort160):
    """LoadGen's single-stream over the runner's end-to-end call, and the harness's clock around the same queries
    (the record's `harness_p90`): the harness's p90 lies in LoadGen's interval. (The harness's own end-to-end
    rounds, timed in another window, are not compared here: on this shared 2-core machine two windows a second
    apart differed 2x; the sleep test above compares a separate timing loop, where the service time is known.)"""
    from harness.scenarios import ScenarioConfig, streams_for

    runner, cell = ort160
    target = Target(
        streams_for(runner, cell, ScenarioConfig(threads=1)), 2, 1, tmp_path, tmp_path, st.SHORT, 0
    )
    res = single_stream(target, expected_ms=1.0)
    assert res["valid"] is True, res.get("reason")
    lo, hi = res["p90_interval"]
    assert lo <= res["p90"] <= hi == res["p90_guaranteed"]
    assert res["clocks_agree"] is True and clocks_agree(res["harness_p90"], res["p90_interval"])
    # both clocks time the whole end-to-end call, LoadGen's around the harness's on every query, and both p90s are
    # the same order statistic: the harness's is at most LoadGen's. (How far below is LoadGen's own overhead per
    # query, not asserted: it is scheduling, and grows with load.)
    assert res["harness_p90"] <= res["p90"] + CLOCK_SLACK_MS
    assert res["queries"] >= 100 and res["mechanism"]
