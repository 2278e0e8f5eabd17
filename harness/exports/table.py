"""A run as a flat CSV table: one row per cell (its last record), the record's main fields, for spreadsheets and
pandas (`pandas.read_csv`). A null is an empty field; the record's `null_reasons` say why. Every row is one line:
a text's control, bidirectional and other non-printable characters (a newline, an ANSI escape, U+202E) are written
as Python escapes them (harness.core.safe_text.terminal_text), so the table shown on a terminal or read by a
line-oriented tool is the table the records hold."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from typing import Any

from harness.core.record import CellRecord, Latency
from harness.core.results_dir import Run, dig
from harness.core.safe_text import terminal_text


def _ci(lat: Latency | None, index: int) -> float | None:
    """One end of the p50's interval (latency_ms.p50_ci), None without one."""
    pair = lat.p50_ci if lat else None
    return pair[index] if isinstance(pair, list) and len(pair) > index else None


#: column -> how the record gives it (fields as in harness/core/record.py); None: filled from the run
COLUMNS: dict[str, Callable[[CellRecord], Any] | None] = {
    "run_id": lambda r: r.run_id,
    "cell_id": lambda r: r.cell_id,
    "model": lambda r: r.model,
    "size": lambda r: r.size,
    "task": lambda r: r.task,
    "head": lambda r: r.head,
    "backend": lambda r: r.backend,
    "device": lambda r: r.device,
    "height": lambda r: r.height,
    "width": lambda r: r.width,
    "dynamic": lambda r: r.dynamic,
    "batch": lambda r: r.batch,
    "precision_requested": lambda r: r.precision_requested,
    "precision_executed": lambda r: r.precision_executed,
    "threads": lambda r: r.threads,
    "weights": lambda r: r.weights,
    "status": lambda r: r.status,
    "reason": lambda r: r.reason,
    "latency_p50_ms": lambda r: r.latency_ms.p50 if r.latency_ms else None,
    "latency_p50_ci_low_ms": lambda r: _ci(r.latency_ms, 0),
    "latency_p50_ci_high_ms": lambda r: _ci(r.latency_ms, 1),
    "latency_p90_ms": lambda r: r.latency_ms.p90 if r.latency_ms else None,
    "latency_p99_ms": lambda r: r.latency_ms.p99 if r.latency_ms else None,
    "rounds": lambda r: r.latency_ms.rounds if r.latency_ms else None,
    "timing_scope": lambda r: r.latency_ms.timing_scope if r.latency_ms else None,
    "throughput_ips": lambda r: r.throughput_ips,
    "latency_e2e_p50_ms": lambda r: r.latency_e2e_ms.p50 if r.latency_e2e_ms else None,
    "latency_e2e_p99_ms": lambda r: r.latency_e2e_ms.p99 if r.latency_e2e_ms else None,
    "paired_ratio": lambda r: dig(r.paired, "ratio"),
    "paired_reference": lambda r: dig(r.paired, "reference"),
    "host_peak_rss_mib": lambda r: r.memory.host_peak_rss_mib if r.memory else None,
    "device_peak_used_mib": lambda r: r.memory.device_peak_used_mib if r.memory else None,
    "map50_95": lambda r: dig(r.accuracy, "map50_95"),
    "map_ratio": lambda r: dig(r.accuracy, "ratio"),
    "export_s": lambda r: r.export_s,
    "cache_hit": lambda r: r.cache_hit,
    "artifact_bytes": lambda r: r.artifact_bytes,
    "failure_class": lambda r: dig(r.failure, "class"),
    "machine": None,  # filled from the run (merged runs hold several machines)
}


def rows(runs: list[Run]) -> list[dict]:
    """One row per cell id (its last record) of every run, in record order."""
    out = []
    for run in runs:
        last = {str(r.cell_id): r for r in run.records if r.cell_id}
        for rec in last.values():
            row = {col: read(rec) for col, read in COLUMNS.items() if read}
            row["machine"] = run.machine
            out.append(row)
    return out


def to_csv(runs: list[Run]) -> str:
    """The CSV text (header, then one row per cell)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(COLUMNS), lineterminator="\n")
    w.writeheader()
    for row in rows(runs):
        w.writerow(
            {k: "" if v is None else terminal_text(v) if isinstance(v, str) else v for k, v in row.items()}
        )
    return buf.getvalue()
