"""How fast this machine is, right now: two figures measured at a run's start, in well under a second.

The remaining-time estimate and the nightly plan price a cell from figures measured on some reference machine
(harness/plan/prices.yaml, earlier runs, the history); these two figures say how much slower or faster this machine
is, so that each part of a cell scales by the figure of the work it does (harness.plan.price):

- `python_s`: a fixed pure-Python workload on one thread (dicts, lists, attribute lookups, calls, string keys:
  what torch.export tracing and ExecuTorch lowering spend their time on). Exports, probes and loads scale by it.
- `compute_s`: a fixed yolo-like convolution (torch's conv2d, 1x128x80x80 by 128x3x3, six in a row: ~25 ms on 2 cores) at the run's thread
  budget, or numpy's matmul where torch is missing. The stages after timing, and the timed rounds where the trials'
  floor (not the time cap) held them up, scale by it.

Each is the median of a few repetitions after one warm-up, seconds (lower is faster). A figure that cannot be
measured is null, its reason under `null_reasons`; a factor from a null figure is 1.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable

#: repetitions timed per figure (after one warm-up); the median is the figure
REPS = 5
#: the pure-Python workload's iterations (~25 ms a repetition on a 2-core AMD EPYC VM)
PY_ITERATIONS = 40_000
#: the convolution: input (1, C, S, S), C output channels, 3x3 kernel; CONVS of them a repetition
CONV_CHANNELS, CONV_SIDE, CONVS = 128, 80, 6
#: numpy's fallback: an N x N float32 matmul
MATMUL_N = 384


class _Node:
    __slots__ = ("args", "name", "users")

    def __init__(self, name: str, args: tuple) -> None:
        self.name, self.args, self.users = name, args, []


def python_work(n: int = PY_ITERATIONS) -> int:
    """A graph-building loop in pure Python (as a tracer's): nodes named by formatted strings, looked up in a dict,
    linked to their users, then walked. Returns a checksum (so that nothing is optimized away)."""
    nodes: dict[str, _Node] = {}
    order: list[_Node] = []
    for i in range(n):
        name = f"op_{i % 4099}_{i & 7}"
        node = nodes.get(name)
        if node is None:
            prev = order[-1] if order else None
            node = nodes[name] = _Node(name, (prev, i & 15) if prev is not None else (i,))
            order.append(node)
            if prev is not None:
                prev.users.append(node)
        else:
            node.users.append(node)
    total = 0
    for node in order:
        total += len(node.users) + len(node.args) + (hash(node.name) & 3)
    return total


def _median_s(fn: Callable[[], object], reps: int = REPS) -> float:
    """The median seconds of `fn`, the garbage collector paused (a collection would time the process's whole heap,
    torch's included, not the machine)."""
    was = gc.isenabled()
    gc.disable()
    try:
        fn()  # warm-up
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    finally:
        if was:
            gc.enable()
    return statistics.median(times)


def compute_work(threads: int | None = None) -> tuple[Callable[[], object], str, Callable[[], None]]:
    """The compute workload, what it is, and how to put torch's thread setting back: torch's conv2d at `threads`
    (torch's own setting when None), else numpy's matmul. Raises ImportError when neither is importable."""
    try:
        import torch
    except ImportError:
        import numpy as np

        rng = np.random.default_rng(0)
        a = rng.standard_normal((MATMUL_N, MATMUL_N), dtype=np.float32)
        what = f"numpy matmul {MATMUL_N}x{MATMUL_N} float32 (torch is not importable)"
        return (lambda: a @ a), what, lambda: None
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(int(threads))
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(1, CONV_CHANNELS, CONV_SIDE, CONV_SIDE, generator=gen)
    w = torch.randn(CONV_CHANNELS, CONV_CHANNELS, 3, 3, generator=gen)

    def conv() -> object:
        with torch.no_grad():
            y = x
            for _ in range(CONVS):
                y = torch.nn.functional.conv2d(y, w, padding=1)
            return y

    what = (
        f"torch conv2d 1x{CONV_CHANNELS}x{CONV_SIDE}x{CONV_SIDE} by {CONV_CHANNELS}x3x3, {CONVS} in a row, "
        f"{torch.get_num_threads()} thread(s)"
    )
    return conv, what, lambda: torch.set_num_threads(before)


def measure(threads: int | None = None) -> dict:
    """env.json's `machine_speed`: `python_s` and `compute_s` (median seconds, lower is faster), what each timed,
    the threads of the compute figure, the seconds the measurement took, and `null_reasons` for a null figure.
    Never raises: an estimate must not stop a run."""
    t0 = time.perf_counter()
    out: dict = {
        "python_s": None,
        "compute_s": None,
        "python": f"pure-Python graph building, {PY_ITERATIONS} iterations, 1 thread",
        "compute": None,
        "threads": threads,
        "reps": REPS,
        "statistic": f"median of {REPS} after 1 warm-up, seconds (lower is faster)",
    }
    reasons: dict[str, str] = {}
    try:
        out["python_s"] = round(_median_s(python_work), 6)
    except Exception as e:
        reasons["python_s"] = f"{type(e).__name__}: {e}"[:200]
    try:
        fn, out["compute"], restore = compute_work(threads)
        try:
            out["compute_s"] = round(_median_s(fn), 6)
        finally:
            restore()
    except Exception as e:
        reasons["compute_s"] = f"{type(e).__name__}: {e}"[:200]
    if reasons:
        out["null_reasons"] = reasons
    out["measured_in_s"] = round(time.perf_counter() - t0, 3)
    return out
