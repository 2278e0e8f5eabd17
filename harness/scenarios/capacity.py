"""How many cameras one loaded runner serves at a frame rate: the largest N whose LoadGen MultiStream run (a query is
N samples, one per camera, issued at once) keeps the per-query latency at the durations' percentile (p90 under the
short durations, p99 under MLPerf's) within the frame time, with LoadGen's verdict VALID.

Found like the server's rate (harness.scenarios.server.search): N doubles from 1 until a run fails, then integer
bisection between the last passing and the first failing N until they are one apart, or the steps are spent. The
answer keeps that interval. Where the export takes batch N, the N frames may also go as one batched call (what
DeepStream-style servers do): the same search runs with that mechanism and the result reports whichever sustains more
cameras, naming the mechanism (the streams' when they tie: one artifact for every N). When even one camera fails,
the value is null with the one-camera figure as the nearest miss: never "0 cameras" as an answer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from harness.scenarios.loadgen import check
from harness.scenarios.results import Target, multi_stream

log = logging.getLogger(__name__)

#: the most cameras a search tries, and the most LoadGen runs it spends per mechanism
MOST_CAMERAS = 256
STEPS = 12
STREAMS, BATCHED = "streams", "batched"


@dataclass(frozen=True)
class Trial:
    """One run at `cameras`: whether it kept the percentile within the frame time with a VALID verdict, and its
    figures as the record keeps them."""

    cameras: int
    ok: bool
    entry: dict


def search(
    at: Callable[[int], Trial], most: int = MOST_CAMERAS, steps: int = STEPS
) -> tuple[int | None, int | None, list[Trial]]:
    """The largest N that `at` passes: 1, 2, 4, ... until one fails (or `most`), then bisection until the last
    passing and first failing N are one apart or `steps` runs are spent. Returns (last passing N or None when one
    camera fails, first failing N above it or None when none failed, every trial). No step starts once the run was
    told to stop (KeyboardInterrupt, harness.scenarios.loadgen.check)."""
    tried: list[Trial] = []
    lo: int | None = None
    hi: int | None = None
    n = 1
    while len(tried) < steps:
        check()
        trial = at(n)
        tried.append(trial)
        if trial.ok:
            lo = n
        else:
            hi = n
        if lo is None:  # one camera fails: nothing below to try
            break
        if hi is None:
            if n >= most:
                break
            n = min(2 * n, most)
            continue
        if hi - lo <= 1:
            break
        n = (lo + hi) // 2
    return lo, hi, tried


def trial_of(result: dict, cameras: int, frame_ms: float, mechanism: str) -> Trial:
    """A MultiStream result judged against the frame time at its own percentile, with LoadGen's verdict."""
    key = f"p{100 * float(result.get('percentile') or 0.99):g}"
    at = result.get(key)
    valid = result.get("valid") is True
    ok = valid and isinstance(at, int | float) and at <= frame_ms
    entry = {
        "cameras": cameras,
        "mechanism": mechanism,
        "how": result.get("mechanism"),  # the runtime's way of running them (the multi-stream result's)
        "ok": ok,
        "valid": valid,
        "percentile": result.get("percentile"),
        "target_ms": at,
        "p99_ms": result.get("p99"),
        "queries": result.get("queries"),
        "loadgen": result.get("loadgen"),
    }
    if not ok:
        entry["reason"] = (
            result.get("reason") or "LoadGen called the run INVALID"
            if not valid
            else f"{key} {at if at is not None else 'not recorded'} ms over the {frame_ms:.4g} ms frame time"
        )
    return Trial(cameras, ok, entry)


def capacity(
    at_streams: Callable[[int], Trial],
    at_batched: Callable[[int], Trial] | None,
    fps: float,
    percentile: float,
    most: int = MOST_CAMERAS,
    steps: int = STEPS,
) -> dict:
    """The camera-capacity result: the search with N streams, and with one batched call of N frames where
    `at_batched` is given (the export takes batch N); the better of the two, said with its mechanism."""
    frame_ms = 1000.0 / fps
    runs = {STREAMS: search(at_streams, most, steps)}
    if at_batched is not None:
        runs[BATCHED] = search(at_batched, most, steps)

    def score(item: tuple[str, tuple]) -> tuple:
        lo = item[1][0]
        return (lo if lo is not None else 0, item[0] == STREAMS)

    mechanism, (lo, hi, tried) = max(runs.items(), key=score)
    label = f"p{100 * percentile:g}"
    out: dict[str, Any] = {
        "scenario": "camera-capacity",
        "metric": f"most cameras at {fps:g} FPS: the largest N whose LoadGen MultiStream run (N samples per query, "
        f"one per camera) keeps the per-query {label} within the {frame_ms:.4g} ms frame time, VALID",
        "value": lo,
        "unit": "cameras",
        "fps": fps,
        "frame_ms": frame_ms,
        "percentile": percentile,
        "interval": [lo, hi],
        "mechanism": mechanism,
        "valid": lo is not None,
        "rule": f"N = 1, 2, 4, ... until a run fails (at most {most}), then bisection to one camera apart, at most "
        f"{steps} LoadGen runs per mechanism; {label}"
        + (" (short durations: the p90, not the p99)" if percentile < 0.99 else ""),
        "tried": [t.entry for m in runs.values() for t in m[2]],
        "mechanisms": {m: {"value": r[0], "interval": [r[0], r[1]]} for m, r in runs.items()},
        "driver": "mlperf_loadgen",
    }
    # LoadGen's section (its logs) of the run that decided: the last passing N, else the first failing one
    chosen = next((t for t in tried if t.cameras == lo), None) or (tried[-1] if tried else None)
    out["loadgen"] = chosen.entry.get("loadgen") if chosen else None
    if lo is None:
        one = next((t.entry for t in tried if t.cameras == 1), None)
        out["reason"] = "even one camera fails" + (f": {one.get('reason')}" if one else "")
        out["nearest_miss"] = one
    elif hi is None:
        out["reason_interval"] = (
            f"every N tried passed, up to {max(t.cameras for t in tried)}: no failing N found"
        )
    return out


def camera_capacity(target: Target, fps: float, expected_ms: float, batched: Target | None = None) -> dict:
    """The search on LoadGen MultiStream runs of `target`'s streams (and of `batched`, a target whose one stream
    takes the N frames as one batched call, where the export takes batch N). Each N logs under camera-capacity/."""
    frame_ms = 1000.0 / fps

    def at(tgt: Target, mechanism: str) -> Callable[[int], Trial]:
        def run(n: int) -> Trial:
            where = replace(tgt, log_dir=tgt.log_dir / "camera-capacity" / f"{mechanism}-{n}")
            return trial_of(multi_stream(where, n, expected_ms), n, frame_ms, mechanism)

        return run

    return capacity(
        at(target, STREAMS),
        at(batched, BATCHED) if batched is not None else None,
        fps,
        target.durations.multi_percentile,
    )
