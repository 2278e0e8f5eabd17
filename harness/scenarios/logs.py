"""LoadGen's own log files, read back: the verdict and figures of `mlperf_log_detail.txt` (its `:::MLLOG` JSON
lines, the same keys MLPerf's submission checker reads) and each sample's latency from `mlperf_log_trace.json`.

The summary (`mlperf_log_summary.txt`) is kept as LoadGen wrote it, for people; the record's figures come from the
detail log's keys, so nothing here parses prose except the early-stopping sentence LoadGen only writes as text.
"""

from __future__ import annotations

import gzip
import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

DETAIL = "mlperf_log_detail.txt"
SUMMARY = "mlperf_log_summary.txt"
TRACE = "mlperf_log_trace.json"
#: written into a run's directory when its test was cut (a signal): LoadGen ended it early, its logs are no result
INCOMPLETE = "incomplete.json"
MLLOG = ":::MLLOG "
#: `result_90.00_percentile_latency_ns`, `result_99.00_percentile_per_query_latency_ns`
PERCENTILE_KEY = re.compile(r"^result_(\d+\.\d+)_percentile(_per_query)?_latency_ns$")
#: the early-stopping estimate of a percentile in LoadGen's early_stopping_result text
ESTIMATE = re.compile(r"Early stopping (\d+(?:\.\d+)?)th percentile estimate: (\d+)")


class LoadgenLogError(RuntimeError):
    """A LoadGen run left no readable detail log (the run did not finish)."""


def read_detail(path: Path) -> dict:
    """Every `:::MLLOG` key of a detail log -> its value (the last one where a key repeats)."""
    out: dict = {}
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        raise LoadgenLogError(f"no LoadGen detail log at {path}: {e}") from None
    for line in text.splitlines():
        if not line.startswith(MLLOG):
            continue
        try:
            entry = json.loads(line[len(MLLOG) :])
        except json.JSONDecodeError:
            continue  # a line cut by a crash: the keys before it still stand
        out[entry.get("key")] = entry.get("value")
    if "result_validity" not in out:
        raise LoadgenLogError(f"{path} has no result_validity: the LoadGen run did not finish")
    return out


