"""GPU memory's order on the real H100 records (tests/data/gpu_h100, copied from the first GPU run): the seven
records whose NVML process peak is below torch's max reserved are caught, the four others pass, and a record that
breaks the order is written with null and the reason, never the contradictory pair."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.memory_order import (
    MEMORY_ORDER_TOLERANCE_MIB,
    enforce_memory_order,
    memory_order_break,
)
from harness.core.record import CellRecord, Memory
from harness.core.record_codec import record_from_json

H100 = Path(__file__).parent / "data" / "gpu_h100"
FILES = (
    "kit-cells-n.jsonl",
    "kit-cells-s.jsonl",
    "eager-cudagraph-fp32-fp16-cells.jsonl",
    "scenarios-cudagraph-cells.jsonl",
)
KIT_N, KIT_S, N, SCEN = FILES


def cid(size: str, backend: str, precision: str = "fp32") -> str:
    return f"yolo26{size}-detect-e2e-{backend}-cuda-640x640-b1-{precision}"


# (file, cell) -> (NVML process peak, torch max reserved), MiB, as the records hold them
BREAKS = {
    (KIT_N, cid("n", "torch-eager")): (8.0, 144.0),
    (KIT_N, cid("n", "torch-eager-cudagraph")): (152.0, 226.0),
    (KIT_S, cid("s", "torch-eager")): (16.0, 424.0),
    (KIT_S, cid("s", "torch-eager-cudagraph")): (446.0, 800.0),
    (N, cid("n", "torch-eager-cudagraph")): (168.0, 184.0),
    (N, cid("n", "torch-eager", "fp16")): (32.0, 214.0),
    (N, cid("n", "torch-eager-cudagraph", "fp16")): (64.0, 276.0),
}
HOLDS = {
    (KIT_N, cid("n", "torch-compile")),
    (KIT_S, cid("s", "torch-compile")),
    (N, cid("n", "torch-eager")),
    (SCEN, cid("n", "torch-eager-cudagraph")),
}


def h100_records() -> dict[tuple[str, str], CellRecord]:
    """(file, cell id) -> record of every ok CUDA record of the H100 run."""
    out = {}
    for name in FILES:
        for line in (H100 / name).read_text().splitlines():
            rec = record_from_json(line)
            if rec.device == "cuda" and rec.status == "ok":
                out[(name, rec.cell_id)] = rec
    return out


def test_the_seven_contradicting_h100_records_are_caught_and_the_four_others_pass():
    recs = h100_records()
    assert len(recs) == 11 and set(recs) == set(BREAKS) | HOLDS
    for key, (process, reserved) in BREAKS.items():
        mem = recs[key].memory
        assert (mem.device_peak_process_mib, mem.torch_max_reserved_mib) == (process, reserved)
        why = memory_order_break(mem)
        assert why is not None, key
        assert f"{process:.1f} MiB is below torch's max reserved {reserved:.1f}" in why
    for key in HOLDS:
        assert memory_order_break(recs[key].memory) is None, key


def test_a_record_that_breaks_the_order_is_written_with_null_and_the_reason():
    recs = h100_records()
    broken = recs[(KIT_N, cid("n", "torch-eager"))]
    why = enforce_memory_order(broken)
    mem, nr = broken.memory, broken.null_reasons
    assert why is not None and mem.device_peak_process_mib is None
    assert "8.0 MiB is below torch's max reserved 144.0 MiB" in nr["memory.device_peak_process_mib"]
    assert mem.torch_max_reserved_mib == 144.0 and mem.torch_max_allocated_mib == pytest.approx(78.5, abs=0.1)
    assert memory_order_break(mem) is None, "what is left holds the order"
    # the other way: a record that holds the order keeps every figure and gains no reason
    held = recs[(N, cid("n", "torch-eager"))]
    before = held.memory.to_dict()
    assert enforce_memory_order(held) is None
    assert held.memory.to_dict() == before and not any(k.startswith("memory.") for k in held.null_reasons)


def _record(mem: Memory) -> CellRecord:
    from harness.core.axes import Shape
    from harness.core.cell import Cell
    from harness.core.record import new_record

    rec = new_record("r", Cell("n", "detect", "e2e", "torch-eager", "cuda", Shape(640, 640)), "w")
    rec.memory = mem
    return rec


def test_the_tolerance_and_the_allocator_pair():
    tol = MEMORY_ORDER_TOLERANCE_MIB
    tie = Memory(torch_max_reserved_mib=100.0 + tol, device_peak_process_mib=100.0)
    assert memory_order_break(tie) is None
    assert memory_order_break(Memory(torch_max_reserved_mib=100.5 + tol, device_peak_process_mib=100.0))
    assert memory_order_break(Memory(torch_max_reserved_mib=500.0)) is None, "a null figure is not compared"
    assert memory_order_break(None) is None
    # allocated above reserved: torch's own pair goes, NVML's figures stay
    rec = _record(
        Memory(
            torch_max_allocated_mib=90.0,
            torch_max_reserved_mib=80.0,
            device_peak_process_mib=700.0,
            device_outside_torch_mib=600.0,
        )
    )
    assert "max allocated 90.0 MiB is above its max reserved 80.0" in enforce_memory_order(rec)
    mem = rec.memory
    assert mem.torch_max_allocated_mib is None and mem.torch_max_reserved_mib is None
    assert mem.device_peak_process_mib == 700.0 and mem.device_outside_torch_mib == 600.0
    assert set(rec.null_reasons) == {"memory.torch_max_allocated_mib", "memory.torch_max_reserved_mib"}
    # NVML below reserved: the process peak and what is derived from it go, torch's figures stay
    rec = _record(
        Memory(
            torch_max_allocated_mib=70.0,
            torch_max_reserved_mib=80.0,
            device_peak_process_mib=10.0,
            device_outside_torch_mib=0.0,
            device_context_mib=500.0,
        )
    )
    enforce_memory_order(rec)
    mem = rec.memory
    assert mem.device_peak_process_mib is None and mem.device_outside_torch_mib is None
    assert mem.torch_max_allocated_mib == 70.0 and mem.torch_max_reserved_mib == 80.0
    assert mem.device_context_mib == 500.0, "read before load, not derived from the process peak"
    assert set(rec.null_reasons) == {"memory.device_peak_process_mib", "memory.device_outside_torch_mib"}


def test_every_finished_record_keeps_the_order():
    import time
    from types import SimpleNamespace

    from harness.execute.recording import finish

    written = []
    writer = SimpleNamespace(write=lambda rec: written.append(rec) or rec)
    recs = h100_records()
    broken = recs[(KIT_S, cid("s", "torch-eager"))]
    rec = finish(SimpleNamespace(rec=broken, t0=time.perf_counter()), writer)
    assert written == [rec] and rec.memory.device_peak_process_mib is None
    assert (
        "16.0 MiB is below torch's max reserved 424.0 MiB"
        in rec.null_reasons["memory.device_peak_process_mib"]
    )
    held = recs[(KIT_S, cid("s", "torch-compile"))]
    assert (
        finish(SimpleNamespace(rec=held, t0=time.perf_counter()), writer).memory.device_peak_process_mib
        == 1064.0
    )


def test_the_report_shows_no_contradictory_pair_of_a_record_written_before_the_order():
    from harness.decide.load import null_reason
    from harness.report.tables import MEMORY_READERS

    recs = h100_records()
    process, reserved = "memory.device_peak_process_mib", "memory.torch_max_reserved_mib"
    for key in BREAKS:
        rec = recs[key]
        assert MEMORY_READERS[process](rec) is None  # NVML's figure that cannot be right is not shown
        assert MEMORY_READERS[reserved](rec) == rec.memory.torch_max_reserved_mib  # torch's exact figure is
        assert "break" in null_reason(rec, process) and "below torch's max reserved" in null_reason(
            rec, process
        )
    for key in HOLDS:  # the other way: a record that keeps the order shows both figures
        rec = recs[key]
        assert MEMORY_READERS[process](rec) == rec.memory.device_peak_process_mib
