"""A run as a flat CSV table: one row per cell (its last record), the record's main fields, for spreadsheets and
pandas (`pandas.read_csv`). A null is an empty field; the record's `null_reasons` say why."""

from __future__ import annotations

import csv
import io

from harness.core.results_dir import Run, dig

#: column -> dotted path in the record (harness/core/record.py)
COLUMNS: dict[str, str] = {
    "run_id": "run_id",
    "cell_id": "cell_id",
    "model": "model",
    "size": "size",
    "task": "task",
    "head": "head",
    "backend": "backend",
    "device": "device",
    "height": "height",
    "width": "width",
    "dynamic": "dynamic",
    "batch": "batch",
    "precision_requested": "precision_requested",
    "precision_executed": "precision_executed",
    "threads": "threads",
    "weights": "weights",
    "status": "status",
    "reason": "reason",
    "latency_p50_ms": "latency_ms.p50",
    "latency_p50_ci_low_ms": "latency_ms.p50_ci.0",
    "latency_p50_ci_high_ms": "latency_ms.p50_ci.1",
    "latency_p90_ms": "latency_ms.p90",
    "latency_p99_ms": "latency_ms.p99",
    "rounds": "latency_ms.rounds",
    "timing_scope": "latency_ms.timing_scope",
    "throughput_ips": "throughput_ips",
    "latency_e2e_p50_ms": "latency_e2e_ms.p50",
    "latency_e2e_p99_ms": "latency_e2e_ms.p99",
    "paired_ratio": "paired.ratio",
    "paired_reference": "paired.reference",
    "host_peak_rss_mib": "memory.host_peak_rss_mib",
    "device_peak_used_mib": "memory.device_peak_used_mib",
    "map50_95": "accuracy.map50_95",
    "map_ratio": "accuracy.ratio",
    "export_s": "export_s",
    "cache_hit": "cache_hit",
    "artifact_bytes": "artifact_bytes",
    "failure_class": "failure.class",
    "machine": "",  # filled from the run (merged runs hold several machines)
}


def _value(rec: dict, path: str):
    head, _, index = path.rpartition(".")
    if index.isdigit():  # an element of a pair such as p50_ci
        pair = dig(rec, head)
        return pair[int(index)] if isinstance(pair, list) and len(pair) > int(index) else None
    return dig(rec, path)


def rows(runs: list[Run]) -> list[dict]:
    """One row per cell id (its last record) of every run, in record order."""
    out = []
    for run in runs:
        last = {str(r["cell_id"]): r for r in run.records if r.get("cell_id")}
        for rec in last.values():
            row = {col: _value(rec, path) for col, path in COLUMNS.items() if path}
            row["machine"] = run.machine
            out.append(row)
    return out


def to_csv(runs: list[Run]) -> str:
    """The CSV text (header, then one row per cell)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(COLUMNS), lineterminator="\n")
    w.writeheader()
    for row in rows(runs):
        w.writerow({k: "" if v is None else v for k, v in row.items()})
    return buf.getvalue()
