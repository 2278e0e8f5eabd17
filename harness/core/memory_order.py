"""The order a CUDA record's GPU memory figures must keep, its check, and its enforcement on a record.

Everything torch's caching allocator hands out it has reserved first, and everything it reserved is device memory
of the process, so on every record:

    torch_max_allocated_mib <= torch_max_reserved_mib <= device_peak_process_mib + MEMORY_ORDER_TOLERANCE_MIB

`memory_order_break` tells whether a memory section breaks it (the sentence, or None); figures that are null are
not compared. `enforce_memory_order` is what a tracker calls before a record is written: a section that breaks it
keeps none of the contradictory pair. The figure it cannot have right is null with a reason naming both values
(NVML's process peak when it is below torch's reserved memory; torch's two figures when allocated exceeds
reserved), so a reader never gets two figures of which one must be wrong. The report's and the `check` command's
readers call `memory_order_break` on records already written.

Why a record could break it: NVML's process figure over a baseline read when torch's allocator already held memory
(several runners in one process share one caching allocator, see docs/gpu.md), set beside torch's absolute peaks.
"""

from __future__ import annotations

from harness.core.record import CellRecord, Memory, set_null

#: NVML's per-process figure is counted in 2 MiB steps (every process figure of the H100 records in
#: tests/data/gpu_h100 is a multiple of 2 MiB), and torch rounds its reservations to 2 MiB segments: one step of
#: slack, so an exact tie read at different instants does not count as a break
MEMORY_ORDER_TOLERANCE_MIB = 2.0
#: the relation, as written in reasons and docs
MEMORY_ORDER = (
    "torch_max_allocated_mib <= torch_max_reserved_mib <= device_peak_process_mib "
    f"(+ {MEMORY_ORDER_TOLERANCE_MIB:g} MiB)"
)


def memory_order_break(mem: Memory | None) -> str | None:
    """The sentence saying how `mem` breaks MEMORY_ORDER, or None when it holds (a null figure is not compared)."""
    if mem is None:
        return None
    allocated, reserved = mem.torch_max_allocated_mib, mem.torch_max_reserved_mib
    process = mem.device_peak_process_mib
    if allocated is not None and reserved is not None and allocated > reserved:
        return (
            f"torch's max allocated {allocated:.1f} MiB is above its max reserved {reserved:.1f} MiB "
            "(the allocator hands out only what it reserved)"
        )
    if reserved is not None and process is not None and reserved > process + MEMORY_ORDER_TOLERANCE_MIB:
        return (
            f"NVML's process peak {process:.1f} MiB is below torch's max reserved {reserved:.1f} MiB "
            f"(+ {MEMORY_ORDER_TOLERANCE_MIB:g} MiB tolerance), yet torch's reserved memory is part of the "
            "process's device memory"
        )
    return None


def enforce_memory_order(rec: CellRecord) -> str | None:
    """Null the figures of `rec.memory` that break MEMORY_ORDER, each with the reason; returns the break (None
    when the figures hold it). Torch's allocator counters are exact, so when NVML's sampled process figure is below
    them the NVML figures go (the process peak and what is derived from it); when torch's own two figures disagree
    both go."""
    mem = rec.memory
    why = memory_order_break(mem)
    if mem is None or why is None:
        return why
    for name, reason in dropped_figures(mem).items():
        setattr(mem, name, None)
        set_null(rec, f"memory.{name}", reason)
    return why


def dropped_figures(mem: Memory | None) -> dict[str, str]:
    """The figures of `mem` that `enforce_memory_order` nulls (name -> reason), without changing it: what a reader
    of records written before the order was enforced (the first GPU run's) shows as null instead of the pair."""
    why = memory_order_break(mem)
    if mem is None or why is None:
        return {}
    reason = f"not kept: the figures break {MEMORY_ORDER}: {why}"
    if (
        mem.torch_max_allocated_mib is not None
        and mem.torch_max_reserved_mib is not None
        and (mem.torch_max_allocated_mib > mem.torch_max_reserved_mib)
    ):
        names = ["torch_max_allocated_mib", "torch_max_reserved_mib"]
    else:
        names = ["device_peak_process_mib", *NVML_PROCESS_DERIVED]
    return {name: reason for name in names if getattr(mem, name) is not None}


#: figures computed from NVML's process figure: they go with it
NVML_PROCESS_DERIVED = ("device_outside_torch_mib",)
