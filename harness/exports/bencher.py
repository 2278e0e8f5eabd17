"""A run as Bencher Metric Format (BMF) JSON: {benchmark: {measure: {value, lower_value, upper_value}}}.

One benchmark per cell id. Measures, each only where the record holds the figure (a null is left out, never
replaced by a number):

- `latency` (Bencher's built-in measure, nanoseconds): the model-only p50, with `lower_value` / `upper_value` the
  p50's 95% interval (`latency_ms.p50_ci`)
- `latency-e2e-p99` (nanoseconds): the end-to-end p99 (null below 100 rounds, so often absent)
- `throughput` (Bencher's built-in measure, here images per second): batch x 1000 / p50
- `host-peak-rss-mib` (MiB): the cell's host peak RSS
- `map-ratio` (share): the cell's mAP50-95 over the PyTorch fp32 reference's on the same images

The format is Bencher's: https://bencher.dev/docs/reference/bencher-metric-format (its JSON schema requires an
object of benchmarks, each an object of measures, each an object with a number `value` and optional number
`lower_value` and `upper_value`; measure slugs are at most 64 characters, benchmark names at most 1024).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.core.record import CellRecord
from harness.core.results_dir import Run, dig

NS_PER_MS = 1_000_000.0
#: Bencher's limits on names (its docs: a measure slug or name at most 64 characters, a benchmark name at most 1024)
MAX_MEASURE = 64
MAX_BENCHMARK = 1024


@dataclass(frozen=True)
class Measure:
    """One BMF measure: its slug, the record's value (read from the record), the unit scale, and an optional
    interval (a [low, high] pair read from the record)."""

    slug: str
    value: Callable[[CellRecord], Any]
    scale: float = 1.0
    interval: Callable[[CellRecord], Any] | None = None


MEASURES = (
    Measure(
        "latency",
        lambda r: r.latency_ms.p50 if r.latency_ms else None,
        NS_PER_MS,
        interval=lambda r: r.latency_ms.p50_ci if r.latency_ms else None,
    ),
    Measure("latency-e2e-p99", lambda r: r.latency_e2e_ms.p99 if r.latency_e2e_ms else None, NS_PER_MS),
    Measure("throughput", lambda r: r.throughput_ips),
    Measure("host-peak-rss-mib", lambda r: r.memory.host_peak_rss_mib if r.memory else None),
    Measure("map-ratio", lambda r: dig(r.accuracy, "ratio")),
)


def _number(value: Any) -> float | None:
    """A finite number, else None (a bool is not a measurement)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def metric(rec: CellRecord, m: Measure) -> dict[str, float] | None:
    """The record's BMF metric for `m`, or None where the record holds no figure for it."""
    value = _number(m.value(rec))
    if value is None:
        return None
    out = {"value": value * m.scale}
    pair = m.interval(rec) if m.interval else None
    if isinstance(pair, list | tuple) and len(pair) == 2:
        low, high = _number(pair[0]), _number(pair[1])
        if low is not None and high is not None:
            out["lower_value"] = low * m.scale
            out["upper_value"] = high * m.scale
    return out


def benchmark_name(rec: CellRecord, run: Run, several: bool) -> str:
    """The cell id; in a merged run of several machines, with the machine, so no two machines share a name."""
    return f"{rec.cell_id} @ {run.machine}" if several else str(rec.cell_id)


def to_bmf(runs: list[Run]) -> dict[str, dict[str, dict[str, float]]]:
    """BMF of `runs` (one results directory: one Run, or one per machine of a merged one). A cell recorded twice
    (an attempt run again) keeps its last record; a cell with no measured figure (skipped, failed) is left out."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    several = len(runs) > 1
    for run in runs:
        last = {str(r.cell_id): r for r in run.records if r.cell_id}
        for rec in last.values():
            measures = {m.slug: v for m in MEASURES if (v := metric(rec, m)) is not None}
            if measures:
                out[benchmark_name(rec, run, several)] = measures
    return out


def shape_errors(doc: Any) -> list[str]:
    """Where `doc` departs from the documented BMF shape (empty when it conforms): an object of benchmarks, each a
    non-empty object of measures, each an object with a number `value` and optional number `lower_value` and
    `upper_value` (nothing else), names within Bencher's length limits."""
    if not isinstance(doc, dict):
        return [f"the document is a {type(doc).__name__}, not an object of benchmarks"]
    errors = []
    for name, measures in doc.items():
        if not isinstance(name, str) or not name or len(name) > MAX_BENCHMARK:
            errors.append(f"benchmark name {name!r}: empty or longer than {MAX_BENCHMARK} characters")
        if not isinstance(measures, dict) or not measures:
            errors.append(f"{name}: not a non-empty object of measures")
            continue
        for slug, m in measures.items():
            where = f"{name}/{slug}"
            if not isinstance(slug, str) or not slug or len(slug) > MAX_MEASURE:
                errors.append(f"{where}: measure name empty or longer than {MAX_MEASURE} characters")
            if not isinstance(m, dict):
                errors.append(f"{where}: not an object")
                continue
            if "value" not in m:
                errors.append(f"{where}: no `value`")
            for key, v in m.items():
                if key not in ("value", "lower_value", "upper_value"):
                    errors.append(f"{where}: unknown key {key!r}")
                elif _number(v) is None:
                    errors.append(f"{where}.{key}: {v!r} is not a finite number")
            value = _number(m.get("value"))
            low = _number(m["lower_value"]) if "lower_value" in m else -math.inf
            high = _number(m["upper_value"]) if "upper_value" in m else math.inf
            if value is not None and low is not None and high is not None and not low <= value <= high:
                errors.append(f"{where}: value outside [lower_value, upper_value]")
    return errors
