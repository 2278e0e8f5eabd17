"""Wait until the process's runtimes have gone idle before a block of timed rounds starts.

Runtimes keep their worker threads busy for a while after a call returns, so that the next call finds them awake:
ONNX Runtime's intra-op pool spins for about 37 ms of CPU after each run by default (measured here on yolo26n@640
with 2 threads: `time.process_time()` over a sleep right after `session.run`), OpenMP and TBB pools spin for a few.
In one runtime's own loop that is what a deployment sees; between the blocks of an interleaved timing it is one
runtime stealing a core from the next: torch-eager's first round after an ONNX Runtime block took 85 ms where the
others took 50. So before each block the harness sleeps in short slices until a slice passes in which the whole
process used less than `busy` of one core, or `cap_s` is spent, and the record says how long it waited.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Quiesce:
    """How long to wait for idle threads at most, in which slices, and what counts as idle."""

    cap_s: float = 0.1
    #: Linux charges other threads' CPU time at scheduler ticks (4 ms at HZ=250): a 1 or 2 ms slice right after an
    #: ONNX Runtime run reads idle while its pool spins on, a 5 ms slice sees it
    slice_s: float = 0.005
    #: a slice whose process CPU time is below this share of the slice is idle
    busy: float = 0.2

    @property
    def enabled(self) -> bool:
        return self.cap_s > 0


def wait_idle(
    q: Quiesce,
    cpu: Callable[[], float] = time.process_time,
    wall: Callable[[], float] = time.perf_counter,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[float, bool]:
    """Sleep until one slice is idle or the cap is spent: (seconds waited, whether the cap ended it)."""
    if not q.enabled:
        return 0.0, False
    t0 = wall()
    while True:
        c0, w0 = cpu(), wall()
        sleep(q.slice_s)
        used, slice_ = cpu() - c0, wall() - w0
        if used < q.busy * max(slice_, q.slice_s):
            return wall() - t0, False
        if wall() - t0 >= q.cap_s:
            return wall() - t0, True
