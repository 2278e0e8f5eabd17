"""The memory figure compared between runs: which record field it is read from, in order of preference."""

from __future__ import annotations

from typing import Any

from harness.core.record import CellRecord
from harness.core.record_codec import section_items

# Memory compared between runs, in order of preference (see docs/regression-tracking.md).
MEMORY_SOURCES = ("device_peak_process_mib", "host_peak_delta_mib", "host_peak_rss_mib")


def memory_mib(rec: CellRecord) -> tuple[float | None, str | None]:
    """The memory figure compared between runs (MiB) and which field it came from."""
    return section_memory_mib(dict(section_items(rec.memory)))


def section_memory_mib(mem: dict[str, Any] | None) -> tuple[float | None, str | None]:
    """memory_mib of a record's `memory` section as JSON (the history database's stored record, which
    harness.history.upgrade migrates in place)."""
    mem = mem or {}
    for source in MEMORY_SOURCES:
        value = mem.get(source)
        if isinstance(value, int | float):
            return float(value), source
    return None, None
