"""The run's CPU thread budget: one number, chosen by the user (`--threads`) or the physical cores the process can use.

The CPUs a process can use are the fewest of its affinity mask and its cgroup CPU quota (harness.core.cpu_quota: a
container's `--cpus` or CPU limit, which `os.cpu_count()`, the affinity mask and psutil do not show). The default
budget is the machine's physical cores within that: a quota of 1.5 CPUs on a 64-core host is 1 thread (a fractional
quota rounds down, at least 1), since threads beyond the quota run only to be stalled together at the end of each
quota period (docs/containers.md).

Every CPU runtime gets it through its own API (ONNX Runtime intra-op threads, OpenVINO inference threads, torch
intra-op threads, the ExecuTorch/XNNPACK threadpool) and reports back what it uses; this module holds the number
for the process and the environment that carries it into export and probe subprocesses. An imported library's
environment defaults never decide it: importing ultralytics sets OMP_NUM_THREADS=1 when unset, and ultralytics'
`select_device("cpu")` sets torch to min(8, cores - 1) threads, so the budget is applied again after both.
"""

from __future__ import annotations

import logging
import os

from harness.core import cpu_quota

log = logging.getLogger(__name__)

ENV = "YOLO26_BENCH_THREADS"
# Environment variables read by OpenMP-based libraries at their first parallel region.
OMP_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def affinity_cpus() -> int:
    """The logical CPUs this process's affinity mask allows (all of them where the mask cannot be read)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def quota() -> cpu_quota.Quota:
    """This process's cgroup CPU quota (harness.core.cpu_quota; cpus None where there is none)."""
    return cpu_quota.read_quota()


def cpu_budget(q: cpu_quota.Quota | None = None) -> tuple[float, str]:
    """The CPUs this process can use at once: the fewer of its affinity mask and its cgroup CPU quota, and which
    of them binds ("affinity mask" or "cgroup CPU quota")."""
    q = q or quota()
    usable = float(affinity_cpus())
    if q.cpus is not None and q.cpus < usable:
        return q.cpus, "cgroup CPU quota"
    return usable, "affinity mask"


def physical_cores(q: cpu_quota.Quota | None = None) -> int:
    """The machine's physical cores usable by this process: within its affinity mask and its CPU quota rounded
    down, at least 1 (logical CPUs when the physical count is unknown)."""
    try:
        import psutil

        n = psutil.cpu_count(logical=False)
    except ImportError:
        n = None
    usable = affinity_cpus()
    q = q or quota()
    if q.whole_cpus is not None:
        usable = min(usable, q.whole_cpus)
    return max(1, min(n or usable, usable))


def default_source(q: cpu_quota.Quota | None = None) -> str:
    """Who chose a default budget: DEFAULT_SOURCE, or the same within the cgroup quota where that binds."""
    q = q or quota()
    if q.whole_cpus is not None and q.whole_cpus < affinity_cpus():
        return f"physical cores within the cgroup CPU quota of {q.cpus:g} CPU (default)"
    return DEFAULT_SOURCE


def logical_cpus() -> int:
    """Logical CPUs of the machine (all of them, whatever this process's affinity)."""
    return os.cpu_count() or 1


#: `--threads` above this many times the logical CPUs is refused as a typo (oversubscription is allowed up to it)
MAX_PER_LOGICAL_CPU = 4
#: env.json's `threads.source` for a budget nobody chose
DEFAULT_SOURCE = "physical cores (default)"
#: `cpu_threads()` of a runner whose inference runs on a GPU
GPU_CELL_REASON = "a GPU cell: the GPU executes the model, the host thread only launches work and copies data"


def parse(text: str | int, option: str = "--threads") -> int:
    """A thread budget from user input: a whole number in [1, MAX_PER_LOGICAL_CPU x logical CPUs].

    Raises ValueError with a one-line message naming `option`.
    """
    try:
        n = int(str(text).strip())
    except ValueError:
        raise ValueError(f"{option}: {text!r} is not a whole number of threads") from None
    if n < 1:
        raise ValueError(f"{option}: {n} must be at least 1")
    limit = MAX_PER_LOGICAL_CPU * logical_cpus()
    if n > limit:
        raise ValueError(
            f"{option}: {n} is more than {MAX_PER_LOGICAL_CPU}x the {logical_cpus()} logical CPUs of this machine "
            f"(at most {limit})"
        )
    return n


def budget() -> int:
    """The thread budget of this process: $YOLO26_BENCH_THREADS when set (by the harness), else physical cores."""
    text = os.environ.get(ENV)
    if text:
        try:
            n = int(text)
        except ValueError:
            raise ValueError(f"{ENV}={text!r} is not a whole number of threads") from None
        if n < 1:
            raise ValueError(f"{ENV}={n} must be at least 1")
        return n
    return physical_cores()


def info(n: int | None = None, source: str | None = None) -> dict:
    """env.json's `threads`: the run's CPU thread budget `n`, who chose it (`source`), the machine's CPUs, and the
    CPU budget (the fewest of the affinity mask, the cgroup CPU quota and the thread budget, with which binds);
    `n` and `source` default to this process's budget and who set it."""
    q = quota()
    if n is None:
        n = budget()
        if source is None:
            source = f"${ENV}" if os.environ.get(ENV) else default_source(q)
    cpus, bound = cpu_budget(q)
    if n < cpus:
        cpus, bound = float(n), "the thread budget"
    out = {
        "budget": n,
        "physical_cores": physical_cores(q),
        "logical_cpus": logical_cpus(),
        "source": source or DEFAULT_SOURCE,
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "cpu_budget": round(cpus, 4),
        "cpu_budget_bound_by": bound,
    }
    if q.whole_cpus is not None and n > q.whole_cpus:
        out["over_quota"] = (
            f"{n} threads in {q.words()}: more threads than the quota runs at once, so they are stalled "
            "together at the end of each period's allowance (docs/containers.md)"
        )
    return out


def set_budget(n: int) -> None:
    """Make `n` this process's budget and the one its subprocesses inherit (set before ultralytics is imported)."""
    if n < 1:
        raise ValueError(f"thread budget {n} must be at least 1")
    os.environ[ENV] = str(n)
    for var in OMP_VARS:
        os.environ[var] = str(n)
    apply_torch()


def apply_torch(n: int | None = None) -> int | None:
    """Set torch's intra-op threads to the budget if torch is imported; returns what torch reports."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None:
        return None
    n = n or budget()
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return torch.get_num_threads()


def torch_threads() -> tuple[int | None, str]:
    """torch's intra-op threads as torch reports them (what `cpu_threads()` of a torch CPU runner returns)."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None:
        return None, "torch is not imported in this process"
    return torch.get_num_threads(), "torch.get_num_threads() (torch's intra-op thread pool, OpenMP)"
