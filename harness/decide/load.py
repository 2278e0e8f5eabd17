"""The report's view of results: the run directories named on its command line, and tolerant access to record
fields.

Reading a directory is harness.core.results_dir's job: records come back as typed CellRecords of the current schema,
whatever version wrote them. The report reads their fields by attribute; any figure may be null (its null reason
says why), and the sections whose keys vary (parity, accuracy, failure, ops, scenarios, ...) are dicts, read
tolerantly with `number` and `dig`.
"""

from __future__ import annotations

import logging
from pathlib import Path

from harness.core.memory_order import dropped_figures
from harness.core.record import FAILED_STATUSES, CellRecord, Latency
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


def finite(value: object) -> float | None:
    """A number as a float, or None when it is null, boolean or not a finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if value != value or value in (float("inf"), float("-inf")):
        return None
    return float(value)


def number(section: dict | None, path: str) -> float | None:
    """A numeric value at a dotted path of a dict section (`number(rec.accuracy, "ratio")`), or None when absent,
    null, boolean or not a finite number."""
    return finite(dig(section, path))


def stat(section: Latency | None, name: str) -> float | None:
    """One figure of a latency section (`p50`, `p99`, `max`, `rounds`, ...) as a finite float, or None when the
    section or the figure is absent, null or not finite."""
    return finite(getattr(section, name)) if section is not None else None


def p50(rec: CellRecord) -> float | None:
    """The record's model-only p50 (ms), or None when it has none."""
    return finite(rec.latency_ms.p50) if rec.latency_ms else None


def null_reason(rec: CellRecord, path: str) -> str:
    """Why a field holds no value: the record's own `null_reasons` (the field or a parent), else its status."""
    if path.startswith("memory."):
        dropped = dropped_figures(rec.memory).get(path.split(".", 1)[1])
        if dropped:  # a record written before the GPU memory order was enforced
            return dropped
    parts = path.split(".")
    for n in range(len(parts), 0, -1):
        reason = rec.null_reasons.get(".".join(parts[:n]))
        if reason:
            return str(reason)
    status = rec.status
    if status == "skipped":
        return f"skipped: {rec.reason or 'no reason recorded'}"
    if status in FAILED_STATUSES:
        cls = dig(rec.failure, "class")
        return f"{status}" + (f" ({cls})" if cls else "")
    if status == "exported":
        return "export-only target: no runtime for it on this machine"
    return "not recorded (the record gives no reason)"


def is_failed(rec: CellRecord) -> bool:
    """The record's status is one of the failed statuses (not skipped, exported or ok)."""
    return rec.status in FAILED_STATUSES


def shape_label(rec: CellRecord) -> str:
    """`640x640` for a static cell, `dynamic` for the dynamic probe (the run shape is shown inside the cell)."""
    if rec.dynamic:
        return "dynamic"
    h, w = rec.height, rec.width
    return f"{h}x{w}" if h and w else UNKNOWN


def run_shape(rec: CellRecord) -> str:
    """The shape the record actually ran at: `480x480`, or `export probe` for a dynamic record without one."""
    h, w = rec.height, rec.width
    if h and w:
        return f"{h}x{w}"
    return "export probe" if rec.dynamic else UNKNOWN
