"""CUDA-graph variants of the torch-based backends (`torch-eager-cudagraph`, `aoti-cudagraph`), CUDA only.

`CudaGraphRunner` captures a torch-based runner's call once in a `torch.cuda.CUDAGraph` and replays it per round;
`cudagraph_backend(Base)` makes a `<name>-cudagraph` backend of it. Each variant is a backend of its own because
its latency is a different measurement (a replay has no per-kernel launch cost), and a backend name is an axis
value of the cell id. Replays run on torch's current stream (`torch_stream = True`), so the CUDA-event tracker
(harness.measure.cuda_timing) ends its span at the replay's last kernel.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from harness.backends import register
from harness.backends.aoti import Aoti
from harness.backends.base import Backend, Runner
from harness.backends.torch_eager import TorchEager

log = logging.getLogger(__name__)


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
        # what the inner runner read from its runtime holds for the replays too (the graph runs the same kernels)
        self.precision_executed = inner.precision_executed
        self.precision_source = inner.precision_source
        self.precision_detail = inner.precision_detail
        self.timing_scope = inner.timing_scope
        self.compile_s = inner.compile_s
        self.torch_stream = True  # replays on torch's current stream
        self.graph = None
        self.static_in = None
        self.static_out = None

    def cpu_threads(self) -> tuple[int | None, str]:
        return self.inner.cpu_threads()

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


TorchEagerCudaGraph = register(cudagraph_backend(TorchEager))
AotiCudaGraph = register(cudagraph_backend(Aoti))
