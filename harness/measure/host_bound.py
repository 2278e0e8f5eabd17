"""Whether a CUDA cell was host-bound: the `host_bound` tracker (cuda cells only), and the same verdict for
records written before it (`verdict`, from the same run's CUDA-graph cell of the workload).

A host-bound cell's time is set by the host's Python and launch speed, not by the GPU: on the first H100 run the
plain loop read 5.7 to 8.6 ms for the same eager model within minutes, while a record's interval was +-3%. Its
figure, and every comparison with it, holds on that machine only.

Why not the CUDA-event time against the host time: the events' span (harness.measure.cuda_timing) starts before
the host enqueues the round and ends when the last kernel finishes, so it includes the device idling between
launches. On the 11 ok H100 records it is 0.96 to 0.99 of the host time for eager and CUDA-graph cells alike;
it does not tell them apart. It is recorded beside the verdict (`device_span_share`) for reference only.

What the tracker measures: each timed round's host time split where the host waits (the attempt's TimedCall):
the enqueue time Q (`run`: the host launches the round's work) and the whole round W (`run` + `wait`).
`enqueue_share` = median over the rounds of Q / W. The device cannot finish before the host's last launch, so
when the host is still enqueuing for at least HOST_BOUND_SHARE of the round, the device is at most the rest of
the round ahead of it: the round is host-bound. HOST_BOUND_SHARE = 0.5: a cell below it keeps its time on a
host up to 2x slower (its enqueue still fits in the device's time); a cell at or above it does not.

Only for runners that enqueue on torch's stream (`runner.torch_stream`: torch eager, torch.compile, CUDA-graph
replays, AOTInductor, TensorRT): a runtime whose `run` returns only when the device is done (ONNX Runtime's CUDA
EP, ExecuTorch) has no enqueue time apart from device time, and the verdict is null with that reason.

Fills `host_bound` = {host_bound, enqueue_share, enqueue_ms_p50, wall_ms_p50, device_span_share, threshold,
rounds, basis}, `host_bound.host_bound` null with the reason where it cannot be told.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable
from typing import Any

from harness.core.record import CellRecord, set_null
from harness.measure.base import Tracker, register_tracker
from harness.measure.timing import TimedCall

log = logging.getLogger(__name__)

#: host-bound when the host enqueues for at least this share of the round (or, derived, the device is busy for
#: less than it): below it, a host up to 2x slower leaves the cell's time unchanged
HOST_BOUND_SHARE = 0.5

BASIS_ENQUEUE = (
    "median over the timed rounds of (host time in run(), enqueueing the round) / (host wall time of the round); "
    f"host-bound at >= {HOST_BOUND_SHARE:g}"
)
#: backends whose run() is one CUDA-graph launch: their CUDA-event span has no launch gaps (it is busy time)
GRAPH_BACKENDS = ("torch-eager-cudagraph",)
#: the backends whose kernels a CUDA-graph cell of the same workload replays exactly
SAME_KERNELS = ("torch-eager",)


def section(basis: str, host_bound: bool | None, reason: str | None = None, **figures: Any) -> dict:
    """The record's `host_bound` section: the verdict, the threshold, what it rests on, and its figures."""
    out = {"host_bound": host_bound, "threshold": HOST_BOUND_SHARE, "basis": basis, **figures}
    if reason is not None:
        out["reason"] = reason
    return out


