"""The memory figure compared between runs: which record field it is read from, in order of preference."""

from __future__ import annotations

# Memory compared between runs, in order of preference (see docs/regression-tracking.md).
MEMORY_SOURCES = ("device_peak_process_mib", "host_peak_delta_mib", "host_peak_rss_mib")


def memory_mib(rec: dict) -> tuple[float | None, str | None]:
    """The memory figure compared between runs (MiB) and which field it came from."""
    mem = rec.get("memory") or {}
    for source in MEMORY_SOURCES:
        value = mem.get(source)
        if isinstance(value, int | float):
            return float(value), source
    return None, None
