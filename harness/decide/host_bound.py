"""Whether a pick's decisive figure is the host's: a host-bound CUDA cell's time is set by the host CPU's Python and
launch speed, not by the GPU (harness.measure.host_bound), so its figure, and the pick that rests on it, will move
with the host CPU. Every pick carries the verdict (`Pick.host_bound` in words, decision.json's `host_bound`)."""

from __future__ import annotations

from harness.core.record import CellRecord
from harness.decide.index import RunIndex
from harness.measure.host_bound import share_text, verdict

#: what the first screen says beside a host-bound pick
SHORT = "host-bound: moves with the host CPU"


def of(rec: CellRecord | None, idx: RunIndex) -> dict | None:
    """The record's host-bound verdict (None: not an ok CUDA cell, or no record)."""
    return None if rec is None else verdict(rec, idx.all_records())


def words(rec: CellRecord | None, idx: RunIndex) -> str:
    """The pick's warning when its cell is host-bound, else ""."""
    v = of(rec, idx)
    if not v or not v.get("host_bound"):
        return ""
    return (
        f"host-bound ({share_text(v)}): the figure is the host CPU's launch speed, not the GPU's, and will move "
        "with the host CPU"
    )
