"""How long a run has left: each part of the run priced from the stage times earlier runs recorded, else the plan.

A run has four kinds of parts, in this order (harness.pytest_plugin.plugin): the export phase (every timed cell
exported or found in the export cache, and probed, several at once), the timing phase (every workload loaded and
timed in episodes), then each workload's own stages (end to end, parity, scenarios, accuracy, records) and the
cells run alone (dynamic probes, excluded cells), and last the history import and the report.

Where the prices come from, per part:
- a timeline of an earlier run in the same results directory (`timeline.json`, written by the plugin at the end of
  each run: each cell's export-phase seconds and whether its export came from the cache, each workload's share of
  the timing phase and its own stages, each lone cell, the end): the newest run that priced the part wins;
- the export cache: a cell whose entry is on disk is priced as a cache hit; one that must be exported afresh is
  priced with the export time its stale entry's meta.json recorded, where there is one;
- the plan otherwise: the rough figures in PLAN below (orders of magnitude on a 2-core CPU, not measurements).

Remaining time is the sum of the parts not done yet; the estimate is not rescaled by how the run is going.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core.cell import Cell

log = logging.getLogger(__name__)

TIMELINE = "timeline.json"
TIMELINE_VERSION = 1

#: the plan's prices, seconds, for parts no run has recorded (orders of magnitude, 2-core CPU, yolo26n at 320..640)
PLAN: dict[str, Any] = {
    "export": {"executorch": 60.0, "aoti": 120.0, "torch-compile": 90.0, "tensorrt": 120.0, "default": 20.0},
    "probe": 5.0,  # the fresh process that runs a new artifact and reads its host memory
    "cached_prep": 2.0,  # a cache hit whose memory figure is cached too
    "load": 2.0,  # load, first inference and warm-up of one runner in the timing phase
    "stages": 15.0,  # one cell's own stages after timing (end to end, parity, accuracy)
    "scenarios": 60.0,  # the use-case scenarios of one scenario cell
    "alone": 30.0,  # a dynamic probe or a lone cell that runs
    "finish": 5.0,  # history import and report
}
SIZE_FACTOR = {"n": 1.0, "s": 1.5, "m": 2.5, "l": 4.0, "x": 6.0}


@dataclass
class Recorded:
    """Stage times recorded by earlier runs (newest first wins) and by the export cache."""

    prep_s: dict[str, tuple[float, bool]] = field(
        default_factory=dict
    )  # cell id -> (seconds, from the cache)
    parallelism: float | None = None  # export phase wall seconds over the sum of its cells' seconds
    timing_s: dict[str, float] = field(
        default_factory=dict
    )  # workload label -> its share of the timing phase
    workload_s: dict[str, float] = field(default_factory=dict)  # workload label -> its own stages
    alone_s: dict[str, float] = field(default_factory=dict)  # cell id -> a cell run alone
    finish_s: float | None = None
    runs: list[str] = field(default_factory=list)  # the runs read, newest first

    def add(self, timeline: dict) -> None:
        """Take the parts of an older run's timeline that no newer one priced."""
        for cid, (s, hit) in (timeline.get("prep_s") or {}).items():
            self.prep_s.setdefault(cid, (float(s), bool(hit)))
        for name in ("timing_s", "workload_s", "alone_s"):
            for key, s in (timeline.get(name) or {}).items():
                getattr(self, name).setdefault(key, float(s))
        if self.parallelism is None and timeline.get("parallelism"):
            self.parallelism = float(timeline["parallelism"])
        if self.finish_s is None and timeline.get("finish_s") is not None:
            self.finish_s = float(timeline["finish_s"])
        self.runs.append(str(timeline.get("run_id")))


def read_recorded(results_dir: Path, exclude: str | None = None, newest: int = 5) -> Recorded:
    """The timelines of the `newest` runs under `results_dir` (by the file's time), `exclude` (this run) left out;
    an unreadable timeline is skipped with a log line (an estimate never stops a run)."""
    rec = Recorded()
    found = []
    for path in Path(results_dir).glob(f"*/{TIMELINE}"):
        if path.parent.name != exclude:
            try:
                found.append((path.stat().st_mtime, path))
            except OSError:
                continue
    for _, path in sorted(found, reverse=True)[:newest]:
        try:
            timeline = json.loads(path.read_text(encoding="utf-8"))
            if timeline.get("version") == TIMELINE_VERSION:
                rec.add(timeline)
        except (OSError, ValueError, TypeError, AttributeError) as e:
            log.info("estimate: %s skipped (%s)", path, e)
    return rec


