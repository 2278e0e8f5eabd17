"""Timing: the harness's clock around each timed round, and the slowdown knob for testing the regression tracker.

The backend never owns the clock (as in MLPerf LoadGen): a timer takes the call to time and the number of rounds
and returns each round's wall time in milliseconds, `perf_counter_ns` around the runner's call plus its device
synchronize.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

SLOWDOWN_ENV = "YOLO26_BENCH_SLOWDOWN"

# A timer takes (call, rounds) and returns the duration of each round in milliseconds.
Timer = Callable[[Callable[[], object], int], list[float]]


def loop_timer(call: Callable[[], object], rounds: int) -> list[float]:
    """The plain timing loop: perf_counter_ns around each call."""
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        call()
        out.append((time.perf_counter_ns() - t0) / 1e6)
    return out


def slowdown_factors(env: str | None = None) -> dict[str, float]:
    """Parse YOLO26_BENCH_SLOWDOWN=`backend=factor[,backend=factor]` (a testing knob for the regression tracker)."""
    text = os.environ.get(SLOWDOWN_ENV, "") if env is None else env
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, factor = part.partition("=")
        try:
            f = float(factor)
        except ValueError:
            raise ValueError(f"{SLOWDOWN_ENV}: {part!r} is not backend=factor") from None
        if f < 1:
            raise ValueError(f"{SLOWDOWN_ENV}: factor {f} must be >= 1")
        out[name.strip()] = f
    return out


def stretched(wait: Callable[[], None], factor: float, started: list[float]) -> Callable[[], None]:
    """`wait`, then a sleep that stretches the round begun at `started[0]` to `factor` times its duration."""
    if factor <= 1.0:
        return wait

    def slow() -> None:
        wait()
        time.sleep((time.perf_counter() - started[0]) * (factor - 1.0))

    return slow


class TimedCall:
    """One timed round split where the host waits: `run` enqueues the work, `wait` blocks until it is done.

    Calling it does both. Trackers that instrument the device (CUDA events) can record between the two.
    """

    def __init__(self, run: Callable[[], object], wait: Callable[[], None]) -> None:
        self.run = run
        self.wait = wait

    def __call__(self) -> None:
        self.run()
        self.wait()
