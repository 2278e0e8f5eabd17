"""The GPU memory of a run's CUDA records, and whether each keeps the order (docs/gpu.md, GPU memory).

    python benchmarks/gpu_memory_records.py RUN_DIR_OR_CELLS_JSONL...

One line per ok cuda record: the context, the process peak over it, what lies outside torch's allocator, torch's
max allocated and reserved (MiB), and `order ok` or how the record breaks
torch_max_allocated <= torch_max_reserved <= device_peak_process (+ 2 MiB) (harness.core.memory_order), or the
reason a figure is null. Exit status 1 when a record breaks the order or lacks a fresh-process figure (absent, or
null without a reason), 0 otherwise (2 when no ok cuda record was found).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

FIGURES = (
    ("ctx", "device_context_mib"),
    ("proc", "device_peak_process_mib"),
    ("outside", "device_outside_torch_mib"),
    ("alloc", "torch_max_allocated_mib"),
    ("resv", "torch_max_reserved_mib"),
)


def lines(path: str) -> tuple[list[str], int, int]:
    """(one line per ok cuda record, records seen, records that failed the check)."""
    from harness.core.memory_order import memory_order_break
    from harness.core.record import Memory
    from harness.core.record_codec import section_items
    from harness.core.results_dir import read_records

    out, seen, bad = [], 0, 0
    for rec in read_records(path):
        if rec.device != "cuda" or rec.status != "ok":
            continue
        seen += 1
        mem = rec.memory or Memory()
        broken = memory_order_break(mem)
        held = dict(section_items(mem))
        shown, unexplained, absent = [], [], []
        for name, key in FIGURES:
            value = held.get(key)
            shown.append(f"{name} {value:.0f}" if value is not None else f"{name} -")
            if key not in held:
                absent.append(key)
            elif value is None and f"memory.{key}" not in rec.null_reasons:
                unexplained.append(key)
        verdict = "order ok" if broken is None else f"BREAKS: {broken}"
        if unexplained:
            verdict += f"; null without a reason: {', '.join(unexplained)}"
        if absent:
            verdict += f"; not in the record (written before the field existed): {', '.join(absent)}"
        bad += bool(broken or unexplained or absent)
        nulls = [f"{k}: {v}" for k, v in rec.null_reasons.items() if k.startswith("memory.device_") and v]
        out.append(
            f"{rec.cell_id}  {', '.join(shown)}  {verdict}" + (f"  ({'; '.join(nulls)})" if nulls else "")
        )
    return out, seen, bad


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    seen = bad = 0
    for path in argv:
        text, n, b = lines(path)
        print(f"== {path}")
        print("\n".join(text) if text else "(no ok cuda record)")
        seen, bad = seen + n, bad + b
    print(f"{seen} ok cuda records, {bad} break the memory order or lack a figure")
    return 2 if not seen else int(bad > 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
