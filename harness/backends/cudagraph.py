"""CUDA-graph variants of the torch-based backends (`torch-eager-cudagraph`, `aoti-cudagraph`), CUDA only.

`CudaGraphRunner` captures a torch-based runner's call once per input shape in a `torch.cuda.CUDAGraph` and replays
it per call;
`cudagraph_backend(Base)` makes a `<name>-cudagraph` backend of it. Each variant is a backend of its own because
its latency is a different measurement (a replay has no per-kernel launch cost), and a backend name is an axis
value of the cell id. Replays run on torch's current stream (`torch_stream = True`), so the CUDA-event tracker
(harness.measure.cuda_timing) ends its span at the replay's last kernel.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.backends import register
from harness.backends._shared.cuda_streams import per_stream_calls
from harness.backends.aoti import Aoti
from harness.backends.base import Backend, Runner, Streams
from harness.backends.torch_eager import TorchEager

log = logging.getLogger(__name__)


@dataclass
class Captured:
    """One captured graph: its static input (inputs are copied in) and the static outputs each replay rewrites."""

    graph: Any
    static_in: Any
    static_out: Any


def shape_key(t) -> tuple:
    """What a graph is specialised to: the input's shape and dtype (a replay reads the same addresses)."""
    return tuple(t.shape), str(t.dtype)


class CudaGraphRunner(Runner):
    """Wraps a torch-based runner: its call is captured once per input shape in a `torch.cuda.CUDAGraph` and
    replayed per call.

    `prepare` places the input on the device (the inner runner's host-to-device copy: what the end-to-end h2d stage
    measures); the first time it meets a shape it also captures that shape's graph, after `warmup` eager calls on a
    side stream (lazy initialisation, cuBLAS/cuDNN workspaces and autotuning must not be captured), into static
    input and output buffers of its own. `run` copies the prepared input into the graph's static input (one
    device-to-device copy, part of the model stage) and replays; the outputs are the graph's static outputs,
    overwritten by the next replay. Every later `prepare` of that shape (the e2e h2d stage, the accuracy pass, every
    scenario query) is a copy, never a capture. `streams(n)` gives each stream its own CUDA stream and its own
    graphs, captured on that stream before the scenario starts. A call that synchronises with the host cannot be
    captured: capture then raises, and the cell fails with that error. `cuda` is torch.cuda (a fake of its graph
    and stream API in the CPU tests).
    """

    def __init__(self, inner: Runner, device: Any = "cuda", warmup: int = 3, cuda: Any = None) -> None:
        import torch

        self.inner = inner
        self.device = torch.device(device)
        self.warmup = warmup
        self.cuda = cuda or torch.cuda
        # what the inner runner read from its runtime holds for the replays too (the graph runs the same kernels)
        self.precision_executed = inner.precision_executed
        self.precision_source = inner.precision_source
        self.precision_detail = inner.precision_detail
        self.timing_scope = inner.timing_scope
        self.compile_s = inner.compile_s
        self.torch_stream = True  # replays on torch's current stream
        self.graphs: dict[tuple, Captured] = {}  # on the caller's current stream, by shape_key
        self.stream_graphs: dict[int, dict[tuple, Captured]] = {}  # scenario stream i -> its own graphs
        self._lock = threading.Lock()  # captures are one at a time (a capture must not see another's kernels)
        self.captures = 0

    def cpu_threads(self) -> tuple[int | None, str]:
        return self.inner.cpu_threads()

    def capture(self, example) -> Captured:
        """Capture the inner runner's call on a static copy of `example`, on the current stream."""
        cuda = self.cuda
        static_in = example.clone()
        current = cuda.current_stream(self.device)
        side = cuda.Stream(self.device)
        side.wait_stream(current)
        with cuda.stream(side):
            for _ in range(self.warmup):
                self.inner.run(static_in)
        current.wait_stream(side)
        cuda.synchronize(self.device)
        graph = cuda.CUDAGraph()
        with cuda.graph(graph):
            static_out = self.inner.run(static_in)
        cuda.synchronize(self.device)
        self.captures += 1
        return Captured(graph, static_in, static_out)

    def _captured(self, table: dict[tuple, Captured], example) -> Captured:
        key = shape_key(example)
        got = table.get(key)
        if got is None:
            with self._lock:
                got = table.get(key)
                if got is None:
                    got = table[key] = self.capture(example)
        return got

    def prepare(self, x: np.ndarray):
        prepared = self.inner.prepare(x)  # the host-to-device copy
        self._captured(self.graphs, prepared)  # a new shape: captured once, outside any timed call
        return prepared

    def device_input(self) -> tuple[Any, Any] | None:
        return self.inner.device_input()

    @staticmethod
    def replay(captured: Captured, prepared):
        if prepared is not captured.static_in:
            captured.static_in.copy_(prepared)
        captured.graph.replay()
        return captured.static_out

    def run(self, prepared):
        return self.replay(self._captured(self.graphs, prepared), prepared)

    def synchronize(self) -> None:
        self.cuda.synchronize(self.device)

    def outputs(self, result) -> list[np.ndarray]:
        return self.inner.outputs(result)

    def streams(self, n: int) -> Streams:
        """`n` streams, each with its own CUDA stream and its own graphs (captured now, on that stream, for every
        shape captured so far; kept for later calls of `streams`)."""
        cuda = self.cuda
        examples = [c.static_in for c in self.graphs.values()]

        def make(i: int, stream) -> Callable[[Any], Any]:
            table = self.stream_graphs.setdefault(i, {})
            with cuda.stream(stream):
                for example in examples:
                    self._captured(table, example)

            def call(prepared):
                return self.replay(self._captured(table, prepared), prepared)

            return call

        return per_stream_calls(
            self.run,
            self.device,
            n,
            f"{n} CUDA streams, one per thread, each replaying a graph captured on its own stream",
            cuda=cuda,
            make_fn=make,
        )

    def close(self) -> None:
        self.graphs.clear()
        self.stream_graphs.clear()
        self.inner.close()


def cudagraph_backend(
    base: type[Backend], suffix: str = "-cudagraph", registry_order: int | None = None
) -> type[Backend]:
    """A CUDA-only variant of a torch-based backend whose runner is wrapped in `CudaGraphRunner`.

    The variant is a backend of its own (`<base.name>-cudagraph`) because its latency is a different measurement
    and a backend name is an axis value of the cell id. Register it with `harness.backends.register`.
    The variant sets `run_single_threaded = True`, which AOTInductor's load honours (its multi-threaded runner
    conflicts with graph capture). `registry_order`: where `names()` lists the variant (default: beside its base).
    """
    if "cuda" not in base.devices:
        raise ValueError(f"{base.name} has no cuda device to capture on")

    class CudaGraphVariant(base):  # type: ignore[misc, valid-type]
        name = base.name + suffix
        devices = ("cuda",)
        precisions = {"cuda": base.precisions["cuda"]}
        supports_dynamic = False  # a graph replays one shape
        run_single_threaded = True
        export_as = base.name  # the same artifact as the base backend's (capture happens at load)

        def load(self, artifact, cell, export_info: dict) -> Runner:
            return CudaGraphRunner(super().load(artifact, cell, export_info), cell.device)

    if registry_order is not None:
        CudaGraphVariant.registry_order = registry_order
    CudaGraphVariant.__name__ = CudaGraphVariant.__qualname__ = f"{base.__name__}CudaGraph"
    return CudaGraphVariant


TorchEagerCudaGraph = register(cudagraph_backend(TorchEager, registry_order=110))
AotiCudaGraph = register(cudagraph_backend(Aoti, registry_order=120))
