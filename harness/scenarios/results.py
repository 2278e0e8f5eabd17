"""Each LoadGen scenario of one loaded runner as a record entry: LoadGen's verdict (VALID / INVALID, its early-
stopping verdict and the percentile it guarantees at the query count run), its figures, and where its logs are.

- single-stream: LoadGen SingleStream; metric its p90. `p90_interval`: from the 1% lower order statistic of
  LoadGen's own sample latencies (its trace) to LoadGen's early-stopping estimate (the p90 it guarantees at 99%).
  `harness_p90`: the harness's clock over the same queries at the same order statistic as LoadGen's p90
  (`loadgen_percentile`), and whether it lies in that interval.
- multi-stream: LoadGen MultiStream, one sample per stream per query; metric the target percentile of the query
  latency (p90 short, p99 mlperf).
- offline: LoadGen Offline at each concurrency of the sweep, the rounds interleaved; metric the images/s at the
  fewest streams whose rounds reach the best concurrency's (harness.scenarios.server.choose_streams).
- server: LoadGen Server runs at searched rates (harness.scenarios.server.search).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.measure.stats import quantile_interval
from harness.scenarios import settings as st
from harness.scenarios.loadgen import BatchQuery, Query, run_test
from harness.scenarios.logs import SUMMARY, LoadgenRun

#: `streams_for(n)` -> n query functions (one per stream; one batch query where the target is grouped) and the
#: runtime's concurrency mechanism
StreamsFor = Callable[[int], tuple[list[Query] | list[BatchQuery], str]]
#: the one-sided confidence of LoadGen's early stopping; the interval's lower end uses the same
EARLY_STOPPING_CONFIDENCE = 0.99
#: LoadGen's clock starts before the harness's (its issue thread, then the callback) and stops after it (its
#: completion call): 0.02-0.03 ms per query with a 5 ms sleep as the system under test on the 2-core EPYC. The
#: clocks agree when the harness's p90 is within the interval widened below by this much.
CLOCK_SLACK_MS = 0.1


@dataclass(frozen=True)
class Target:
    """What LoadGen drives: the runner's streams over a sample library, and where its logs go."""

    streams_for: StreamsFor
    samples: int  # the sample library's size (the bundled images)
    batch: int  # images per sample (the cell's static batch)
    log_dir: Path  # results/<run>/loadgen/<cell-id>
    run_dir: Path  # the record's paths are relative to it
    durations: st.Durations
    seed: int = 0
    #: `streams_for(n)` gives one batch query that takes the n samples LoadGen issues together as one call (the
    #: camera-capacity search's batched mechanism; harness.scenarios.loadgen.Dispatcher)
    grouped: bool = False

    def rel(self, path: Path) -> str:
        try:
            return path.relative_to(self.run_dir).as_posix()
        except ValueError:
            return str(path)


def loadgen_percentile(values: Sequence[float], p: float) -> float | None:
    """The `p` quantile (a fraction) as LoadGen reports its percentiles (loadgen/results.cc): the sorted values at
    index floor(p x count). LoadGen's clock contains the harness's on every query (it stamps the query before the
    issue callback and the completion in `QuerySamplesComplete`, after the worker's clock stops), so at the same
    order statistic the harness's figure is at most LoadGen's. numpy's interpolated percentile sits up to one order
    statistic lower: where the tail is sparse (a loaded 2-core machine) that was 3.6 ms below LoadGen's p90."""
    if not values:
        return None
    ordered = sorted(values)
    return float(ordered[min(int(p * len(ordered)), len(ordered) - 1)])


def percentile_interval(
    values: Sequence[float], p: float, guaranteed: float | None
) -> list[float | None] | None:
    """[lower, upper] of the `p` quantile: the order statistic below it at 99% (one-sided, as early stopping) and
    LoadGen's early-stopping estimate above it (else the order statistic above it, None where none bounds it)."""
    iv = quantile_interval(values, p, level=1 - 2 * (1 - EARLY_STOPPING_CONFIDENCE))
    if iv is None:
        return None
    lo, hi = iv
    return [lo, guaranteed if guaranteed is not None else hi]


def clocks_agree(harness_ms: float | None, interval: list[float | None] | None) -> bool:
    """Whether the harness's figure lies in LoadGen's interval (its lower end less CLOCK_SLACK_MS)."""
    if harness_ms is None or not interval or interval[0] is None:
        return False
    hi = interval[1] if interval[1] is not None else math.inf
    return interval[0] - CLOCK_SLACK_MS <= harness_ms <= hi


def loadgen_section(run: LoadgenRun, target: Target) -> dict:
    """What ran: LoadGen's version, the durations profile and LoadGen's effective settings, and its logs."""
    effective = {k[len("effective_") :]: v for k, v in run.detail.items() if str(k).startswith("effective_")}
    keep = (
        "scenario",
        "samples_per_query",
        "target_qps",
        "target_latency_ns",
        "target_latency_percentile",
        "min_duration_ms",
        "min_query_count",
        "min_sample_count",
        "sample_index_rng_seed",
        "schedule_rng_seed",
    )
    return {
        "version": run.detail.get("loadgen_version"),
        "durations": target.durations.name,
        "settings": {k: effective[k] for k in keep if k in effective},
        "result": run.detail.get("result_validity"),
        "early_stopping_met": run.early_stopping_met,
        "early_stopping": run.early_stopping_text() or None,
        "logs": target.rel(run.directory / SUMMARY),
    }


