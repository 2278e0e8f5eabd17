"""The scenarios' load generators: how queries are issued, and what each scenario reports under which rule.

Modelled on MLPerf Inference's LoadGen (mlcommons/inference, loadgen/): the harness issues the queries and owns the
clock (`perf_counter` around each query, in the thread that runs it); a query is one end-to-end pipeline call
(harness.measure.pipeline). The minimum durations and query counts are far below LoadGen's (600 s, 24576 or
270336 queries): a CPU matrix cannot spend ten minutes per cell. Each result says its rule and whether it held.

- single-stream: the next query is issued when the previous one returns; metric p90 (LoadGen's), p50 and p99 too.
- multi-stream: each query is `streams` samples issued at once, one per stream; the next query when all returned;
  metric p99 of the query latency (LoadGen's MultiStream, with the stream count of the deployment: 8 cameras on a
  GPU, the thread budget on a CPU).
- server: Poisson arrivals at a rate, served by the fewest streams within 10% of the best offline throughput;
  each query's latency runs from its arrival, so queueing counts; metric the highest rate whose p99 stays under
  the bound, found by a search over rates (2x steps, then bisection to within 10%).
- offline: every stream busy all the time; metric images per second, at the concurrency that maximises it.
- camera: frames arrive every 1/fps; the worker always takes the newest frame; a frame whose result is not ready
  by the next frame's arrival (or that is never processed) is missed.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from harness.core.stats import quantile_interval

Query = Callable[[], object]

#: the queries a percentile needs to mean something (p99 of fewer is the maximum)
MIN_QUERIES = 100


@dataclass(frozen=True)
class Budget:
    """How long each scenario runs: at least `min_queries` and `min_s`, at most `max_s` (then it is invalid)."""

    min_queries: int = MIN_QUERIES
    min_s: float = 1.0
    max_s: float = 6.0

    def met(self, queries: int, elapsed_s: float) -> bool:
        """Whether `queries` over `elapsed_s` satisfy the minimums (the result's validity rule)."""
        return queries >= self.min_queries and elapsed_s >= self.min_s

    def done(self, queries: int, elapsed_s: float) -> bool:
        """Whether to stop issuing: the minimums are met, or the time is up."""
        return self.met(queries, elapsed_s) or elapsed_s >= self.max_s


def _pct(values: Sequence[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def _interval(values: Sequence[float], p: float) -> list[float | None] | None:
    iv = quantile_interval(values, p)
    return [iv[0], iv[1]] if iv else None


def single_stream(query: Query, budget: Budget = Budget(), clock=time.perf_counter) -> dict:
    """Queries one after another; p50/p90/p99 of their latency (ms)."""
    lat: list[float] = []
    t0 = clock()
    while True:
        s = clock()
        query()
        lat.append((clock() - s) * 1e3)
        elapsed = clock() - t0
        if budget.done(len(lat), elapsed):
            break
    return {
        "scenario": "single-stream",
        "metric": "p90 end-to-end latency",
        "value": _pct(lat, 90),
        "unit": "ms",
        "valid": budget.met(len(lat), elapsed),
        "rule": f">= {budget.min_queries} queries and >= {budget.min_s:g} s, next query when the previous returns",
        "p50": _pct(lat, 50),
        "p90": _pct(lat, 90),
        "p99": _pct(lat, 99),
        "p99_interval": _interval(lat, 0.99),
        "queries": len(lat),
        "duration_s": round(elapsed, 3),
    }


def _threads(n: int, target: Callable[[int], None]) -> None:
    """Run target(0..n-1) on n threads; re-raise the first error."""
    errors: list[BaseException] = []

    def wrap(i: int) -> None:
        try:
            target(i)
        except BaseException as e:
            errors.append(e)

    ts = [threading.Thread(target=wrap, args=(i,), daemon=True) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]


def multi_stream(
    queries: Sequence[Query], mechanism: str, budget: Budget = Budget(), clock=time.perf_counter
) -> dict:
    """Each query issues one sample on every stream at once and ends when all returned; p99 of query latency."""
    n = len(queries)
    start = [threading.Event() for _ in range(n)]
    done = threading.Barrier(n + 1)
    stop = [False]
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        while True:
            start[i].wait()
            start[i].clear()
            if stop[0]:
                return
            try:
                queries[i]()
            except BaseException as e:
                errors.append(e)
            done.wait()

    ts = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(n)]
    for t in ts:
        t.start()
    lat: list[float] = []
    t0 = clock()
    try:
        while not errors:
            s = clock()
            for e in start:
                e.set()
            done.wait()
            lat.append((clock() - s) * 1e3)
            if budget.done(len(lat), clock() - t0):
                break
    finally:
        stop[0] = True
        for e in start:
            e.set()
        for t in ts:
            t.join(timeout=5)
    if errors:
        raise errors[0]
    elapsed = clock() - t0
    return {
        "scenario": "multi-stream",
        "metric": "p99 latency of a query of one sample per stream",
        "value": _pct(lat, 99),
        "unit": "ms",
        "valid": budget.met(len(lat), elapsed),
        "rule": f">= {budget.min_queries} queries and >= {budget.min_s:g} s; a query is {n} samples issued at "
        "once, one per stream, the next when all returned",
        "streams": n,
        "p50": _pct(lat, 50),
        "p99": _pct(lat, 99),
        "p99_interval": _interval(lat, 0.99),
        "queries": len(lat),
        "duration_s": round(elapsed, 3),
        "throughput_ips": n * len(lat) / elapsed if elapsed > 0 else None,
        "mechanism": mechanism,
    }


def arrivals(rate: float, n: int, seed: int) -> list[float]:
    """`n` Poisson arrival times (s from 0) at `rate` per second; the same for the same (rate, n, seed)."""
    rng = random.Random(f"{seed}:{rate:.6f}")
    t, out = 0.0, []
    for _ in range(n):
        t += rng.expovariate(rate)
        out.append(t)
    return out


def replay(
    queries: Sequence[Query], times: Sequence[float], sleep=time.sleep, clock=time.perf_counter
) -> list[float]:
    """Issue a query at each arrival time to the first free stream (FIFO, one queue for all); each latency (ms)
    runs from its arrival to its return."""
    lock = threading.Lock()
    nxt = [0]
    lat = [math.nan] * len(times)
    t0 = clock() + 0.005

    def worker(i: int) -> None:
        while True:
            with lock:
                k = nxt[0]
                nxt[0] += 1
            if k >= len(times):
                return
            due = t0 + times[k]
            wait = due - clock()
            if wait > 0:
                sleep(wait)
            queries[i]()
            lat[k] = (clock() - due) * 1e3

    _threads(len(queries), worker)
    return lat


def queries_at(rate: float, budget: Budget) -> int:
    """Queries the server scenario issues at `rate`: `budget.min_s` of arrivals and at least `budget.min_queries`,
    but no more than `budget.max_s` of arrivals (at least 20): a slow rate then has fewer queries than its rule."""
    return min(max(budget.min_queries, math.ceil(rate * budget.min_s)), max(20, int(rate * budget.max_s)))


@dataclass(frozen=True)
class ServerRun:
    rate: float
    p99_ms: float
    queries: int
    ok: bool

    def to_dict(self) -> dict:
        return {"rate": round(self.rate, 3), "p99_ms": self.p99_ms, "queries": self.queries, "ok": self.ok}


def search_rate(
    at_rate: Callable[[float], float],
    bound_ms: float,
    start: float,
    steps: int = 7,
    precision: float = 1.1,
    floor: float = 0.0,
) -> tuple[float | None, float | None, list[ServerRun]]:
    """The highest rate whose p99 (`at_rate(rate)` -> p99 ms) stays within `bound_ms`: up or down by 2x from
    `start` until it is bracketed, then bisected (geometric) until the bracket is within `precision` or `steps`
    rates have run, or a failing rate falls below `floor`. Returns (highest passing rate, lowest failing rate
    above it, every run)."""
    tried: list[ServerRun] = []

    def run(rate: float) -> bool:
        p99 = at_rate(rate)
        ok = p99 <= bound_ms
        tried.append(ServerRun(rate, p99, 0, ok))
        return ok

    lo: float | None = None
    hi: float | None = None
    rate = start
    while len(tried) < steps:
        if run(rate):
            lo = rate
            if hi is None:
                rate *= 2.0
                continue
        else:
            hi = rate
            if lo is None:
                if rate / 2.0 < floor:
                    break
                rate /= 2.0
                continue
        if hi / lo <= precision:
            break
        rate = math.sqrt(lo * hi)
    return lo, hi, tried


def server(
    queries: Sequence[Query],
    mechanism: str,
    bound_ms: float,
    start_rate: float,
    seed: int = 0,
    budget: Budget = Budget(),
    steps: int = 7,
    sleep=time.sleep,
    clock=time.perf_counter,
) -> dict:
    """Poisson arrivals at rising rates; the highest rate whose p99 (arrival to result) stays within `bound_ms`."""
    counts: dict[float, int] = {}

    def at_rate(rate: float) -> float:
        n = queries_at(rate, budget)
        lat = replay(queries, arrivals(rate, n, seed), sleep, clock)
        counts[rate] = n
        return float(np.percentile(lat, 99))

    lo, hi, tried = search_rate(at_rate, bound_ms, start_rate, steps, floor=start_rate / 16)
    runs = [ServerRun(r.rate, r.p99_ms, counts[r.rate], r.ok) for r in tried]
    valid = (
        lo is not None
        and hi is not None
        and all(r.queries >= budget.min_queries for r in runs if r.rate in (lo, hi))
    )
    out = {
        "scenario": "server",
        "metric": f"highest Poisson arrival rate with p99 <= {bound_ms:g} ms",
        "value": lo,
        "unit": "queries/s",
        "valid": valid,
        "rule": f">= {budget.min_queries} queries at the passing and the failing rate that bracket the value; "
        "latency from arrival to result (queueing counts); 2x steps from half the streams' back-to-back rate, "
        "then bisection",
        "bound_ms": bound_ms,
        "rate_interval": [lo, hi],
        "tried": [r.to_dict() for r in runs],
        "concurrency": len(queries),
        "mechanism": mechanism,
        "seed": seed,
    }
    if lo is None:
        out["reason"] = (
            f"p99 above {bound_ms:g} ms at every rate tried, down to {tried[-1].rate:.3g} q/s: a query takes "
            "longer than the bound without queueing"
        )
    return out


def offline(
    streams_for: Callable[[int], tuple[Sequence[Query], str]],
    batch: int,
    sweep: Sequence[int] = (1, 2, 4),
    seconds: float = 1.5,
    clock=time.perf_counter,
) -> dict:
    """Every stream busy for `seconds`, at each concurrency of `sweep`; images per second at the best one.
    `streams_for(c)` gives c queries, one per stream, and the runtime's concurrency mechanism for them."""
    rows, mechanisms = [], {}
    for c in sweep:
        queries, mechanisms[c] = streams_for(c)
        counts = [0] * c
        t_end = clock() + seconds

        def worker(i: int, queries=queries, counts=counts, t_end=t_end) -> None:
            while clock() < t_end:
                queries[i]()
                counts[i] += 1

        t0 = clock()
        _threads(c, worker)
        elapsed = clock() - t0
        total = sum(counts)
        rows.append({"concurrency": c, "batch": batch, "ips": batch * total / elapsed, "queries": total})
    best = max(rows, key=lambda r: r["ips"])
    return {
        "scenario": "offline",
        "metric": "images per second at the best concurrency",
        "value": best["ips"],
        "unit": "images/s",
        "valid": all(r["queries"] >= 10 for r in rows),
        "rule": f"each concurrency of {list(sweep)} keeps every stream busy for {seconds:g} s (>= 10 queries); "
        "batch fixed by the cell's static export",
        "batch": batch,
        "concurrency": best["concurrency"],
        "sweep": rows,
        "mechanism": mechanisms[best["concurrency"]],
    }


def camera_run(query: Query, fps: float, frames: int, sleep=time.sleep, clock=time.perf_counter) -> dict:
    """Frames every 1/fps; the worker takes the newest frame that arrived; missed = late or never processed."""
    period = 1.0 / fps
    t0 = clock()
    last = -1
    on_time = 0
    lat: list[float] = []
    while True:
        now = clock()
        k = int((now - t0) / period)
        if k >= frames:
            break
        if k <= last:  # wait for the next frame
            sleep(max(0.0, t0 + (last + 1) * period - now))
            continue
        query()
        done = clock()
        lat.append((done - (t0 + k * period)) * 1e3)
        if done <= t0 + (k + 1) * period:
            on_time += 1
        last = k
    return {
        "missed_share": 1.0 - on_time / frames,
        "frames": frames,
        "processed": len(lat),
        "p99_ms": _pct(lat, 99),
    }


def camera(
    query: Query, rates: Sequence[int] = (30, 60), seconds: float = 2.0, clock=time.perf_counter
) -> dict:
    """The camera check at each frame rate of `rates`: the share of frames missed end to end."""
    fps = {str(r): camera_run(query, r, max(60, int(r * seconds)), clock=clock) for r in rates}
    first = str(rates[0])
    return {
        "scenario": "camera",
        "metric": f"share of frames missed at {first} FPS",
        "value": fps[first]["missed_share"],
        "unit": "share",
        "valid": all(v["frames"] >= 60 for v in fps.values()),
        "rule": ">= 60 frames per rate; the worker takes the newest frame; a frame is missed when its result is "
        "not ready by the next frame's arrival or it is never processed",
        "fps": fps,
    }
