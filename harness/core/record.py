"""Result records: one JSON object per cell, appended to results/<run_id>/cells.jsonl as each cell finishes.

Records are plain dicts on disk (readable without this package). `STATUSES` and `RECORD_FIELDS` are the contract
that the report, diagnosis and history stages read. Writing and reading the files is harness.core.results_dir's
job (RecordWriter, read_records); older schema versions are migrated by harness.core.migrate.
"""

from __future__ import annotations

import math
import numbers
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


# ---- non-finite figures ----------------------------------------------------------------------------------------
# NaN and infinity are not JSON, are stored as NULL by SQLite and compare false with everything, so a NaN latency
# would pass every regression check in silence. They are refused where records are written (check_finite) and
# where runs are imported (the history refuses a run holding one).


def _is_non_finite(value: Any) -> bool:
    return (
        isinstance(value, numbers.Real)
        and not isinstance(value, numbers.Integral)
        and not math.isfinite(float(value))
    )


def _walk(obj: Any, keys: tuple = ()) -> list[tuple[tuple, Any]]:
    """(key path, value) of every NaN or infinite number under `obj`; a list counts as one field (its path, its
    first non-finite value), since the whole list is what gets nulled."""
    if isinstance(obj, dict):
        return [hit for k, v in obj.items() for hit in _walk(v, (*keys, k))]
    if isinstance(obj, list | tuple):
        hits = [hit for v in obj for hit in _walk(v, keys)]
        return [(keys, hits[0][1])] if hits else []
    return [(keys, obj)] if _is_non_finite(obj) else []


def non_finite(obj: Any) -> list[tuple[str, Any]]:
    """(dotted path, value) of every NaN or infinite number in a record or env dict (`latency_ms.p50`)."""
    return [(".".join(map(str, keys)), value) for keys, value in _walk(obj)]


def check_finite(rec: dict) -> list[str]:
    """Refuse NaN and infinite figures in a record about to be written; returns the fields that held one.

    Each such field becomes null with a reason. A cell that had not already failed becomes `run_failed` with the
    reason naming the fields (its figures cannot be trusted); a failed cell keeps its status, since the figure is
    a symptom of the failure it already records (an infinite parity error of a shape mismatch, say).
    """
    found = [(".".join(map(str, keys)), keys, value) for keys, value in _walk(rec)]
    for path, keys, value in found:
        holder = rec
        for key in keys[:-1]:
            holder = holder[key]
        holder[keys[-1]] = None
        set_null(
            rec,
            path,
            f"the measured value was {float(value)!r} (not finite); refused when the record was written",
        )
    if found and rec.get("status") not in FAILED_STATUSES:
        names = ", ".join(f"{p} = {float(v)!r}" for p, _, v in found)
        reason = f"non-finite figures refused: {names}"
        rec.update(status="run_failed", reason=reason)
        rec["failure"] = {
            "class": "numerical_mismatch",
            "stage": "record",
            "message": reason,
            "ops": [],
            "guards": [],
            "suggested_fix": None,
            "exception_type": None,
            "log": rec.get("log"),
        }
    return [p for p, _, _ in found]
