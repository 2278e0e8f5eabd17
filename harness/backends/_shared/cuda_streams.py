"""One CUDA stream per scenario stream for the torch-based runners (torch eager, torch.compile, AOTInductor).

Each stream's call enqueues on a `torch.cuda.Stream` of its own, after the work that produced its input on the
calling thread's current stream (`prepare` copies the input there), and waits for its own stream only: eight
threads keep eight streams busy at once instead of taking turns on one lock. `cuda` is torch.cuda, or a fake of
its stream API in the harness's CPU tests (a CPU has no CUDA stream to make).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.backends.base import Streams


def torch_cuda():
    """torch.cuda (imported lazily: this module is imported on CPU-only hosts too)."""
    import torch

    return torch.cuda


def per_stream_calls(
    fn: Callable[[Any], Any],
    device: Any,
    n: int,
    mechanism: str,
    cuda: Any = None,
    make_fn: Callable[[int, Any], Callable[[Any], Any]] | None = None,
) -> Streams:
    """`n` calls of `fn`, each on its own CUDA stream of `device`, each returning after its stream finished.

    `make_fn(i, stream)`, when given, makes stream i's own function (a captured graph per stream, an execution
    context per stream); else every stream calls `fn`.
    """
    cuda = cuda or torch_cuda()
    calls = []
    for i in range(n):
        stream = cuda.Stream(device)
        own = make_fn(i, stream) if make_fn is not None else fn

        def call(prepared, stream=stream, own=own):
            # the input was written on the caller's current stream: this stream starts after that copy
            stream.wait_stream(cuda.current_stream(device))
            with cuda.stream(stream):
                result = own(prepared)
            stream.synchronize()
            return result

        calls.append(call)
    return Streams(calls, mechanism)