def sample_latencies_ns(path: Path) -> list[tuple[int, int, int]]:
    """(query_seq, start_ns, latency_ns) of every sample in a trace (plain or gzipped), LoadGen's clock: the
    sample's begin event (`ts`, from the test's start) and its latency (`complete_ns`, from its issue)."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt") as f:
            text = f.read()
    except OSError as e:
        log.warning("no LoadGen trace at %s: %s", path, e)
        return []
    out = []
    # one event per line; a "Sample" begin event carries the sample's issue and completion times
    for line in text.splitlines():
        if '"name":"Sample"' not in line or '"ph":"b"' not in line:
            continue
        try:
            event = json.loads(line.rstrip().rstrip(","))
            args = event["args"]
            latency = int(args["complete_ns"]) - int(args["issue_start_ns"])
            out.append((int(args["query_seq"]), round(float(event["ts"]) * 1e3), latency))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            continue
    return out


@dataclass
class LoadgenRun:
    """One LoadGen run as its logs tell it."""

    scenario: str
    directory: Path
    detail: dict
    #: (query_seq, start_ns, latency_ns) per sample, LoadGen's clock
    samples: list[tuple[int, int, int]] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return self.detail.get("result_validity") == "VALID"

    @property
    def early_stopping_met(self) -> bool | None:
        v = self.detail.get("early_stopping_met")
        return v if isinstance(v, bool) else None

    def reason(self) -> str | None:
        """Why LoadGen called the run INVALID, in its words (None when VALID)."""
        if self.valid:
            return None
        parts = []
        if self.detail.get("result_perf_constraints_met") is False:
            parts.append("latency constraint not met")
        if self.detail.get("result_min_duration_met") is False:
            parts.append("min duration not met")
        if self.detail.get("result_min_queries_met") is False:
            parts.append("min queries not met")
        if self.early_stopping_met is False:
            parts.append("early stopping not met")
        said = " ".join(str(self.detail.get("result_invalid_reason") or "").split())
        es = self.early_stopping_text()
        text = "LoadGen: INVALID (" + ", ".join(parts or ["no reason logged"]) + ")"
        if said:
            text += f"; {said}"
        if self.early_stopping_met is False and es:
            text += f"; early stopping: {es}"
        return text

    def early_stopping_text(self) -> str:
        return " ".join(str(self.detail.get("early_stopping_result") or "").replace("*", " ").split())

    def percentiles_ms(self, per_query: bool = False) -> dict[str, float]:
        """LoadGen's latency percentiles (ms), keyed `p50`, `p90`, `p95`, `p97`, `p99`, `p99.9`: of each sample, or
        of each query (`per_query`: MultiStream's query latency, the slowest sample of the query)."""
        out = {}
        for key, value in self.detail.items():
            m = PERCENTILE_KEY.match(str(key))
            if not m or bool(m.group(2)) != per_query or not isinstance(value, int | float):
                continue
            out[f"p{float(m.group(1)):g}"] = value / 1e6
        return out

    def early_stopping_ms(self) -> dict[str, float]:
        """The percentiles early stopping guarantees at 99% confidence (ms): `p90` -> its estimate."""
        return {f"p{float(p):g}": int(ns) / 1e6 for p, ns in ESTIMATE.findall(self.early_stopping_text())}

    def number(self, key: str) -> float | None:
        v = self.detail.get(key)
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

    def latencies_ms(self) -> list[float]:
        """Each sample's latency (ms, LoadGen's clock: from its issue, or its scheduled arrival, to completion)."""
        return [lat / 1e6 for _, _, lat in self.samples]

    def query_latencies_ms(self) -> list[float]:
        """Each query's latency (ms): its slowest sample (the samples of a query are issued together)."""
        by: dict[int, int] = {}
        for q, _, lat in self.samples:
            by[q] = max(by.get(q, 0), lat)
        return [lat / 1e6 for lat in by.values()]

    def completions_s(self) -> list[float]:
        """Each sample's completion (s from the test's start), sorted."""
        return sorted((start + lat) / 1e9 for _, start, lat in self.samples)

    def duration_s(self) -> float | None:
        """From the first sample's issue to the last sample's completion (s)."""
        if not self.samples:
            return None
        return self.completions_s()[-1] - min(start for _, start, _ in self.samples) / 1e9


def mark_incomplete(directory: Path, reason: str, **details) -> Path:
    """Mark `directory`'s LoadGen run as cut (`reason`: "interrupted by SIGINT"): its logs may read whole, even
    VALID, but the test did not run its course."""
    path = directory / INCOMPLETE
    path.write_text(json.dumps({"reason": reason, **details}) + "\n")
    return path


def incomplete(directory: Path) -> str | None:
    """Why `directory`'s LoadGen run is no result (its `incomplete.json`), or None."""
    path = directory / INCOMPLETE
    if not path.exists():
        return None
    try:
        return str(json.loads(path.read_text()).get("reason") or "marked incomplete")
    except (OSError, ValueError, AttributeError):
        return "marked incomplete"


def read_run(scenario: str, directory: Path) -> LoadgenRun:
    """The run LoadGen logged in `directory`; LoadgenLogError where it is marked incomplete."""
    cut = incomplete(directory)
    if cut is not None:
        raise LoadgenLogError(f"the LoadGen run in {directory} is incomplete ({cut}): not a result")
    trace = directory / TRACE
    if not trace.is_file() and (directory / (TRACE + ".gz")).is_file():
        trace = directory / (TRACE + ".gz")
    return LoadgenRun(scenario, directory, read_detail(directory / DETAIL), sample_latencies_ns(trace))


def compress_trace(directory: Path) -> None:
    """Gzip the trace (a JSON event per sample; MBs at MLPerf's durations) once it has been read."""
    trace = directory / TRACE
    if not trace.is_file():
        return
    with open(trace, "rb") as src, gzip.open(str(trace) + ".gz", "wb") as dst:
        dst.write(src.read())
    trace.unlink()
