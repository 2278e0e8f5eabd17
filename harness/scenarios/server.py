"""The offline sweep (LoadGen Offline at each concurrency, rounds interleaved), the stream count it chooses, and the
server rate search whose every step is a LoadGen Server run with early stopping.

Stream count: the fewest streams whose best round reaches the worst round of the concurrency with the highest
median images/s, i.e. whose round interval overlaps the best's (with 3 rounds each interval is the rounds' range,
an order-statistic interval of the median with 75% coverage). More streams than that add contention to every
query's latency, and a choice between two concurrencies the rounds cannot tell apart would flip on noise.

Rate search: from 0.6 x the chosen streams' offline queries/s, up or down by RATE_STEP until a VALID and an INVALID
rate bracket the answer, then geometric bisection until the bracket is within PRECISION or the durations' steps are
spent. The result is the highest rate LoadGen called VALID; every rate tried stays in the record with LoadGen's
verdict and its logs.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from harness.scenarios import settings as st
from harness.scenarios.loadgen import check, run_test
from harness.scenarios.logs import SUMMARY
from harness.scenarios.results import Target, loadgen_section, offline_run

RATE_STEP = 1.5
PRECISION = 1.15
START_SHARE = 0.6
#: LoadGen issues 10% more offline samples than it expects to need; each round's guess (the fastest round so far,
#: else single-stream's rate) is raised by this much again, since a run shorter than `offline_ms` is INVALID while a
#: longer one only costs time (a 0.5 s minimum with 2x headroom: about 1.1 s per round)
OFFLINE_HEADROOM = 2.0
#: Server tests at least this long (MLPerf's 600 s) are capped in outstanding queries (`outstanding_cap`)
CAP_FROM_MS = 10_000


# -- offline sweep and the stream count ------------------------------------------------------------------------
def offline_sweep(
    target: Target, sweep: Sequence[int], single_qps: float, cores: int, rounds: int | None = None
) -> dict:
    """LoadGen Offline at each concurrency of `sweep`, `rounds` times interleaved (c1 c2 c4 c1 c2 c4 ...); the
    result at the concurrency `choose_streams` picks. `single_qps`: single-stream queries/s, the first guess of
    each concurrency's rate (LoadGen sizes its one query from it)."""
    rounds = rounds or target.durations.offline_rounds
    per: dict[int, list[dict]] = {c: [] for c in sweep}
    mechanisms: dict[int, str] = {}
    for r in range(rounds):
        for c in sweep:
            check()  # no round starts once the run was told to stop
            seen = [x["qps"] for x in per[c] if x["qps"]]
            guess = max(seen) if seen else single_qps * min(c, max(1, cores))
            run, mechanisms[c] = offline_run(target, c, OFFLINE_HEADROOM * guess, f"c{c}-r{r + 1}")
            qps = run.number("result_samples_per_second")
            per[c].append(
                {
                    "qps": qps,
                    "valid": run.valid,
                    "reason": run.reason(),
                    "samples": len(run.samples),
                    "logs": target.rel(run.directory / SUMMARY),
                    "loadgen": loadgen_section(run, target),
                }
            )
    rows = []
    for c in sweep:
        ips = [target.batch * x["qps"] for x in per[c] if x["qps"]]
        rows.append(
            {
                "concurrency": c,
                "batch": target.batch,
                "ips": statistics.median(ips) if ips else None,
                "ips_interval": [min(ips), max(ips)] if ips else None,
                "rounds": [round(v, 3) for v in ips],
                "valid": all(x["valid"] for x in per[c]),
                "reasons": sorted({x["reason"] for x in per[c] if x["reason"]}),
                "logs": [x["logs"] for x in per[c]],
            }
        )
    chosen = choose_streams(rows)
    best = next((r for r in rows if r["concurrency"] == chosen), None)
    d = target.durations
    out = {
        "scenario": st.OFFLINE,
        "metric": "images per second at the fewest streams within the best concurrency's interval "
        "(LoadGen Offline)",
        "value": best["ips"] if best else None,
        "unit": "images/s",
        "valid": bool(best and best["valid"]),
        "rule": f"LoadGen's verdict on every round at the chosen concurrency (VALID: each run at least "
        f"{d.offline_ms / 1000:g} s and {d.offline_samples} samples); {rounds} round(s) of each concurrency of "
        f"{list(sweep)} interleaved; the fewest streams whose best round reaches the best concurrency's worst; "
        f"batch fixed by the cell's static export; '{d.name}' durations",
        "batch": target.batch,
        "concurrency": chosen,
        "ips_interval": best["ips_interval"] if best else None,
        "ips_interval_coverage": 1 - 2 * 0.5**rounds,
        "sweep": rows,
        "mechanism": mechanisms.get(chosen) if chosen else None,
        "driver": "mlperf_loadgen",
        "loadgen": per[chosen][0]["loadgen"] if chosen else None,
    }
    if best and not best["valid"]:
        out["reason"] = "; ".join(best["reasons"]) or "LoadGen called a round INVALID"
    if best is None:
        out["reason"] = "no offline round completed a sample"
    return out


