"""The report's view of results: the run directories named on its command line, and tolerant access to record
fields.

Reading a directory is harness.core.results_dir's job (records come back as schema version 2, whatever version
wrote them). The report reads records as plain dicts: every field may be null or absent, and unknown extra
fields are ignored.
"""

from __future__ import annotations

import logging
from pathlib import Path

from harness.core.record import FAILED_STATUSES
from harness.core.results_dir import UNKNOWN, Run, dig, is_results_dir, load_run

log = logging.getLogger(__name__)


def load_runs(result_dirs: list[Path]) -> list[Run]:
    """Load each result directory; a directory without cells.jsonl contributes the run dirs directly inside it."""
    runs: list[Run] = []
    for d in result_dirs:
        d = Path(d)
        if is_results_dir(d):
            runs.extend(load_run(d))
            continue
        children = sorted(p for p in d.iterdir() if is_results_dir(p)) if d.is_dir() else []
        if not children:
            raise FileNotFoundError(f"{d}: no cells.jsonl here nor in any directory directly inside it")
        log.info("%s: holds %d runs", d, len(children))
        for c in children:
            runs.extend(load_run(c))
    return runs


def number(rec: dict, path: str) -> float | None:
    """A numeric field, or None when absent, null, boolean or not a finite number."""
    value = dig(rec, path)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if value != value or value in (float("inf"), float("-inf")):
        return None
    return float(value)


def null_reason(rec: dict, path: str) -> str:
    """Why a field holds no value: the record's own `null_reasons` (the field or a parent), else its status."""
    reasons = rec.get("null_reasons") if isinstance(rec.get("null_reasons"), dict) else {}
    parts = path.split(".")
    for n in range(len(parts), 0, -1):
        reason = reasons.get(".".join(parts[:n]))
        if reason:
            return str(reason)
    status = rec.get("status")
    if status == "skipped":
        return f"skipped: {rec.get('reason') or 'no reason recorded'}"
    if status in FAILED_STATUSES:
        cls = dig(rec, "failure.class")
        return f"{status}" + (f" ({cls})" if cls else "")
    if status == "exported":
        return "export-only target: no runtime for it on this machine"
    return "not recorded (the record gives no reason)"


def is_failed(rec: dict) -> bool:
    """The record's status is one of the failed statuses (not skipped, exported or ok)."""
    return rec.get("status") in FAILED_STATUSES


def shape_label(rec: dict) -> str:
    """`640x640` for a static cell, `dynamic` for the dynamic probe (the run shape is shown inside the cell)."""
    if rec.get("dynamic"):
        return "dynamic"
    h, w = rec.get("height"), rec.get("width")
    return f"{h}x{w}" if h and w else UNKNOWN


def run_shape(rec: dict) -> str:
    """The shape the record actually ran at: `480x480`, or `export probe` for a dynamic record without one."""
    h, w = rec.get("height"), rec.get("width")
    if h and w:
        return f"{h}x{w}"
    return "export probe" if rec.get("dynamic") else UNKNOWN