def cache_entry(cache_dir: Path, cell_id: str) -> dict | None:
    """The meta.json of the plain export-cache entry of `cell_id` (exports/<cell id>-<key12>/; entries of remedy
    options carry a suffix and are not the cell's), the newest when keys changed; None when there is none."""
    best = None
    for meta in (Path(cache_dir) / "exports").glob(f"{glob_escape(cell_id)}-*/meta.json"):
        if not re.fullmatch(re.escape(cell_id) + r"-[0-9a-f]{12}", meta.parent.name):
            continue
        try:
            mtime = meta.stat().st_mtime
            if best is None or mtime > best[0]:
                best = (mtime, json.loads(meta.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return best[1] if best else None


def glob_escape(text: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", text)


@dataclass(frozen=True)
class Part:
    """One part of the run and its price."""

    key: str
    seconds: float
    source: str  # "recorded", "cache" or "plan"


def _size(cell: Cell) -> float:
    return SIZE_FACTOR.get(cell.size, 3.0) * max(cell.shape.height * cell.shape.width / (640 * 640), 0.25)


def fresh_export_s(cell: Cell) -> float:
    """The plan's price of a fresh export and probe."""
    family = next((f for f in PLAN["export"] if f != "default" and cell.backend.startswith(f)), "default")
    return PLAN["export"][family] * _size(cell) + PLAN["probe"]


def prep_part(cell: Cell, rec: Recorded, cache_dir: Path | None, refresh: bool) -> Part:
    """A cell's price in the export phase: a cache hit or a fresh export, priced from the record where it matched
    the same case, else from the cache's meta.json, else the plan."""
    meta = cache_entry(cache_dir, cell.id) if cache_dir else None
    hit = meta is not None and not refresh
    seen = rec.prep_s.get(cell.id)
    if seen is not None and seen[1] == hit:
        return Part(cell.id, seen[0], "recorded")
    if hit:
        return Part(cell.id, PLAN["cached_prep"], "cache")
    export_s = (meta or {}).get("outcome", {}).get("export_s") if isinstance(meta, dict) else None
    if isinstance(export_s, int | float):
        return Part(cell.id, float(export_s) + PLAN["probe"], "cache")
    return Part(cell.id, fresh_export_s(cell), "plan")


@dataclass
class Estimate:
    """The run's parts and their prices; `done` removes a part, `remaining_s` sums the rest."""

    parts: dict[str, Part]
    workers: int = 1

    def done(self, key: str) -> None:
        self.parts.pop(key, None)

    def remaining_s(self) -> float:
        return sum(p.seconds for p in self.parts.values())

    def sources(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for p in self.parts.values():
            out[p.source] = out.get(p.source, 0) + 1
        return out


EXPORT_PHASE, TIMING_PHASE, FINISH = "export phase", "timing phase", "history and report"


def estimate(
    workloads: dict[str, list[Cell]],
    alone: Iterable[Cell],
    rec: Recorded,
    *,
    cache_dir: Path | None,
    workers: int,
    max_time_s: float,
    episodes: int,
    scenario_cells: Iterable[str] = (),
    refresh: bool = False,
    cannot_run: Callable[[Cell], bool] = lambda cell: False,
) -> Estimate:
    """Price a run: `workloads` (label -> its cells, timed together), the cells run `alone`. A cell that
    `cannot_run` here (its backend or device is missing) is a skip: priced at nothing unless a run recorded it."""
    parts: dict[str, Part] = {}
    skips = {c.id for cells in workloads.values() for c in cells if cannot_run(c)}
    workloads = {label: [c for c in cells if c.id not in skips] for label, cells in workloads.items()}
    timed = [c for cells in workloads.values() for c in cells]
    if timed:
        preps = [prep_part(c, rec, cache_dir, refresh) for c in timed]
        total = sum(p.seconds for p in preps)
        # the phase runs `workers` at once: the recorded ratio of its wall time to its cells' sum, else 1/workers
        share = rec.parallelism if rec.parallelism else 1.0 / max(1, workers)
        wall = max(total * share, max(p.seconds for p in preps))
        parts[EXPORT_PHASE] = Part(EXPORT_PHASE, wall, _worst(p.source for p in preps))
    scenario_cells = set(scenario_cells)
    timing = []
    for label, cells in workloads.items():
        if not cells:  # every backend of the workload is a skip here
            continue
        if episodes > 1:
            if label in rec.timing_s:
                timing.append(Part(label, rec.timing_s[label], "recorded"))
            else:
                timing.append(Part(label, len(cells) * (max_time_s + PLAN["load"]), "plan"))
        if label in rec.workload_s:
            parts[label] = Part(label, rec.workload_s[label], "recorded")
        else:
            own = sum(
                PLAN["stages"] * _size(c) + (PLAN["scenarios"] if c.id in scenario_cells else 0.0)
                for c in cells
            )
            if episodes <= 1:  # timed in its own test: the timing phase does not run
                own += len(cells) * (max_time_s + PLAN["load"])
            parts[label] = Part(label, own, "plan")
    if timing:
        parts[TIMING_PHASE] = Part(
            TIMING_PHASE, sum(p.seconds for p in timing), _worst(p.source for p in timing)
        )
    for cell in alone:
        seconds = rec.alone_s.get(cell.id)
        parts[cell.id] = (
            Part(cell.id, seconds, "recorded")
            if seconds is not None
            else Part(cell.id, PLAN["alone"] if cell.shape.dynamic else 0.1, "plan")
        )
    parts[FINISH] = (
        Part(FINISH, rec.finish_s, "recorded")
        if rec.finish_s is not None
        else Part(FINISH, PLAN["finish"], "plan")
    )
    return Estimate(parts, workers)


def _worst(sources: Iterable[str]) -> str:
    """A phase's source: "plan" if any of its cells came from the plan, else "cache" if any came from the cache."""
    sources = set(sources)
    return next((s for s in ("plan", "cache") if s in sources), "recorded")


def fmt_duration(seconds: float) -> str:
    """`1 h 05 min`, `12 min 30 s`, `45 s`."""
    s = round(max(0.0, seconds))
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    if s >= 60:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s} s"
