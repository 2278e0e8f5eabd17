"""The run's remaining-time estimate on the progress line, and the timeline it leaves for the next run's estimate.

The plugin calls `start` at its first cell, then `done_*` as each part of the run ends, and `finish` last; the
prices come from harness.plan.estimate. The timeline (`results/<run_id>/timeline.json`) records this run's stage
times: each cell's export-phase seconds and whether its export came from the cache, each workload's share of the
timing phase and its own stages, each lone cell, and the history import and report.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Protocol

from harness import backends
from harness.core.cell import Cell
from harness.core.record import CellRecord
from harness.core.results_dir import write_text_atomic
from harness.execute.config import RunConfig
from harness.execute.screen import SCREEN_KEEP
from harness.execute.state import AttemptState
from harness.execute.usecase import wants_scenarios
from harness.execute.workload import workload_label
from harness.plan import estimate as est

log = logging.getLogger(__name__)


class BenchSession(Protocol):
    """What the estimate reads of the plugin's session (harness.pytest_plugin.plugin.BenchSession, which calls
    this module: described here rather than imported, so that the two do not import each other)."""

    run_config: RunConfig
    results_dir: Path
    cache_dir: Path
    run_id: str

    def progress(self, msg: str) -> None: ...


class RunClock:
    """One run's estimate (what is left) and timeline (what each part took)."""

    def __init__(self, session: BenchSession, workloads: dict[str, list[Cell]], alone: list[Cell]) -> None:
        cfg = session.run_config
        self.session = session
        self.recorded = est.read_recorded(session.results_dir, exclude=session.run_id)
        probes: dict[tuple[str, str], bool] = {}
        self.estimate = est.estimate(
            workloads,
            alone,
            self.recorded,
            cache_dir=session.cache_dir,
            workers=cfg.export_workers,
            max_time_s=cfg.max_time_s,
            episodes=1 if cfg.rounds is not None else max(1, cfg.episodes),
            scenario_cells=planned_scenario_cells(
                cfg.scenarios,
                [c for cells in workloads.values() for c in cells],
                lambda c: cannot_run(c, probes),
            ),
            refresh=cfg.refresh_cache,
            cannot_run=lambda c: cannot_run(c, probes),
        )
        self.workloads = len(workloads)
        self.pending = set(workloads)
        self.t0 = time.perf_counter()
        self.at_start_s = self.estimate.remaining_s()
        self.timeline: dict = {
            "version": est.TIMELINE_VERSION,
            "run_id": session.run_id,
            "estimate_at_start_s": round(self.at_start_s, 1),
            "prep_s": {},
            "timing_s": {},
            "workload_s": {},
            "alone_s": {},
        }
        self._timing_weights: dict[str, float] = {}
        self._timing_phase_s: float | None = None

    # -- the progress line ----------------------------------------------------------------------------------------
    def say_start(self) -> None:
        p = self.estimate.parts
        phases = ", ".join(
            f"{name} {est.fmt_duration(p[name].seconds)}"
            for name in (est.EXPORT_PHASE, est.TIMING_PHASE)
            if name in p
        )
        runs = [r for r in self.recorded.runs if r != "None"]
        src = self.estimate.sources()
        origin = "; ".join(
            f"{n} part(s) {what}"
            for what, n in (
                ("recorded by run(s) " + ", ".join(runs[:3]) if runs else "recorded", src.get("recorded", 0)),
                ("priced from the export cache", src.get("cache", 0)),
                ("priced from the plan (no recorded time)", src.get("plan", 0)),
            )
            if n
        )
        self.session.progress(
            f"estimate: about {est.fmt_duration(self.at_start_s)} left ({self.workloads} workload(s)"
            f"{': ' + phases if phases else ''}); {origin}"
        )

    def say_left(self, what: str) -> None:
        done = self.workloads - len(self.pending)
        self.session.progress(
            f"estimate: about {est.fmt_duration(self.estimate.remaining_s())} left after {what} "
            f"({done} of {self.workloads} workload(s) done, {est.fmt_duration(time.perf_counter() - self.t0)} so far)"
        )

    # -- parts done -----------------------------------------------------------------------------------------------
    def export_phase_done(self, seconds: float, prepared: dict[str, AttemptState]) -> None:
        """`prepared`: the runner's attempts after the export phase (cell id -> state with its export phase's
        seconds, `prep_s`, and its record's `cache_hit`)."""
        prep = {cid: (round(s.prep_s, 2), bool(s.rec.cache_hit)) for cid, s in prepared.items()}
        self.timeline["prep_s"] = prep
        total = sum(v[0] for v in prep.values())
        if total > 0:
            self.timeline["parallelism"] = round(seconds / total, 4)
        self.timeline["export_phase_s"] = round(seconds, 1)
        self.estimate.done(est.EXPORT_PHASE)
        self.say_left("the export phase")

    def timing_phase_done(self, seconds: float) -> None:
        self._timing_phase_s = seconds
        self.timeline["timing_phase_s"] = round(seconds, 1)
        if est.TIMING_PHASE in self.estimate.parts:
            self.estimate.done(est.TIMING_PHASE)
            self.say_left("the timing phase")

    def workload_done(self, label: str, seconds: float, records: list[CellRecord]) -> None:
        self.timeline["workload_s"][label] = round(seconds, 2)
        # its share of the timing phase: its timed trials plus its runners' loads and first runs
        self._timing_weights[label] = max(
            ((r.timing or {}).get("elapsed_s") or 0.0 for r in records), default=0.0
        ) + sum((r.load_s or 0.0) + (r.first_run_ms or 0.0) / 1000.0 for r in records)
        self.estimate.done(label)
        self.pending.discard(label)
        self.say_left(label)

    def alone_done(self, cell_id: str, seconds: float) -> None:
        self.timeline["alone_s"][cell_id] = round(seconds, 2)
        self.estimate.done(cell_id)

    def finish(self, finish_s: float) -> float:
        """Write the timeline (with the end's seconds); returns the run's seconds since the start estimate."""
        self.timeline["finish_s"] = round(finish_s, 2)
        if self._timing_phase_s and sum(self._timing_weights.values()) > 0:
            total = sum(self._timing_weights.values())
            self.timeline["timing_s"] = {
                label: round(self._timing_phase_s * w / total, 2) for label, w in self._timing_weights.items()
            }
        wall = time.perf_counter() - self.t0
        self.timeline["wall_s"] = round(wall, 1)
        try:
            write_text_atomic(
                self.session.run_config.run_dir / est.TIMELINE, json.dumps(self.timeline, indent=1)
            )
        except OSError as e:  # the records are safe; the next estimate falls back to the plan
            log.warning("timeline not written: %s", e)
        return wall


