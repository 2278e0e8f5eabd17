"""The run's remaining-time estimate on the progress line, and the timeline it leaves for the next run's estimate.

The plugin calls `start` at its first cell, then `done_*` as each part of the run ends, and `finish` last. The cells
are priced by the one estimator (harness.plan.price: earlier timelines, the history, the export cache, the nearest
measured cell, the plan's table scaled to this machine's speed) and composed into the run's parts by
harness.plan.estimate; after each part, what is left is rescaled by how the parts done so far went. The timeline
(`results/<run_id>/timeline.json`) records this run's stage times: each cell's export-phase seconds and whether its
export came from the cache, each workload's share of the timing phase and its own stages, each cell's parts (load,
timing and its floor, stages, scenarios: its workload's figures split over its cells), each lone cell, the history
import and report, and the machine's speed at the start (scripts/plan_prices.py makes the plan's table of it).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Protocol

from harness import backends
from harness import threads as thread_budget
from harness.core.cell import Cell
from harness.core.record import CellRecord
from harness.core.results_dir import read_env, write_text_atomic
from harness.execute.config import RunConfig
from harness.execute.planning import fake_cuda
from harness.execute.state import AttemptState
from harness.execute.usecase import wants_scenarios
from harness.execute.workload import workload_label
from harness.history.store import default_db_path
from harness.plan import durations, phase_answers, price
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


def run_speed(run_dir: Path) -> dict:
    """This run's machine_speed: env.json's (measured when the run started), else measured now."""
    try:
        speed = (read_env(run_dir) or {}).get("machine_speed")
    except (OSError, ValueError):
        speed = None
    if isinstance(speed, dict):
        return speed
    from harness.measure import machine_speed

    return machine_speed.measure(thread_budget.budget())


def known_for(
    results_dir: Path, cache_dir: Path | None, speed: dict | None, cells: list[Cell], *, exclude: str | None = None,
    refresh: bool = False, max_time_s: float | None = None,
) -> price.Known:  # fmt: skip
    """What prices a run's cells: the plan's table, this machine's `speed`, the timelines of earlier runs in
    `results_dir` (`exclude`: this run), its history database, the export cache (and, with `refresh`, the export
    seconds of the stale entries of `cells`)."""
    stale: dict[str, float] = {}
    if refresh and cache_dir is not None:
        for c in cells:
            export_s = ((durations.cache_entry(cache_dir, c.id) or {}).get("outcome") or {}).get("export_s")
            if isinstance(export_s, int | float):
                stale[c.id] = float(export_s)
    return price.Known(
        price.Table.read(),
        speed=speed,
        recorded=durations.read_recorded(results_dir, exclude=exclude),
        history=durations.read_history(default_db_path(results_dir)),
        cached=frozenset(durations.cached_cells(cache_dir)),
        refresh=refresh,
        entry_export_s=stale,
        max_time_s=max_time_s,
    )


class RunClock:
    """One run's estimate (what is left) and timeline (what each part took)."""

    def __init__(self, session: BenchSession, workloads: dict[str, list[Cell]], alone: list[Cell]) -> None:
        cfg = session.run_config
        self.session = session
        self.speed = run_speed(cfg.run_dir)
        timed = [c for cells in workloads.values() for c in cells]
        self.known = known_for(
            session.results_dir, session.cache_dir, self.speed, timed, exclude=session.run_id,
            refresh=cfg.refresh_cache, max_time_s=cfg.max_time_s,
        )  # fmt: skip
        self.recorded = self.known.recorded
        probes: dict[tuple[str, str], bool] = {}
        self.episodes = 1 if cfg.rounds is not None else max(1, cfg.episodes)
        #: the scenario phase's answers this run cannot measure (not priced), with why
        self.out_of_reach = phase_answers.for_this_run(cfg.camera_fps) if cfg.scenario_phase else {}
        self.estimate = est.estimate(
            workloads,
            alone,
            self.known,
            workers=cfg.export_workers,
            episodes=self.episodes,
            scenario_cells=planned_scenario_cells(cfg.scenarios, timed, cfg.scenario_phase),
            cannot_run=lambda c: cannot_run(c, probes),
            traced=lambda c: fake_cuda(c, cfg.fake_cuda),
            scenario_phase_s=cfg.scenario_budget_s if cfg.scenario_phase else None,
            phase_out_of_reach=self.out_of_reach,
        )
        self.workloads = len(workloads)
        self.pending = set(workloads)
        self.t0 = time.perf_counter()
        self.at_start_s = self.estimate.remaining_s()
        parts = self.estimate.parts

        def part_s(*keys: str) -> float:
            return round(sum(parts[k].seconds for k in keys if k in parts), 1)

        self.timeline: dict = {
            "version": est.TIMELINE_VERSION,
            "run_id": session.run_id,
            "estimate_at_start_s": round(self.at_start_s, 1),
            "estimate_at_start_parts": {
                "export_phase": part_s(est.EXPORT_PHASE),
                "timing_phase": part_s(est.TIMING_PHASE),
                "workloads": part_s(*workloads),
                "alone": part_s(*(c.id for c in alone)),
                "scenario_phase": part_s(est.SCENARIO_PHASE),
                "finish": part_s(est.FINISH),
                "cells_by_source": self.estimate.sources(),
            },
            "machine_speed": self.speed,
            "speed_factors": self.factors(),
            "prep_s": {},
            "timing_s": {},
            "workload_s": {},
            "cell_s": {},
            "alone_s": {},
        }
        self._timing_weights: dict[str, float] = {}
        self._timing_phase_s: float | None = None
        self._records: dict[str, list[CellRecord]] = {}

    def factors(self) -> dict[str, float]:
        """This machine's speed over the plan's reference (its newest run that measured one)."""
        return self.known.factors(self.known.table.reference_speed())

    # -- the progress line ----------------------------------------------------------------------------------------
    def say_start(self) -> None:
        p = self.estimate.parts
        phases = ", ".join(
            f"{name} {est.fmt_duration(p[name].seconds)}"
            for name in (est.EXPORT_PHASE, est.TIMING_PHASE, est.SCENARIO_PHASE)
            if name in p
        )
        if self.out_of_reach and est.SCENARIO_PHASE in p:
            gone = ", ".join(sorted(self.out_of_reach))
            phases += f" without {gone} ({next(iter(self.out_of_reach.values()))})"
        runs = [r for r in self.recorded.runs if r != "None"]
        src = self.estimate.sources()
        origin = ", ".join(
            f"{n} {what}"
            for what, n in (
                ("recorded by run(s) " + ", ".join(runs[:3]) if runs else "recorded", src.get("recorded", 0)),
                ("from the history", src.get("history", 0)),
                ("from the export cache", src.get("export cache", 0)),
                ("from the nearest measured cell", src.get("nearest", 0)),
                ("from the plan (prices.yaml)", src.get("plan", 0)),
            )
            if n
        )
        f = self.factors()
        speed = (
            f"this machine vs the plan's reference: python x{f['python_s']:.2f}, compute x{f['compute_s']:.2f}"
            if self.known.table.reference_speed()
            else "the plan's reference measured no speed (factor 1)"
        )
        self.session.progress(
            f"estimate: about {est.fmt_duration(self.at_start_s)} left ({self.workloads} workload(s)"
            f"{': ' + phases if phases else ''}); cells priced: {origin or 'none'}; {speed}"
        )

    def say_left(self, what: str) -> None:
        done = self.workloads - len(self.pending)
        r = self.estimate.ratio()
        rescaled = (
            f"; the rest x{r:.2f}: the parts done took {r:.2f}x their estimate"
            if abs(r - 1.0) >= 0.05
            else ""
        )
        self.session.progress(
            f"estimate: about {est.fmt_duration(self.estimate.remaining_s())} left after {what} "
            f"({done} of {self.workloads} workload(s) done, {est.fmt_duration(time.perf_counter() - self.t0)} "
            f"so far{rescaled})"
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
        self.estimate.done(est.EXPORT_PHASE, seconds)
        self.say_left("the export phase")

    def timing_phase_done(self, seconds: float) -> None:
        self._timing_phase_s = seconds
        self.timeline["timing_phase_s"] = round(seconds, 1)
        if est.TIMING_PHASE in self.estimate.parts:
            self.estimate.done(est.TIMING_PHASE, seconds)
            self.say_left("the timing phase")

    def workload_done(self, label: str, seconds: float, records: list[CellRecord]) -> None:
        self.timeline["workload_s"][label] = round(seconds, 2)
        # its share of the timing phase: its timed trials plus its runners' loads and first runs
        self._timing_weights[label] = max(
            ((r.timing or {}).get("elapsed_s") or 0.0 for r in records), default=0.0
        ) + sum((r.load_s or 0.0) + (r.first_run_ms or 0.0) / 1000.0 for r in records)
        self._records[label] = [r for r in records if r.status != "skipped" and not r.remedy_of]
        self.estimate.done(label, seconds)
        self.pending.discard(label)
        self.say_left(label)

    def alone_done(self, cell_id: str, seconds: float) -> None:
        self.timeline["alone_s"][cell_id] = round(seconds, 2)
        self.estimate.done(cell_id, seconds)

    def scenario_phase_done(self, seconds: float) -> None:
        self.timeline["scenario_phase_s"] = round(seconds, 1)
        self.estimate.done(est.SCENARIO_PHASE, seconds)
        self.say_left("the scenario phase")

    def scenario_phase_left(self) -> float | None:
        """The seconds the scenario phase was priced at, where the run has one."""
        part = self.estimate.parts.get(est.SCENARIO_PHASE)
        return part.seconds if part is not None else None

    def finish(self, finish_s: float) -> float:
        """Write the timeline (with the end's seconds); returns the run's seconds since the start estimate."""
        self.timeline["finish_s"] = round(finish_s, 2)
        if self._timing_phase_s and sum(self._timing_weights.values()) > 0:
            total = sum(self._timing_weights.values())
            self.timeline["timing_s"] = {
                label: round(self._timing_phase_s * w / total, 2) for label, w in self._timing_weights.items()
            }
        self.timeline["cell_s"] = self.cell_parts()
        wall = time.perf_counter() - self.t0
        self.timeline["wall_s"] = round(wall, 1)
        try:
            write_text_atomic(
                self.session.run_config.run_dir / est.TIMELINE, json.dumps(self.timeline, indent=1)
            )
        except OSError as e:  # the records are safe; the next estimate falls back to the plan
            log.warning("timeline not written: %s", e)
        return wall

    def cell_parts(self) -> dict[str, dict[str, float]]:
        """Each timed cell's parts: load (its load and first run), timing (its workload's share of the timing
        phase less the loads, evenly; with one episode or --rounds, its own share of the workload's elapsed timing,
        both then taken out of the workload's own seconds) and the floor
        of the run's fewest trials, stages and scenarios (its workload's own seconds, harness.plan.price.split_own
        with the start estimate's stages as the guesses)."""
        floor = durations.floor_trials(
            [{"timing": r.timing} for recs in self._records.values() for r in recs]
        )
        out: dict[str, dict[str, float]] = {}
        for label, recs in self._records.items():
            if not recs:
                continue
            load = {r.cell_id: (r.load_s or 0.0) + (r.first_run_ms or 0.0) / 1000.0 for r in recs}
            own = self.timeline["workload_s"].get(label, 0.0)
            if self.episodes > 1 and label in self.timeline["timing_s"]:
                t = max(0.0, self.timeline["timing_s"][label] - sum(load.values())) / len(recs)
                timing = dict.fromkeys(load, t)
            else:  # timed in its own test: the workload's seconds hold its loads and timing
                timing = {r.cell_id: ((r.timing or {}).get("elapsed_s") or 0.0) / len(recs) for r in recs}
                own = max(0.0, own - sum(load.values()) - sum(timing.values()))
            guesses = {
                r.cell_id: (self.estimate.prices.get(r.cell_id) or price.Price({}, "plan")).parts.get(
                    "stages", 0.0
                )
                for r in recs
            }
            split = price.split_own(
                own, guesses, [r.cell_id for r in recs if r.scenarios], self.estimate.ratio()
            )
            for r in recs:
                trials = (r.timing or {}).get("trials")
                f = min(1.0, floor / trials) if floor and isinstance(trials, int) and trials > 0 else 1.0
                out[r.cell_id] = {
                    "load": round(load[r.cell_id], 3),
                    "timing": round(timing[r.cell_id], 3),
                    "timing_floor": round(timing[r.cell_id] * f, 3),
                    **{k: round(v, 3) for k, v in split[r.cell_id].items()},
                }
        return out


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


def planned_scenario_cells(mode: str, cells: list, phase: bool) -> list[str]:
    """The cells expected to run the scenarios in their workloads, for the estimate (harness.execute.usecase.
    wants_scenarios): none under the default "decision" where the run has its scenario phase (priced as a part of
    its own), else the mode's own rule."""
    return [c.id for c in cells if not wants_scenarios(mode, c, phase)]
