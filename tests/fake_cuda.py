"""A fake of torch.cuda's stream and graph API, the one thing a CPU lacks, for the CUDA runners' logic on a CPU.

Graphs really replay: an op run while a graph is being captured registers itself (`FakeTorchCuda.record`), and
`replay` runs the registered ops again on whatever the static input holds now. Streams count what they were
asked to do; `stream(s)` makes `s` the calling thread's current stream, as torch.cuda.stream does.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable


class FakeStream:
    _next = 1000

    def __init__(self, cuda: FakeTorchCuda, device=None) -> None:
        self.cuda = cuda
        self.device = device
        FakeStream._next += 1
        self.cuda_stream = FakeStream._next  # the handle a runtime enqueues on
        self.waited: list[FakeStream] = []
        self.syncs = 0

    def wait_stream(self, other: FakeStream) -> None:
        self.waited.append(other)

    def synchronize(self) -> None:
        self.syncs += 1


class FakeGraph:
    def __init__(self) -> None:
        self.ops: list[Callable[[], None]] = []
        self.replays = 0
        self.stream: FakeStream | None = None

    def replay(self) -> None:
        self.replays += 1
        for op in self.ops:
            op()


class FakeTorchCuda:
    """torch.cuda as the CUDA runners use it: Stream, current_stream, stream, synchronize, CUDAGraph, graph."""

    def __init__(self) -> None:
        self.default = FakeStream(self)
        self._local = threading.local()
        self.captures = 0
        self.streams_made: list[FakeStream] = []
        self.capturing: FakeGraph | None = None

    def Stream(self, device=None) -> FakeStream:
        s = FakeStream(self, device)
        self.streams_made.append(s)
        return s

    def current_stream(self, device=None) -> FakeStream:
        return getattr(self._local, "stream", None) or self.default

    @contextlib.contextmanager
    def stream(self, s: FakeStream):
        prev = getattr(self._local, "stream", None)
        self._local.stream = s
        try:
            yield
        finally:
            self._local.stream = prev

    def synchronize(self, device=None) -> None:
        pass

    def CUDAGraph(self) -> FakeGraph:
        return FakeGraph()

    @contextlib.contextmanager
    def graph(self, g: FakeGraph):
        if self.capturing is not None:
            raise RuntimeError("nested capture")
        self.capturing = g
        g.stream = self.current_stream()
        self.captures += 1
        try:
            yield
        finally:
            self.capturing = None

    def record(self, op: Callable[[], None]) -> None:
        """Run `op` now and, during a capture, register it with the graph being captured."""
        op()
        if self.capturing is not None:
            self.capturing.ops.append(op)


def run_threads(worker, calls) -> None:
    """`worker(call, index)` on its own thread for each of a runner's stream calls, all at once; joins them all."""
    import threading

    threads = [threading.Thread(target=worker, args=(c, i)) for i, c in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
