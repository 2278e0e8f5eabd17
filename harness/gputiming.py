"""GPU timing: device time from CUDA events beside host wall time, per round; and a CUDA-graph runner wrapper.

A harness timer takes `(call, rounds)` and returns each round's host wall time in ms (harness.runner.Timer). The
CUDA-event timer returns a `RoundTimes`: a list of the host times (so it is a valid Timer result as it is) that
also carries `device_ms`, the span on the device stream of each round.

What the device span covers depends on the call it is given:

- a `TimedCall` (the call split at the point where the host waits: `run` enqueues the work, `wait` blocks): the
  end event is recorded between the two, so the span runs from the start event to the end of the last kernel the
  call enqueued. It includes the device idling while the host launches kernels (a launch-bound model shows that
  as device time), but not the host's wait itself.
- any other callable (one that synchronizes before returning): the end event is recorded after the call, so the
  span is the host-synchronised round trip and is close to the host time (`device_scope` says which).

Events are recorded on one stream (torch's current stream of the device by default). A runtime that enqueues on a
stream of its own (ONNX Runtime's CUDA EP, ExecuTorch) is only seen through its synchronisation: pass the call
unsplit for those.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.backends.base import Backend, Runner

log = logging.getLogger(__name__)

SPLIT_SCOPE = "start event .. end of the last kernel enqueued by run() (excludes the host's wait)"
SYNCED_SCOPE = "start event .. after the synchronising call returned (host round trip)"


@dataclass
class TimedCall:
    """One timed round split where the host starts waiting: `run()` enqueues, `wait()` blocks until done.

    Calling it runs both, so it is also a plain call for `harness.runner.loop_timer`.
    """

    run: Callable[[], object]
    wait: Callable[[], None]

    def __call__(self) -> None:
        self.run()
        self.wait()


class RoundTimes(list):
    """Host wall time of each round in ms (the list's items), with `device_ms` of the same rounds beside it."""

    def __init__(self, host_ms: list[float], device_ms: list[float], device_scope: str) -> None:
        super().__init__(host_ms)
        if len(device_ms) != len(host_ms):
            raise ValueError(f"{len(device_ms)} device times for {len(host_ms)} rounds")
        self.device_ms = list(device_ms)
        self.device_scope = device_scope

    @property
    def host_ms(self) -> list[float]:
        return list(self)


class CudaEventTimer:
    """A harness Timer that also measures each round on the device with CUDA events (see the module docstring)."""

    def __init__(self, device: Any = "cuda", stream: Any = None) -> None:
        self.device = device
        self.stream = stream

    def __call__(self, call: Callable[[], object], rounds: int) -> RoundTimes:
        import torch

        dev = torch.device(self.device)
        if dev.type != "cuda":
            raise ValueError(f"CUDA events time CUDA devices, not {dev}")
        stream = self.stream or torch.cuda.current_stream(dev)
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(rounds)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(rounds)]
        split = isinstance(call, TimedCall)
        host: list[float] = []
        torch.cuda.synchronize(dev)
        for i in range(rounds):
            t0 = time.perf_counter_ns()
            starts[i].record(stream)
            if split:
                call.run()
                ends[i].record(stream)
                call.wait()
            else:
                call()
                ends[i].record(stream)
            host.append((time.perf_counter_ns() - t0) / 1e6)
        torch.cuda.synchronize(dev)
        device = [s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)]
        return RoundTimes(host, device, SPLIT_SCOPE if split else SYNCED_SCOPE)


def cuda_event_timer(device: Any = "cuda", stream: Any = None) -> CudaEventTimer:
    """A Timer whose result is a `RoundTimes` (host ms, plus `.device_ms` from CUDA events on `stream`)."""
    return CudaEventTimer(device, stream)


class CudaGraphRunner(Runner):
    """Wraps a torch-based runner: its call is captured once in a `torch.cuda.CUDAGraph` and replayed per round.

    Capture happens in `prepare` (outside the timed region), after `warmup` eager calls on a side stream (lazy
    initialisation, cuBLAS/cuDNN workspaces and autotuning must not be captured). The input tensor returned by
    `prepare` is the graph's static input: a different tensor given to `run` is copied into it first. Outputs are
    the graph's static outputs, overwritten by the next replay. A call that synchronises with the host or changes
    shape cannot be captured: capture then raises, and the cell fails with that error.
    """

    def __init__(self, inner: Runner, device: Any = "cuda", warmup: int = 3) -> None:
        import torch

        self.inner = inner
        self.device = torch.device(device)
        self.warmup = warmup
        self.precision_executed = inner.precision_executed
        self.timing_scope = inner.timing_scope
        self.torch_stream = True  # replays on torch's current stream
        self.graph = None
        self.static_in = None
        self.static_out = None

    def prepare(self, x: np.ndarray):
        import torch

        static_in = self.inner.prepare(x)
        current = torch.cuda.current_stream(self.device)
        side = torch.cuda.Stream(self.device)
        side.wait_stream(current)
        with torch.cuda.stream(side):
            for _ in range(self.warmup):
                self.inner.run(static_in)
        current.wait_stream(side)
        torch.cuda.synchronize(self.device)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.static_out = self.inner.run(static_in)
        self.graph = graph
        self.static_in = static_in
        return static_in

    def run(self, prepared):
        if prepared is not self.static_in:
            self.static_in.copy_(prepared)
        self.graph.replay()
        return self.static_out

    def synchronize(self) -> None:
        import torch

        torch.cuda.synchronize(self.device)

    def outputs(self, result) -> list[np.ndarray]:
        return self.inner.outputs(result)

    def close(self) -> None:
        self.graph = None
        self.static_in = self.static_out = None
        self.inner.close()


def cudagraph_backend(base: type[Backend], suffix: str = "-cudagraph") -> type[Backend]:
    """A CUDA-only variant of a torch-based backend whose runner is wrapped in `CudaGraphRunner`.

    The variant is a backend of its own (`<base.name>-cudagraph`) because its latency is a different measurement
    and a backend name is an axis value of the cell id. Register it with `harness.backends.register`.
    The variant sets `run_single_threaded = True`, which AOTInductor's load honours (its multi-threaded runner
    conflicts with graph capture).
    """
    if "cuda" not in base.devices:
        raise ValueError(f"{base.name} has no cuda device to capture on")

    class CudaGraphVariant(base):  # type: ignore[misc, valid-type]
        name = base.name + suffix
        devices = ("cuda",)
        precisions = {"cuda": base.precisions["cuda"]}
        supports_dynamic = False  # a graph replays one shape
        run_single_threaded = True

        def load(self, artifact, cell, export_info: dict) -> Runner:
            return CudaGraphRunner(super().load(artifact, cell, export_info), cell.device)

    CudaGraphVariant.__name__ = CudaGraphVariant.__qualname__ = f"{base.__name__}CudaGraph"
    return CudaGraphVariant
