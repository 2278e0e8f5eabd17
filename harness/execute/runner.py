"""The entry point of a run's execution: `CellRunner` opens the run's services once (harness.execute.services) and
drives the cells through them, alone (harness.execute.attempt) or a workload at a time (harness.execute.workload).

It is a thin front for the pytest plugin, the tests and the benchmarks; the stages never see it, only the
collaborators each one names (harness.execute.stages.pipeline).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from harness import backends
from harness.core.cell import Cell
from harness.core.record import FAILED_STATUSES, CellRecord
from harness.core.results_dir import RecordWriter
from harness.decide.picks import Constraints
from harness.diagnosis.outcome import ExportOutcome
from harness.execute import attempt, scenario_phase, workload
from harness.execute.config import RunConfig
from harness.execute.exporting import export_artifact
from harness.execute.measuring import canary_reason
from harness.execute.memory_cache import MemoryCache
from harness.execute.recording import finish
from harness.execute.scenario_phase import PhaseLog
from harness.execute.services import DATASET_DIR_ENV, RunServices, RunState, open_run
from harness.execute.stages import Pipeline, pipeline
from harness.execute.state import Attempt, AttemptState
from harness.measure.canary import Canary
from harness.measure.parity import References
from harness.measure.timing import loop_timer, slowdown_factors
from harness.yolo.models import Materialized

log = logging.getLogger(__name__)

__all__ = ["DATASET_DIR_ENV", "Attempt", "CellRunner", "RunConfig", "loop_timer", "slowdown_factors"]


class CellRunner:
    """Runs cells and writes their records, through the run's services (`services`) and bookkeeping (`run`)."""

    def __init__(self, config: RunConfig, progress: Callable[[str], None] | None = None) -> None:
        self.services: RunServices = open_run(config, progress)
        self.run = RunState()
        self.stages: Pipeline = pipeline(self.services, self.run)

    # -- the cells ----------------------------------------------------------------------------------------------
    def run_cell(self, cell: Cell, skip_reason: str | None = None) -> CellRecord:
        """Run `cell` alone (and its remedies or shape sweep); return the cell's own record."""
        return self.run_cell_all(cell, skip_reason)[0]

    def run_cell_all(self, cell: Cell, skip_reason: str | None = None) -> list[CellRecord]:
        """Every record `cell` produces, timed alone: its own first, then remedy attempts and dynamic sweep shapes.
        (A workload's cells are timed together by `run_workload`.)"""
        return attempt.run_cell_all(cell, skip_reason, self.services, self.run, self.stages)

    def run_workload(self, cells: list[Cell]) -> dict[str, list[CellRecord]]:
        """The cells of one workload timed together, interleaved (harness.execute.workload): cell id -> its
        records (its own first, then its remedy attempts)."""
        return workload.run_workload(cells, self.services, self.run, self.stages)

    def prepare(self, cells: list[Cell]) -> None:
        """The export phase: export and probe `cells` ahead of timing, `config.export_workers` at once; their
        attempts go on from there when their workload is timed (harness.execute.workload)."""
        self.run.prepared.update(
            workload.prepare_all(cells, self.config.export_workers, self.services, self.stages)
        )
        if self.run.stop_reason:  # a full disk: record the cells whose export failed on it, then stop
            for cell_id, s in list(self.run.prepared.items()):
                if s.rec.status in FAILED_STATUSES:
                    finish(self.run.prepared.pop(cell_id), self.services.writer)
            self.run.check_stop()

    def time_all(self, cells: list[Cell]) -> None:
        """The timing phase: every workload of `cells` loaded and timed interleaved, spread over
        `config.episodes` episodes (harness.execute.workload.time_all); each goes on in `run_workload`."""
        episodes = 1 if self.config.rounds is not None else max(1, self.config.episodes)
        if episodes > 1:
            workload.time_all(cells, episodes, self.services, self.run, self.stages)

    def measure_decision(self, cons: Constraints, budget_s: float) -> PhaseLog:
        """The scenario phase: decide on the run's records, measure what the answers lack, decide again, within
        `budget_s` seconds (harness.execute.scenario_phase)."""
        return scenario_phase.run_phase(self.services, self.stages, cons, budget_s)

    def preload(self, cells: list[Cell]) -> None:
        """Import the runtimes of every planned backend up front (their probes do), so that no cell's memory
        figures include another backend's library import, whatever order the cells run in."""
        for name, device in sorted({(c.backend, c.device) for c in cells}):
            try:
                backends.get(name).probe(device)
            except Exception as e:  # an unusable backend is the cell's skip reason later, not an error here
                log.debug("preload of %s/%s: %s", name, device, e)

    # -- what callers read or use of the run's services ---------------------------------------------------------
    @property
    def config(self) -> RunConfig:
        return self.services.config

    @property
    def writer(self) -> RecordWriter:
        return self.services.writer

    @property
    def canary(self) -> Canary | None:
        return self.services.canary

    @property
    def references(self) -> References:
        return self.services.references

    @property
    def memory_cache(self) -> MemoryCache:
        return self.services.memory_cache

    @memory_cache.setter
    def memory_cache(self, cache: MemoryCache) -> None:
        """Use another memory cache from now on (a test measures afresh): the stages are bound to it anew."""
        self.services = replace(self.services, memory_cache=cache)
        self.stages = pipeline(self.services, self.run)

    @property
    def prepared(self) -> dict[str, AttemptState]:
        return self.run.prepared

    @property
    def timed_workloads(self) -> dict[str, tuple[list[AttemptState], list[AttemptState]]]:
        return self.run.timed_workloads

    @property
    def last_runner(self):
        """The last loaded runtime (benchmarks time it with a bare loop beside the harness)."""
        return self.run.last_runner

    def canary_reason(self) -> str:
        """Why a record has no canary readings."""
        return canary_reason(self.services.canary)

    def materialize(self, cell: Cell) -> Materialized:
        """The checkpoint of the cell's model, built once per run."""
        return self.services.checkpoints.materialize(cell)

    def export(
        self,
        backend,
        cell: Cell,
        mat: Materialized,
        log_path: Path,
        options: dict,
        replace_digest: str | None = None,
    ) -> ExportOutcome:
        """The export of `cell` with `options`, from the cache or made now (harness.execute.exporting)."""
        s = self.services
        return export_artifact(
            backend,
            cell,
            mat,
            log_path,
            options,
            cache=s.cache,
            config=s.config,
            run=self.run,
            data=s.data,
            progress=s.progress,
            replace_digest=replace_digest,
        )