def _verdict(out: dict, run: LoadgenRun) -> dict:
    out["valid"] = run.valid
    if not run.valid:
        out["reason"] = run.reason()
    return out


def _durations_rule(d: st.Durations, ms: int, queries: int, percentile: float, unit: str = "queries") -> str:
    return (
        f"LoadGen's verdict (VALID: at least {ms / 1000:g} s and {queries} {unit}, and early stopping guarantees "
        f"the p{100 * percentile:g} at 99% confidence); '{d.name}' durations"
    )


def single_stream(target: Target, expected_ms: float) -> dict:
    """LoadGen SingleStream on one stream: the next query when the previous returned; metric its p90."""
    d = target.durations
    queries, mechanism = target.streams_for(1)
    settings = st.loadgen_settings(st.SINGLE_STREAM, d, seed=target.seed, expected_ms=expected_ms)
    run, harness_ms = run_test(
        st.SINGLE_STREAM, settings, queries, target.samples, target.log_dir / st.SINGLE_STREAM
    )
    lat, pct, es = run.latencies_ms(), run.percentiles_ms(), run.early_stopping_ms()
    p90_iv = percentile_interval(lat, d.single_percentile, es.get(f"p{100 * d.single_percentile:g}"))
    harness_p90 = loadgen_percentile(harness_ms, d.single_percentile)
    qps = run.number("result_qps_with_loadgen_overhead")
    p99_iv = quantile_interval(lat, 0.99)
    out = {
        "scenario": st.SINGLE_STREAM,
        "metric": f"p{100 * d.single_percentile:g} end-to-end latency (LoadGen SingleStream)",
        "value": pct.get(f"p{100 * d.single_percentile:g}"),
        "unit": "ms",
        "rule": _durations_rule(d, d.single_ms, d.single_queries, d.single_percentile)
        + "; the next query when the previous returned",
        "p50": pct.get("p50"),
        "p90": pct.get("p90"),
        "p99": pct.get("p99"),
        "p90_guaranteed": es.get("p90"),
        "p90_interval": p90_iv,
        "p99_interval": list(p99_iv) if p99_iv else None,
        "harness_p90": harness_p90,
        "clocks_agree": clocks_agree(harness_p90, p90_iv),
        "queries": int(run.number("result_query_count") or len(lat)),
        "duration_s": run.duration_s(),
        "throughput_ips": target.batch * qps if qps else None,
        "mechanism": mechanism,
        "driver": "mlperf_loadgen",
        "loadgen": loadgen_section(run, target),
    }
    return _verdict(out, run)


def multi_stream(target: Target, streams: int, expected_ms: float) -> dict:
    """LoadGen MultiStream: each query is one sample per stream, issued at once; the next when all returned."""
    d = target.durations
    queries, mechanism = target.streams_for(streams)
    settings = st.loadgen_settings(
        st.MULTI_STREAM, d, seed=target.seed, expected_ms=expected_ms, samples_per_query=streams
    )
    run, _ = run_test(
        st.MULTI_STREAM,
        settings,
        queries,
        target.samples,
        target.log_dir / st.MULTI_STREAM,
        grouped=target.grouped,
    )
    q_lat, pct, es = run.query_latencies_ms(), run.percentiles_ms(per_query=True), run.early_stopping_ms()
    key = f"p{100 * d.multi_percentile:g}"
    secs = run.duration_s()
    n = int(run.number("result_query_count") or len(q_lat))
    p99_iv = quantile_interval(q_lat, 0.99)
    out = {
        "scenario": st.MULTI_STREAM,
        "metric": f"{key} latency of a query of one sample per stream (LoadGen MultiStream)",
        "value": pct.get(key),
        "unit": "ms",
        "rule": _durations_rule(d, d.multi_ms, d.multi_queries, d.multi_percentile)
        + f"; a query is {streams} samples issued at once, "
        + ("as one batched call" if target.grouped else "one per stream")
        + ", the next when all returned",
        "streams": streams,
        "percentile": d.multi_percentile,
        "p50": pct.get("p50"),
        "p90": pct.get("p90"),
        "p99": pct.get("p99"),
        f"{key}_guaranteed": es.get(key),
        # the p99's 95% interval, unless the p99 is the target: then its interval is early stopping's, below
        "p99_interval": list(p99_iv) if p99_iv else None,
        f"{key}_interval": percentile_interval(q_lat, d.multi_percentile, es.get(key)),
        "queries": n,
        "duration_s": secs,
        "throughput_ips": target.batch * streams * n / secs if secs else None,
        "mechanism": mechanism,
        "driver": "mlperf_loadgen",
        "loadgen": loadgen_section(run, target),
    }
    return _verdict(out, run)


def offline_run(target: Target, streams: int, expected_qps: float, name: str) -> tuple[LoadgenRun, str]:
    """One LoadGen Offline run on `streams` streams (all samples in one query, every stream busy)."""
    queries, mechanism = target.streams_for(streams)
    settings = st.loadgen_settings(
        st.OFFLINE, target.durations, seed=target.seed, expected_ms=1.0, expected_qps=expected_qps
    )
    run, _ = run_test(st.OFFLINE, settings, queries, target.samples, target.log_dir / st.OFFLINE / name)
    return run, mechanism