def choose_streams(rows: Sequence[dict]) -> int | None:
    """The fewest streams whose interval (`ips_interval`, the rounds' range) reaches the lower end of the interval
    of the concurrency with the highest median images/s; None without any measured row."""
    measured = [r for r in rows if r.get("ips") and r.get("ips_interval")]
    if not measured:
        return None
    best = max(measured, key=lambda r: r["ips"])
    floor = best["ips_interval"][0]
    return min(r["concurrency"] for r in measured if r["ips_interval"][1] >= floor)


# -- the server rate search ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Step:
    """One LoadGen Server run at `rate`."""

    rate: float
    valid: bool
    entry: dict


def search(
    at_rate: Callable[[float], Step],
    start: float,
    steps: int,
    precision: float = PRECISION,
    floor: float = 0.0,
) -> tuple[float | None, float | None, list[Step]]:
    """The highest rate `at_rate` calls valid: up or down by RATE_STEP from `start` until a valid and an invalid
    rate bracket it, then geometric bisection until the bracket is within `precision` or `steps` runs are spent
    (or the rate would fall below `floor`). Returns (highest valid rate, lowest invalid rate above it, steps). No
    step starts once the run was told to stop (KeyboardInterrupt, harness.scenarios.loadgen.check)."""
    tried: list[Step] = []
    lo: float | None = None
    hi: float | None = None
    rate = start
    while len(tried) < steps:
        check()
        step = at_rate(rate)
        tried.append(step)
        if step.valid:
            lo = rate if lo is None else max(lo, rate)
            if hi is None:
                rate *= RATE_STEP
                continue
        else:
            hi = rate if hi is None else min(hi, rate)
            if lo is None:
                if rate / RATE_STEP < floor:
                    break
                rate /= RATE_STEP
                continue
        if hi / lo <= precision:
            break
        rate = math.sqrt(lo * hi)
    return lo, hi, tried


def outstanding_cap(d: st.Durations, rate: float, bound_ms: float, streams: int) -> int:
    """LoadGen's `server_max_async_queries` for a Server test at `rate` (0: no cap, as in MLPerf's own runs, for
    tests shorter than CAP_FROM_MS). A Server test issues on its schedule until its min duration, whatever the system
    under test does, and LoadGen's Python bindings cannot end a test; past this many outstanding queries LoadGen
    ends the schedule early, which is how a stopped run (harness.scenarios.loadgen.Dispatcher) ends a 600 s test in
    seconds (about (1 - percentile) x min duration + 3 bounds). The cap never changes a verdict: with more queries
    outstanding than the share the percentile lets be late, plus three bounds' worth of arrivals and the streams'
    queries in service (margin 8), more than that share has already waited past the bound, so the test would be
    INVALID anyway (ended early it is: min duration not met)."""
    if d.server_ms < CAP_FROM_MS:
        return 0
    queries = max(rate * d.server_ms / 1000.0, d.server_queries)
    late = math.ceil(round((1.0 - d.server_percentile) * queries, 6))
    arriving = math.ceil(round(3.0 * rate * bound_ms / 1000.0, 6))
    return late + arriving + streams + 8


def server_step(target: Target, streams: int, rate: float, bound_ms: float, expected_ms: float) -> Step:
    """One LoadGen Server run at `rate` queries/s with the `streams` streams; VALID is LoadGen's verdict."""
    d = target.durations
    queries, _ = target.streams_for(streams)
    settings = st.loadgen_settings(
        st.SERVER, d, seed=target.seed, expected_ms=expected_ms, rate=rate, bound_ms=bound_ms
    )
    settings.server_max_async_queries = outstanding_cap(d, rate, bound_ms, streams)
    run, _ = run_test(
        st.SERVER, settings, queries, target.samples, target.log_dir / st.SERVER / f"rate-{rate:.4g}"
    )
    pct = run.percentiles_ms()
    key = f"p{100 * d.server_percentile:g}"
    entry = {
        "rate": round(rate, 4),
        "ok": run.valid,
        "result": run.detail.get("result_validity"),
        "p99_ms": pct.get("p99"),
        "p90_ms": pct.get("p90"),
        "target_ms": pct.get(key),
        "queries": int(run.number("result_query_count") or len(run.samples)),
        "overlatency": run.number("result_overlatency_query_count"),
        "completed_qps": run.number("result_completed_samples_per_sec"),
        "scheduled_qps": run.number("result_scheduled_samples_per_sec"),
        "early_stopping_met": run.early_stopping_met,
        "logs": target.rel(run.directory / SUMMARY),
    }
    if not run.valid:
        entry["reason"] = run.reason()
    entry["loadgen"] = loadgen_section(run, target)
    return Step(rate, run.valid, entry)


