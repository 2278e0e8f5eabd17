"""The camera check: frames arrive at a fixed rate and the worker always takes the newest one; a frame whose result
is not ready by the next frame's arrival (or that is never processed) is missed.

LoadGen has no such scenario (its SingleStream issues the next query when the previous returns, never drops one), so
this check stays the harness's own: it issues the frames and keeps the clock (`perf_counter` in the thread that
runs them), and its results say so.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

Query = Callable[[], object]

RULE = (
    ">= 60 frames per rate; the worker takes the newest frame; a frame is missed when its result is not ready by the "
    "next frame's arrival or it is never processed (the harness's own check: LoadGen has no camera scenario)"
)


def _pct(values: Sequence[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def camera_run(
    query: Query,
    fps: float,
    frames: int,
    sleep=time.sleep,
    clock=time.perf_counter,
    check: Callable[[], None] = lambda: None,
) -> dict:
    """Frames every 1/fps; the worker takes the newest frame that arrived; missed = late or never processed.
    `check` runs before each frame (harness.scenarios.loadgen.check: KeyboardInterrupt once the run was told to
    stop, where the signal's own was lost)."""
    period = 1.0 / fps
    t0 = clock()
    last = -1
    on_time = 0
    lat: list[float] = []
    while True:
        check()
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
    query: Query,
    rates: Sequence[int] = (30, 60),
    seconds: float = 2.0,
    clock=time.perf_counter,
    check: Callable[[], None] = lambda: None,
) -> dict:
    """The camera check at each frame rate of `rates`: the share of frames missed end to end."""
    fps = {str(r): camera_run(query, r, max(60, int(r * seconds)), clock=clock, check=check) for r in rates}
    first = str(rates[0])
    return {
        "scenario": "camera",
        "metric": f"share of frames missed at {first} FPS",
        "value": fps[first]["missed_share"],
        "unit": "share",
        "valid": all(v["frames"] >= 60 for v in fps.values()),
        "rule": RULE,
        "driver": "harness (LoadGen has no camera scenario)",
        "fps": fps,
    }