def cannot_run(cell: Cell, probes: dict[tuple[str, str], bool]) -> bool:
    """Whether `cell` is a skip here: its backend has no such device, or its runtime or device is missing."""
    key = (cell.backend, cell.device)
    if key not in probes:
        try:
            b = backends.get(cell.backend)
            probes[key] = b.probe(cell.device) is not None
        except Exception:  # an unknown or broken backend is the cell's skip reason later
            probes[key] = True
    if probes[key]:
        return True
    try:
        return backends.get(cell.backend).unsupported(cell) is not None
    except Exception:
        return True


def plan_of(session: BenchSession, timed: list[Cell], alone: list[Cell]) -> RunClock:
    """The clock of a run of `timed` cells (in workloads) and `alone` cells."""
    workloads: dict[str, list[Cell]] = {}
    for c in timed:
        workloads.setdefault(workload_label(c), []).append(c)
    return RunClock(session, workloads, alone)


def planned_scenario_cells(mode: str, cells: list, cannot_run) -> list[str]:
    """The cells expected to run the scenarios, for the estimate: under the default "screen" the screen picks them
    after the timing phase, so the estimate takes the SCREEN_KEEP that can run here with the fewest pixels per image
    (the fastest, as the screen's would be); otherwise the mode's own rule."""
    if mode == "screen":
        runnable = [c for c in cells if not c.shape.dynamic and not cannot_run(c)]
        runnable.sort(key=lambda c: (c.shape.height * c.shape.width / max(1, c.batch), "nsmlx".index(c.size)))
        return [c.id for c in runnable[:SCREEN_KEEP]]
    return [c.id for c in cells if not wants_scenarios(mode, c)]
