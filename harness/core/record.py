"""Result records: one JSON object per cell, appended to results/<run_id>/cells.jsonl as each cell finishes.

Records are plain dicts on disk (readable without this package). `STATUSES` and `RECORD_FIELDS` are the contract
that the report, diagnosis and history stages read. Writing and reading the files is harness.core.results_dir's
job (RecordWriter, read_records); older schema versions are migrated by harness.core.migrate.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from harness import SCHEMA_VERSION

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
    "precision_source",
    "precision_detail",
    "threads",
    "threads_requested",
    "weights",
    "status",
    "reason",
    "artifact",
    "artifact_bytes",
    "cache_hit",
    "export_s",
    "export_origin",
    "compile_s",
    "load_s",
    "first_run_ms",
    "latency_ms",
    "samples_ms",
    "device_latency_ms",
    "device_samples_ms",
    "throughput_ips",
    "memory",
    "energy",
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


MIB = 2**20


@dataclass
class Memory:
    """The `memory` section, in MiB (2**20 bytes). Host figures come from the host tracker, device ones from the
    GPU memory tracker; a figure not measured stays None and gets a null reason from the tracker."""

    host_peak_rss_mib: float | None = None
    host_peak_delta_mib: float | None = None
    host_baseline_mib: float | None = None
    device_peak_used_mib: float | None = None
    device_peak_process_mib: float | None = None
    torch_max_allocated_mib: float | None = None
    torch_max_reserved_mib: float | None = None
    source: str = ""
    #: where the host figures come from: "measured in this attempt", or the earlier run whose fresh-process
    #: measurement of the same artifact was reused (harness.execute.memory_cache)
    origin: str | None = None

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass
class Energy:
    """The `energy` section: joules per inference over the timed rounds, and how they were read."""

    per_inference_j: float | None = None
    window_s: float | None = None
    inferences: int | None = None
    source: str = ""

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def section(rec: dict, name: str, cls):
    """The record's typed section `name` (created empty when absent), to be filled and written back by `put`."""
    cur = rec.get(name)
    return cls(**cur) if isinstance(cur, dict) else cls()


def put(rec: dict, name: str, value) -> None:
    """Write a typed section back into the record."""
    rec[name] = value.to_dict()


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
