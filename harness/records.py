"""Result records: one JSON object per cell, appended to results/<run_id>/cells.jsonl as each cell finishes.

Records are plain dicts on disk (readable without this package). `STATUSES` and `RECORD_FIELDS` are the contract
that the report, diagnosis and history stages read.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import SCHEMA_VERSION

log = logging.getLogger(__name__)

STATUSES = (
    "ok",
    "export_failed",
    "load_failed",
    "run_failed",
    "parity_failed",
    "skipped",
    "timeout",
    "crashed",
    "exported",  # export-only targets: the artifact exists, no runtime for it here
)
FAILED_STATUSES = ("export_failed", "load_failed", "run_failed", "parity_failed", "timeout", "crashed")

RECORD_FIELDS = (
    "schema_version",
    "run_id",
    "cell_id",
    "model",
    "size",
    "task",
    "head",
    "backend",
    "device",
    "height",
    "width",
    "dynamic",
    "batch",
    "precision_requested",
    "precision_executed",
    "weights",
    "status",
    "reason",
    "artifact",
    "artifact_bytes",
    "cache_hit",
    "export_s",
    "compile_s",
    "load_s",
    "first_run_ms",
    "latency_ms",
    "samples_ms",
    "device_latency_ms",
    "device_samples_ms",
    "throughput_ips",
    "memory",
    "parity",
    "gflops",
    "gpu_snapshot",
    "failure",
    "ops",
    "remedy",
    "remedy_of",
    "log",
    "null_reasons",
    "started_at",
    "duration_s",
)


@dataclass(frozen=True)
class Latency:
    """Latency statistics over timed rounds, in milliseconds."""

    p50: float
    p90: float
    p99: float
    mean: float
    min: float
    max: float
    stdev: float
    rounds: int
    timing_scope: str

    @classmethod
    def from_samples(cls, samples_ms: list[float], timing_scope: str) -> Latency:
        if not samples_ms:
            raise ValueError("no samples")
        s = sorted(samples_ms)
        return cls(
            p50=percentile(s, 50),
            p90=percentile(s, 90),
            p99=percentile(s, 99),
            mean=statistics.fmean(s),
            min=s[0],
            max=s[-1],
            stdev=statistics.stdev(s) if len(s) > 1 else 0.0,
            rounds=len(s),
            timing_scope=timing_scope,
        )

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default method) of already sorted values."""
    n = len(sorted_values)
    if n == 1:
        return sorted_values[0]
    pos = (n - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, n - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def new_record(run_id: str, cell, weights: str) -> dict[str, Any]:
    """A record with every field present: axes filled, measurements null until measured."""
    rec: dict[str, Any] = dict.fromkeys(RECORD_FIELDS)
    rec.update(cell.axes())
    rec.update(
        schema_version=SCHEMA_VERSION,
        run_id=run_id,
        cell_id=cell.id,
        weights=weights,
        gflops=cell.gflops,
        null_reasons={},
    )
    return rec


def set_null(rec: dict, field: str, reason: str) -> None:
    """Mark a field (dotted path for nested ones) as not measured, with the reason."""
    rec.setdefault("null_reasons", {})[field] = reason


class RecordWriter:
    """Appends records as JSON lines, flushing and fsyncing each so a killed run keeps every finished cell."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / "cells.jsonl"

    def write(self, rec: dict) -> None:
        missing = [f for f in RECORD_FIELDS if f not in rec]
        if missing:
            raise ValueError(f"record {rec.get('cell_id')} lacks fields {missing}")
        if rec["status"] not in STATUSES:
            raise ValueError(f"record {rec.get('cell_id')}: unknown status {rec['status']!r}")
        line = json.dumps(rec, sort_keys=False, allow_nan=False, default=str)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())


def read_records(path: Path) -> list[dict]:
    """Read cells.jsonl (or a run dir holding one); refuses records of a schema this version does not know."""
    path = Path(path)
    if path.is_dir():
        path = path / "cells.jsonl"
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                # A run killed mid-write can leave a torn last line; everything before it is intact.
                log.warning("%s:%d: unreadable line skipped (%s)", path, n, e)
                continue
            if rec.get("schema_version") != SCHEMA_VERSION:
                raise ValueError(
                    f"{path}:{n}: record schema_version {rec.get('schema_version')!r} is not "
                    f"{SCHEMA_VERSION}, the version this harness reads"
                )
            out.append(rec)
    return out
