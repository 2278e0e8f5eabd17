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

In a cgroup CPU quota (harness.core.cpu_quota) a few 25 ms repetitions fit in one period's allowance, so their
median is a burst's speed, not the speed the process keeps (the main job in a half-CPU quota read python x1.06 and
then ran its exports at half speed). There each figure is what the process keeps: the mean
seconds per repetition over a window of QUOTA_PERIODS quota periods, whose stalls it includes; where a long period
keeps the window (at most QUOTA_WINDOW_MAX_S) from spanning them, the slower of that and the window's fastest
repetition priced from the quota (x threads / quota CPUs where the workload's threads exceed the quota: one thread
for `python_s`, the run's threads for `compute_s`). `quota` in the figures says how each was read, and the burst's
median beside it.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable

from harness.core import cpu_quota

#: repetitions timed per figure (after one warm-up); the median is the figure
REPS = 5
#: the pure-Python workload's iterations (~25 ms a repetition on a 2-core AMD EPYC VM)
PY_ITERATIONS = 40_000
#: the convolution: input (1, C, S, S), C output channels, 3x3 kernel; CONVS of them a repetition
CONV_CHANNELS, CONV_SIDE, CONVS = 128, 80, 6
#: numpy's fallback: an N x N float32 matmul
MATMUL_N = 384
#: in a CPU quota: each figure's window spans this many quota periods ...
QUOTA_PERIODS = 6
#: ... and lasts at most this long (a longer period is priced from the quota alone beyond it)
QUOTA_WINDOW_MAX_S = 2.0


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


def _times_s(fn: Callable[[], object], reps: int = REPS) -> list[float]:
    """The seconds of `reps` calls of `fn` after a warm-up, the garbage collector paused (a collection would time the
    process's whole heap, torch's included, not the machine)."""
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
    return times


def _median_s(fn: Callable[[], object], reps: int = REPS) -> float:
    """The median seconds of `fn` (`_times_s`)."""
    return statistics.median(_times_s(fn, reps))


def _sustained_s(fn: Callable[[], object], window_s: float, least: int = 3) -> tuple[float, list[float]]:
    """(mean seconds per call, each call's seconds) of `fn` called back to back after a warm-up until `window_s`
    have passed and at least `least` calls ran: the speed kept over the window, the stalls of a CPU quota
    included."""
    was = gc.isenabled()
    gc.disable()
    try:
        fn()  # warm-up
        times: list[float] = []
        t0 = time.perf_counter()
        while True:
            t1 = time.perf_counter()
            fn()
            now = time.perf_counter()
            times.append(now - t1)
            if now - t0 >= window_s and len(times) >= least:
                return (now - t0) / len(times), times
    finally:
        if was:
            gc.enable()


def _in_quota(fn: Callable[[], object], threads: int, quota: cpu_quota.Quota) -> tuple[float, dict]:
    """A figure under a CPU quota: the mean over a window of QUOTA_PERIODS quota periods; where the window cannot
    span them (a period longer than QUOTA_WINDOW_MAX_S / QUOTA_PERIODS), the slower of that and the fastest call
    priced from the quota (x `threads` / quota CPUs, where more: a call shorter than a period may have run in one
    allowance, unstalled; a longer one met the stalls already). With how each was read."""
    period_s = (quota.period_us or 100_000) / 1e6
    window = min(QUOTA_WINDOW_MAX_S, QUOTA_PERIODS * period_s)
    kept, times = _sustained_s(fn, window)
    fastest = min(times)
    over = max(1.0, threads / quota.cpus) if quota.cpus and fastest < period_s else 1.0
    priced = fastest * over
    spans = window >= QUOTA_PERIODS * period_s - 1e-9
    figure = kept if spans else max(kept, priced)
    return figure, {
        "burst_median_s": round(statistics.median(times), 6),
        "sustained_s": round(kept, 6),
        "calls": len(times),
        "window_s": round(window, 3),
        "periods_spanned": round(window / period_s, 2),
        "priced_s": round(priced, 6),
        "priced_as": f"fastest call x {over:.3g} ({threads} thread(s) in {quota.cpus:g} CPU)",
        "figure_from": "sustained" if figure == kept else "priced",
    }


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


def measure(threads: int | None = None, quota: cpu_quota.Quota | None = None) -> dict:
    """env.json's `machine_speed`: `python_s` and `compute_s` (median seconds, lower is faster; in a CPU quota the
    speed the process keeps, module docstring), what each timed, the threads of the compute figure, the seconds the
    measurement took, and `null_reasons` for a null figure. `quota`: this process's (read here when None).
    Never raises: an estimate must not stop a run."""
    t0 = time.perf_counter()
    if quota is None:
        quota = cpu_quota.read_quota()
    limited = quota.cpus is not None
    out: dict = {
        "python_s": None,
        "compute_s": None,
        "python": f"pure-Python graph building, {PY_ITERATIONS} iterations, 1 thread",
        "compute": None,
        "threads": threads,
        "reps": REPS,
        "statistic": f"median of {REPS} after 1 warm-up, seconds (lower is faster)",
    }
    if limited:
        out["statistic"] = (
            f"in {quota.words()}: the mean over {QUOTA_PERIODS} quota periods (at least 3 calls, after 1 "
            f"warm-up; a window capped at {QUOTA_WINDOW_MAX_S:g} s also priced from the quota), seconds (lower is "
            "faster)"
        )
        out["quota"] = {"cpus": quota.cpus, "period_us": quota.period_us, "source": quota.source}
    reasons: dict[str, str] = {}
    try:
        if limited:
            figure, how = _in_quota(python_work, 1, quota)
            out["python_s"], out["quota"]["python"] = round(figure, 6), how
        else:
            out["python_s"] = round(_median_s(python_work), 6)
    except Exception as e:
        reasons["python_s"] = f"{type(e).__name__}: {e}"[:200]
    try:
        fn, out["compute"], restore = compute_work(threads)
        try:
            if limited:
                figure, how = _in_quota(fn, int(threads or 1), quota)
                out["compute_s"], out["quota"]["compute"] = round(figure, 6), how
            else:
                out["compute_s"] = round(_median_s(fn), 6)
        finally:
            restore()
    except Exception as e:
        reasons["compute_s"] = f"{type(e).__name__}: {e}"[:200]
    if reasons:
        out["null_reasons"] = reasons
    out["measured_in_s"] = round(time.perf_counter() - t0, 3)
    return out