def server(
    target: Target,
    streams: int,
    mechanism: str,
    bound_ms: float,
    capacity_qps: float,
    expected_ms: float,
    service_ms: float | None = None,
) -> dict:
    """The highest Poisson rate LoadGen calls VALID under `bound_ms` at the durations' percentile, searched from
    START_SHARE x `capacity_qps` (the streams' offline queries/s). `service_ms`: the single-stream p50; where the
    median query alone takes longer than the bound no rate can pass (queueing only adds), so one LoadGen run at the
    start rate records the verdict and the search stops there, rather than spending minutes on ever lower rates.
    (Not the single-stream p90: one noisy window put it over the bound while LoadGen's p90 at 17 q/s was 78 ms.)"""
    d = target.durations
    key = f"p{100 * d.server_percentile:g}"
    start = START_SHARE * capacity_qps
    hopeless = service_ms is not None and service_ms > bound_ms
    lo, hi, tried = search(
        lambda r: server_step(target, streams, r, bound_ms, expected_ms),
        start,
        1 if hopeless else d.server_steps,
        floor=start / 16,
    )
    entries = [s.entry for s in tried]
    chosen = next((s.entry for s in tried if s.rate == lo), None)
    # the rates as the tried entries record them
    lo, hi = (None if r is None else round(r, 4) for r in (lo, hi))
    out: dict[str, Any] = {
        "scenario": st.SERVER,
        "metric": f"highest Poisson rate LoadGen calls VALID with {key} <= {bound_ms:g} ms (LoadGen Server)",
        "value": lo,
        "unit": "queries/s",
        "valid": lo is not None,
        "rule": f"LoadGen's verdict at each rate (VALID: at least {d.server_ms / 1000:g} s and {d.server_queries} "
        f"queries, {key} within {bound_ms:g} ms and early stopping guarantees it at 99% confidence); latency from "
        f"the scheduled arrival (queueing counts); rates from {START_SHARE:g} x the offline queries/s of the "
        f"streams, x{RATE_STEP:g} steps then bisection to within {PRECISION:.0%}, at most {d.server_steps} runs; "
        f"'{d.name}' durations"
        + (
            "; each run capped in outstanding queries (LoadGen's server_max_async_queries) past the share that "
            "fails the bound anyway, so a stopped run ends in seconds"
            if d.server_ms >= CAP_FROM_MS
            else ""
        ),
        "bound_ms": bound_ms,
        "percentile": d.server_percentile,
        "rate_interval": [lo, hi],
        "tried": entries,
        "concurrency": streams,
        "mechanism": mechanism,
        "seed": target.seed,
        "driver": "mlperf_loadgen",
        "loadgen": chosen["loadgen"] if chosen else (entries[-1]["loadgen"] if entries else None),
    }
    if chosen:
        out["p99_ms"], out["target_ms"] = chosen["p99_ms"], chosen["target_ms"]
    if lo is None:
        low = min(entries, key=lambda e: e["rate"]) if entries else None
        out["reason"] = (
            f"no rate LoadGen called VALID, down to {low['rate']:.3g} q/s ({key} {low['target_ms']:.4g} ms against "
            f"the {bound_ms:g} ms bound): {low.get('reason')}"
            if low and low.get("target_ms") is not None
            else f"no rate LoadGen called VALID: {low.get('reason')}"
            if low
            else "no server run completed"
        )
        if hopeless:
            out["reason"] += (
                f"; the single-stream p50 ({service_ms:.4g} ms) is itself over the bound, so no lower rate was "
                "tried"
            )
    elif hi is None:
        out["reason_interval"] = (
            f"every rate tried was VALID (up to {max(e['rate'] for e in entries):.3g} q/s): the search ran out of "
            "steps before a rate failed"
        )
    return out
