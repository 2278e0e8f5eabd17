"""Device time of each timed round from CUDA events: the `cuda_events` tracker (cuda cells only).

Fills `device_latency_ms` (core.record.Latency over the rounds, with the scope below as its timing_scope) and
`device_samples_ms` (one value per timed round, ms), or a null reason for both. Host time (`latency_ms`) stays the
attempt's own clock around the same calls, so the event records are inside the host time.

How the attempt drives it (beyond the Tracker hooks start/start_timed/stop/fill):

1. `bind(runner)` after load, before the first wrapped call: reads `runner.torch_stream` (True when `run` enqueues
   on torch's current CUDA stream: torch eager, torch.compile, AOTInductor, TensorRT, CUDA-graph replays).
2. `wrap(call)` with the timed call as a `harness.measure.timing.TimedCall(run, wait)`: `run` enqueues the work,
   `wait` is the runner's synchronize. The result is again a `TimedCall`, so trackers wrapped after this one
   still see the split. Events are recorded only between `start_timed()` and `stop()`: warm-up rounds through the
   same wrapped call record nothing.

What the span covers (the record's `device_latency_ms.timing_scope` says which):

- split call and a runner bound with `torch_stream`: start event before `run`, end event right after `run` returns
  (before `wait`): the span ends at the last kernel `run` enqueued. It includes the device idling while the host
  launches kernels (a launch-bound model shows that as device time), not the host's wait itself.
- otherwise (runtime on a stream of its own, such as ONNX Runtime's CUDA EP or ExecuTorch; an unbound tracker; a
  plain callable): the end event is recorded after `wait` returned, so the span is the synchronised round trip
  seen from torch's stream, close to the host time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from harness.backends._shared.probes import torch_cuda_missing
from harness.core.record import CellRecord, set_null
from harness.measure.base import Tracker, register_tracker
from harness.measure.stats import latency_from_samples
from harness.measure.timing import TimedCall

log = logging.getLogger(__name__)

TORCH_STREAM_SCOPE = (
    "CUDA events on torch's stream: start .. end of the last kernel run() enqueued (host wait excluded)"
)
SYNCED_SCOPE = (
    "CUDA events on torch's stream: start .. after the runtime's synchronize returned (host round trip)"
)


def torch_cuda_reason() -> tuple[Any, str | None]:
    """(torch.cuda, None) when torch sees a CUDA device, else (None, the reason)."""
    reason = torch_cuda_missing()
    if reason:
        return None, reason
    import torch

    return torch.cuda, None


class CudaEventTracker(Tracker):
    """A CUDA event pair around each timed round (see the module docstring for `bind` and `wrap`).

    `cuda` is torch.cuda (default) or a stand-in with `Event(enable_timing=True)` and `synchronize()` for tests.
    """

    field = "device_latency_ms"

    def __init__(self, cuda: Any = None) -> None:
        self.reason: str | None = None
        if cuda is None:
            cuda, self.reason = torch_cuda_reason()
        self.cuda = cuda
        self.torch_stream = False  # until bind(runner): the end event follows the wait (the safe span)
        self.events: list[tuple[Any, Any]] = []
        self.scopes: set[str] = set()
        self.device_ms: list[float] | None = None
        self.rounds: int | None = None
        self._active = False
        self.timed = False
        self._pending: Any = None

    @classmethod
    def for_cell(cls, cell) -> CudaEventTracker | None:
        return cls() if cell.device == "cuda" else None

    def bind(self, runner) -> None:
        """After load: whether the runner enqueues on torch's stream decides where the end event goes."""
        self.torch_stream = bool(runner.torch_stream)

    def _event(self) -> Any:
        e = self.cuda.Event(enable_timing=True)
        e.record()  # on torch's current stream
        return e

    def wrap(self, call: Callable[[], None]) -> Callable[[], None]:
        if self.cuda is None:
            return call
        run, wait = getattr(call, "run", None), getattr(call, "wait", None)
        if run is None or wait is None:  # not split: the end event can only follow the whole call

            def plain() -> None:
                if not self._active:
                    call()
                    return
                start = self._event()
                call()
                self.events.append((start, self._event()))
                self.scopes.add(SYNCED_SCOPE)

            return plain

        def run_() -> object:
            if not self._active:
                return run()
            self._pending = self._event()
            out = run()
            if self.torch_stream:
                self.events.append((self._pending, self._event()))
                self.scopes.add(TORCH_STREAM_SCOPE)
                self._pending = None
            return out

        def wait_() -> None:
            wait()
            if self._active and self._pending is not None:
                self.events.append((self._pending, self._event()))
                self.scopes.add(SYNCED_SCOPE)
                self._pending = None

        return TimedCall(run_, wait_)

    def start_timed(self) -> None:
        self.events.clear()
        self.scopes.clear()
        self.device_ms = None
        self._pending = None
        self._active = True
        self.timed = True

    def stop(self, rounds: int) -> None:
        self._active = False
        self.rounds = rounds
        if self.cuda is None or not self.events:
            return
        try:
            self.cuda.synchronize()
            self.device_ms = [float(s.elapsed_time(e)) for s, e in self.events]
        except Exception as e:  # a sticky CUDA error after a failed round, an event never recorded
            self.reason = f"CUDA event times unreadable: {type(e).__name__}: {e}"

    def _null_reason(self) -> str | None:
        if self.reason:
            return self.reason
        if self.rounds is None:
            return "the timed rounds did not finish"
        if self.rounds == 0:
            return "no timed round completed" if self.timed else "no timed rounds ran"
        if not self.device_ms:
            return "no CUDA events recorded: the timed call was not wrapped by this tracker"
        if len(self.device_ms) != self.rounds:
            return f"{len(self.device_ms)} CUDA event pairs for {self.rounds} timed rounds: they do not match"
        return None

    def fill(self, rec: CellRecord) -> None:
        self._active = False  # stop() may not have run (the rounds failed): record nothing more
        why = self._null_reason()
        if why is not None:
            rec.device_latency_ms = rec.device_samples_ms = None
            set_null(rec, "device_latency_ms", why)
            set_null(rec, "device_samples_ms", why)
            return
        scope = "; ".join(sorted(self.scopes))
        rec.device_latency_ms = latency_from_samples(self.device_ms, scope)
        rec.device_samples_ms = [round(d, 4) for d in self.device_ms]


register_tracker("cuda_events", order=40)(CudaEventTracker.for_cell)