class HostBoundTracker(Tracker):
    """The enqueue and wall time of each timed round (see the module docstring). `clock` returns seconds (a fake
    clock in tests)."""

    field = "host_bound"

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.torch_stream: bool | None = None  # until bind(runner)
        self.enqueue: list[float] = []
        self.wall: list[float] = []
        self._active = False
        self._t0: float | None = None
        self._t1: float | None = None
        self.rounds: int | None = None

    @classmethod
    def for_cell(cls, cell) -> HostBoundTracker | None:
        return cls() if cell.device == "cuda" else None

    def bind(self, runner) -> None:
        self.torch_stream = bool(getattr(runner, "torch_stream", False))

    def wrap(self, call: Callable[[], None]) -> Callable[[], None]:
        run, wait = getattr(call, "run", None), getattr(call, "wait", None)
        if run is None or wait is None:
            return call  # not split: no enqueue time to read (fill says so)

        def run_() -> object:
            if not self._active:
                return run()
            self._t0 = self.clock()
            out = run()
            self._t1 = self.clock()
            return out

        def wait_() -> None:
            wait()
            if self._active and self._t0 is not None and self._t1 is not None:
                end = self.clock()
                self.enqueue.append(self._t1 - self._t0)
                self.wall.append(end - self._t0)
                self._t0 = self._t1 = None

        return TimedCall(run_, wait_)

    def start_timed(self) -> None:
        self.enqueue.clear()
        self.wall.clear()
        self._active = True

    def stop(self, rounds: int) -> None:
        self._active = False
        self.rounds = rounds

    def _null_reason(self) -> str | None:
        if self.torch_stream is False:
            return (
                "the runtime's run() returns only when the device is done (it runs on a stream of its own), so "
                "the host's enqueue time cannot be told apart from device time"
            )
        if not self.rounds:
            return "no timed round completed"
        if not self.wall:
            return "the timed call was not split where the host waits: no enqueue time was read"
        return None

    def fill(self, rec: CellRecord) -> None:
        self._active = False
        why = self._null_reason()
        if why is not None:
            rec.host_bound = section(BASIS_ENQUEUE, None, why)
            set_null(rec, "host_bound.host_bound", why)
            return
        shares = [q / w for q, w in zip(self.enqueue, self.wall, strict=True) if w > 0]
        share = statistics.median(shares) if shares else 1.0  # rounds of zero wall time: nothing but the host
        wall_p50 = statistics.median(self.wall) * 1000.0
        dev = rec.device_latency_ms
        rec.host_bound = section(
            BASIS_ENQUEUE,
            share >= HOST_BOUND_SHARE,
            enqueue_share=round(share, 4),
            enqueue_ms_p50=round(statistics.median(self.enqueue) * 1000.0, 4),
            wall_ms_p50=round(wall_p50, 4),
            device_span_share=round(dev.p50 / wall_p50, 4) if dev is not None and wall_p50 > 0 else None,
            rounds=len(self.wall),
        )


register_tracker("host_bound", order=45)(HostBoundTracker.for_cell)


# -- records without the section ------------------------------------------------------------------------------------
def _workload(rec: CellRecord) -> tuple:
    return (
        rec.model,
        rec.task,
        rec.head,
        rec.device,
        rec.height,
        rec.width,
        rec.batch,
        rec.precision_executed,
    )


def share_text(v: dict) -> str:
    """The figure a verdict rests on, in words."""
    if v.get("enqueue_share") is not None:
        return f"host enqueues {v['enqueue_share']:.0%} of the round"
    if v.get("device_busy_share") is not None:
        return f"device busy {v['device_busy_share']:.0%} of the round"
    return "n/a"


def verdict(rec: CellRecord, run_records: list[CellRecord]) -> dict | None:
    """The record's `host_bound` section, or for a CUDA record without one (written before the tracker existed)
    the verdict derived from its run: the device busy share = device time of the round's kernels with no launch
    gaps / this cell's host p50, host-bound when below HOST_BOUND_SHARE. The gap-free device time is the cell's own
    CUDA-event p50 for a CUDA-graph cell (one launch per round), else that of the CUDA-graph cell of the same
    workload in the run (the same kernels for torch-eager; an estimate for other backends, said in the basis).
    None for a record that is not an ok CUDA cell."""
    if rec.device != "cuda" or rec.status != "ok":
        return None
    if rec.host_bound is not None:
        return rec.host_bound
    host = rec.latency_ms.p50 if rec.latency_ms is not None else None
    if host is None or host <= 0:
        return section("derived", None, "no host p50 in the record")
    if rec.backend in GRAPH_BACKENDS:
        graph: CellRecord | None = rec
    else:
        graph = next(
            (
                r
                for r in run_records
                if r.backend in GRAPH_BACKENDS and r.status == "ok" and _workload(r) == _workload(rec)
            ),
            None,
        )
    busy = graph.device_latency_ms.p50 if graph is not None and graph.device_latency_ms is not None else None
    if graph is None or busy is None:
        return section(
            "derived",
            None,
            "recorded before the host_bound tracker, and no CUDA-graph cell of the same workload in the run "
            "gives the round's device time without launch gaps",
        )
    if graph is rec:
        basis = "derived: this CUDA-graph cell's CUDA-event p50 (one launch per round: no launch gaps) / its host p50"
    else:
        basis = (
            f"derived: the CUDA-graph cell's CUDA-event p50 ({graph.cell_id}, the round's kernels with no launch "
            "gaps) / this cell's host p50"
        )
        if rec.backend not in SAME_KERNELS:
            basis += f"; an estimate for {rec.backend}, whose kernels differ from the graph's"
    basis += f"; host-bound below {HOST_BOUND_SHARE:g}"
    share = busy / host
    return section(basis, share < HOST_BOUND_SHARE, device_busy_share=round(share, 4))
