"""Run one cell end to end and write its records: the attempt's stages (harness.execute.stages), the remedy ladder
for failures (harness.execute.ladder), and the shape sweep of a dynamic artifact.

Every attempt writes exactly one record as soon as it finishes, whatever failed, so a crash in one cell never loses
the records of the others. `CellRunner` also holds the run-wide services the stages use: the export cache, the
checkpoints, the PyTorch references and the progress line.
"""

from __future__ import annotations

import inspect
import logging
import os
import shutil
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from filelock import Timeout

from harness import backends
from harness.backends._shared import calibration
from harness.backends.base import ExportRequest
from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.null_reasons import fill_null_reasons
from harness.core.record import FAILED_STATUSES, new_record, set_null
from harness.core.threads import set_budget
from harness.diagnosis.failure import failure_from_exception, first_line
from harness.execute.config import RunConfig
from harness.execute.export_cache import (
    CacheFullError,
    ExportCache,
    Lookup,
    cache_key,
    disk_full,
    export_limits,
    not_replayable,
)
from harness.execute.isolate import ExportOutcome, run_export
from harness.execute.ladder import climb
from harness.execute.memory_cache import MemoryCache
from harness.execute.stages import Attempt, AttemptState, export, plan, run_stages
from harness.measure.canary import Canary
from harness.measure.parity import References
from harness.measure.timing import loop_timer, slowdown_factors
from harness.yolo.dynamic import DEFAULT_RANGE
from harness.yolo.models import Materialized, ModelSource, materialize

log = logging.getLogger(__name__)

#: where the generated evaluation dataset lives (default CACHE_DIR/dataset-eval); tests share one per session
DATASET_DIR_ENV = "YOLO26_BENCH_DATASET_DIR"

__all__ = ["Attempt", "CellRunner", "RunConfig", "loop_timer", "slowdown_factors"]

#: seconds to wait for an export cache entry's lock beyond the export timeout of the process holding it
LOCK_MARGIN_S = 300.0


class CellRunner:
    """Runs cells and writes their records; holds the per-run services (checkpoints, references, export cache)."""

    def __init__(self, config: RunConfig, progress: Callable[[str], None] | None = None) -> None:
        self.config = config
        say = progress or (lambda msg: log.info("%s", msg))
        lock = threading.Lock()

        def progress_line(msg: str) -> None:  # the export phase reports from several threads
            with lock:
                say(msg)

        self.progress = progress_line
        self.canary = Canary(config.threads) if config.canary else None
        set_budget(
            config.threads
        )  # every runtime of this process and its export/probe children get the budget
        config.run_dir.mkdir(parents=True, exist_ok=True)
        (config.run_dir / "logs").mkdir(exist_ok=True)
        from harness.core.results_dir import RecordWriter

        self.writer = RecordWriter(config.run_dir, notify=self.progress)
        self.cache = ExportCache(config.cache_dir)
        self.memory_cache = MemoryCache(config.cache_dir)
        self._refreshed: set[str] = set()  # entries --refresh-cache has exported again in this run
        self.references = References()
        self._materialized: dict[tuple, Materialized] = {}
        self._materialize_lock = threading.Lock()
        self._dataset: Path | None = None
        self._dataset_lock = threading.Lock()
        self._split = None  # the val images accuracy scores on (harness.accuracy.evaluate.Split), loaded once
        #: PyTorch fp32 mAP per (weights, head, shape, dataset, images): what every cell's accuracy is a ratio to
        self.accuracy_refs: dict[tuple, dict] = {}
        self._model_locks: dict[tuple, threading.Lock] = {}
        self.slowdown = slowdown_factors()
        self.last_runner = None  # kept for side-by-side benchmarks of the harness against a bare loop
        self.prepared: dict[str, AttemptState] = {}  # attempts the export phase took up to their load
        #: workloads the timing phase loaded and timed: label -> (their attempts, the ready ones)
        self.timed_workloads: dict[str, tuple[list[AttemptState], list[AttemptState]]] = {}
        #: the timing phase's screen for the scenarios (harness.execute.screen): cell id -> None (kept) or why not
        self.scenario_screen: dict[str, str | None] | None = None
        #: why the run must stop after the records in hand are written (an export met a full disk)
        self.stop_reason: str | None = None

    # -- public -------------------------------------------------------------------------------------------------
    def run_cell(self, cell: Cell, skip_reason: str | None = None) -> dict:
        """Run `cell` alone (and its remedies or shape sweep); return the cell's own record."""
        return self.run_cell_all(cell, skip_reason)[0]

    def run_cell_all(self, cell: Cell, skip_reason: str | None = None) -> list[dict]:
        """Every record `cell` produces, timed alone: its own first, then remedy attempts and dynamic sweep shapes.
        (A workload's cells are timed together by `run_workload`.)"""
        if cell.shape.dynamic and not skip_reason:
            return self.dynamic(cell)
        rec = self.attempt(Attempt(cell, cell.id, skip_reason=skip_reason))
        return [rec, *self.remedies(cell, rec)]

    def run_workload(self, cells: list[Cell]) -> dict[str, list[dict]]:
        """The cells of one workload timed together, interleaved (harness.execute.workload): cell id -> its
        records (its own first, then its remedy attempts)."""
        from harness.execute.workload import run_workload

        return run_workload(self, cells)

    def prepare(self, cells: list[Cell]) -> None:
        """The export phase: export and probe `cells` ahead of timing, `config.export_workers` at once; their
        attempts go on from there when their workload is timed (harness.execute.workload)."""
        from harness.execute.workload import prepare_all

        self.prepared.update(prepare_all(self, cells, self.config.export_workers))
        if self.stop_reason:  # a full disk: record the cells whose export failed on it, then stop
            for cell_id, s in list(self.prepared.items()):
                if s.rec.get("status") in FAILED_STATUSES:
                    self.finish(self.prepared.pop(cell_id))
            self.check_stop()

    def check_stop(self) -> None:
        """Raise CacheFullError when an export met a full disk: the run stops (its records so far are written)."""
        if self.stop_reason:
            raise CacheFullError(self.stop_reason)

    def time_all(self, cells: list[Cell]) -> None:
        """The timing phase: every workload of `cells` loaded and timed interleaved, spread over
        `config.episodes` episodes (harness.execute.workload.time_all); each goes on in `run_workload`."""
        from harness.execute.workload import time_all

        episodes = 1 if self.config.rounds is not None else max(1, self.config.episodes)
        if episodes > 1:
            time_all(self, cells, episodes)

    def remedies(self, cell: Cell, rec: dict) -> list[dict]:
        """The remedy attempts of a cell whose attempt failed (harness.execute.ladder), each timed alone."""
        if rec["status"] not in FAILED_STATUSES or not self.config.remedies or self.stop_reason:
            return []

        def try_remedy(a: Attempt) -> tuple[list[dict], bool]:
            r = self.attempt(a)
            self.progress(f"{rec['cell_id']}: remedy {r['remedy']}: {r['status']}")
            return [r], r["status"] == "ok"

        return climb(cell, rec, try_remedy)

    def read_canary(self, label: str) -> float | None:
        """The drift canary timed now (ms), or None when the run has none."""
        return self.canary.read(label) if self.canary is not None else None

    def canary_reason(self) -> str:
        """Why a record has no canary readings."""
        if self.canary is None:
            return "the drift canary was switched off for this run"
        return self.canary.reason or "no canary reading was taken around this attempt"

    def preload(self, cells: list[Cell]) -> None:
        """Import the runtimes of every planned backend up front (their probes do), so that no cell's memory
        figures include another backend's library import, whatever order the cells run in."""
        for name, device in sorted({(c.backend, c.device) for c in cells}):
            try:
                backends.get(name).probe(device)
            except Exception as e:  # an unusable backend is the cell's skip reason later, not an error here
                log.debug("preload of %s/%s: %s", name, device, e)

    # -- one attempt --------------------------------------------------------------------------------------------
    def attempt(self, a: Attempt) -> dict:
        """Run the stages of one attempt and write its record."""
        s = self.state(a)
        try:
            run_stages(self, s)
        except Exception as e:  # a harness bug in one cell must not lose the run
            self.crashed(s, e)
        rec = self.finish(s)
        self.check_stop()
        return rec

    def state(self, a: Attempt) -> AttemptState:
        rec = new_record(self.config.run_id, a.cell, weights="unknown")
        rec.update(cell_id=a.cell_id, remedy=a.remedy, remedy_of=a.remedy_of)
        rec["started_at"] = datetime.now(UTC).isoformat(timespec="seconds")
        rec["_t0"] = time.perf_counter()
        return AttemptState(a, rec, self.config.run_dir / "logs" / f"{a.cell_id}.log")

    def crashed(self, s: AttemptState, e: Exception) -> None:
        log.exception("cell %s crashed in the harness", s.attempt.cell_id)
        try:
            with open(s.log_path, "a") as f:
                f.write(traceback.format_exc())
        except OSError:  # a full disk: the record still gets written (or its write stops the run)
            log.warning("could not write the traceback to %s", s.log_path)
        s.rec.update(
            status="crashed", reason=f"harness error: {type(e).__name__}: {e}", log=self.rel(s.log_path)
        )
        s.rec["failure"] = failure_from_exception(e, "harness", s.rec["log"])

    def finish(self, s: AttemptState) -> dict:
        rec = s.rec
        rec.pop("_prep_s", None)
        rec["duration_s"] = round(time.perf_counter() - rec.pop("_t0"), 3)
        fill_null_reasons(rec)
        self.writer.write(rec)
        return rec

    # -- services the stages use ----------------------------------------------------------------------------------
    def rel(self, path: Path) -> str:
        return str(Path(path).relative_to(self.config.run_dir))

    def unrunnable(self, cell: Cell) -> str | None:
        """Why `cell` cannot run here (unknown backend, device, precision, missing runtime), or None."""
        try:
            backend = backends.get(cell.backend)
        except KeyError as e:
            return str(e)
        return backend.unsupported(cell) or backend.probe(cell.device)

    def materialize(self, cell: Cell) -> Materialized:
        """The checkpoint of the cell's model, built once per run (the export phase's threads ask at once: one
        builds it, the others wait for it)."""
        key = (cell.size, cell.task)
        with self._materialize_lock:
            lock = self._model_locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._materialized:
                src = ModelSource(
                    cell.size, cell.task, self.config.weights_dir, self.config.seed, self.config.standin
                )
                self._materialized[key] = materialize(src, self.config.cache_dir)
        return self._materialized[key]

    def dataset_yaml(self) -> Path:
        """The dataset of accuracy and int8 calibration: --data, else the generated one (its val and calib splits)
        in $YOLO26_BENCH_DATASET_DIR or CACHE_DIR/dataset-eval, generated on first use."""
        with self._dataset_lock:
            if self._dataset is None:
                from harness.yolo import dataset as ds

                if self.config.data:
                    self._dataset = Path(self.config.data).resolve()
                else:  # val and calib only: each image has its own seed, so they are the training set's own
                    root = os.environ.get(DATASET_DIR_ENV) or Path(self.config.cache_dir) / "dataset-eval"
                    self._dataset = ds.generate(Path(root), train=1)
        return self._dataset

    def accuracy_split(self, cell: Cell):
        """The val images `cell`'s accuracy is scored on: the first `accuracy_images` by name, fewer above 640x640
        pixels (harness.accuracy.per_cell.images_for), the same for every cell of one shape."""
        from harness.accuracy.per_cell import images_for

        if self._split is None:
            from harness.accuracy.evaluate import load_split

            self._split = load_split(self.dataset_yaml(), "val", limit=self.config.accuracy_images)
        n = images_for(self.config.accuracy_images, cell.shape.height, cell.shape.width)
        return self._split.first(n)

    def reference(
        self, mat: Materialized, cell: Cell, height: int, width: int, options: dict
    ) -> list[np.ndarray]:
        return self.references.get(mat, cell, height, width, options)

    def slowdown_factor(self, cell: Cell) -> float:
        return self.slowdown.get(cell.backend, 1.0)

    def release_previous(self) -> None:
        """Drop the previous cell's runtime before the next one loads (its memory must not count there)."""
        self.last_runner = None

    def export(
        self,
        backend,
        cell: Cell,
        mat: Materialized,
        log_path: Path,
        options: dict,
        replace_digest: str | None = None,
    ) -> ExportOutcome:
        """The export of `cell` with `options`: from the cache, or made now in an isolated process and cached.

        The entry's lock is held throughout, so a run sharing the cache waits for an export in progress and then
        finds it. `replace_digest` names the content of a cached artifact that failed to load: the entry is exported
        again, unless it now holds other content (another run replaced it) or content whose fresh export is known
        to fail the same way (harness.execute.stages.retry_fresh_export).
        """
        fields = {
            "backend": cell.backend,
            "device": cell.device,
            "weights_sha256": mat.sha256,
            "task": cell.task,
            "head": cell.head,
            "shape": cell.shape.label,
            "batch": cell.batch,
            "precision": cell.precision,
            "options": options,
        }
        if cell.precision == "int8":  # another calibration set is another artifact
            fields["calibration"] = calibration.identity(self.dataset_yaml())
        key = cache_key(fields, backend.library, inspect.getsourcefile(type(backend)))
        suffix = "".join(f"-{k}" for k in sorted(options) if k != "dynamic_range")
        entry = self.cache.entry_dir(f"{cell.id}{suffix}", key)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        # Another process's export of this entry ends within its export timeout; wait that long and a margin.
        wait_s = self.config.export_timeout_s + LOCK_MARGIN_S

        def waiting() -> None:
            self.progress(f"{cell.id}: waiting for another process's export of {entry.name} ...")

        try:
            with self.cache.locked(entry, wait_s, on_wait=waiting):
                return self._export_locked(backend, cell, mat, log_path, options, entry, replace_digest)
        except Timeout:
            msg = f"waited {wait_s:.0f} s for another process's export of {entry.name}; gave up"
            with open(log_path, "a") as f:
                f.write(f"=== {msg}\n")
            self.progress(f"{cell.id}: {msg}")
            return ExportOutcome("timeout", None, message=msg, wall_s=wait_s, log=str(log_path))

    def _export_locked(
        self,
        backend,
        cell: Cell,
        mat: Materialized,
        log_path: Path,
        options: dict,
        entry: Path,
        replace_digest: str | None,
    ) -> ExportOutcome:
        """`export` with the entry's lock held: look up, or export into a staging directory and store."""
        limits = export_limits(self.config.export_memory_gb)
        if self.config.refresh_cache and entry.name not in self._refreshed:
            found = Lookup()  # --refresh-cache: every entry this run uses is exported again, once
            self._refreshed.add(entry.name)
        else:
            found = self.cache.lookup(entry, limits)
        hit = found.outcome
        # Re-export an artifact that failed to load from the cache, unless the entry now holds other content
        # (another run replaced it) or a fresh export of this very content failed too (the failure is genuine).
        if (
            hit is not None
            and replace_digest is not None
            and hit.content_sha256 == replace_digest
            and hit.fresh_failure is None
        ):
            found = Lookup(miss="an artifact that failed to load from the cache")
        if found.outcome is not None:
            cached = found.outcome
            self.progress(f"{cell.id}: export cache hit ({entry.name})")
            with open(log_path, "a") as f:
                f.write(f"=== export cache hit: {entry} (original export log: {cached.log})\n")
                if cached.traceback:
                    f.write(cached.traceback)
            return replace(cached, wall_s=None, log=str(log_path))
        if found.miss:
            self.progress(f"{cell.id}: export cache held {found.miss}; exporting again")
            with open(log_path, "a") as f:
                f.write(f"=== export cache entry {entry} not used: {found.miss}\n")
        self.progress(f"{cell.id}: exporting ({cell.backend}{' ' + str(options) if options else ''}) ...")
        side = max(options.get("dynamic_range", DEFAULT_RANGE)) // 2
        staging = self.cache.staging_dir(entry)
        data = self.dataset_yaml() if cell.precision == "int8" else None
        req = ExportRequest.for_cell(cell, mat.checkpoint, staging, options, side, calibration=data)
        try:
            outcome = run_export(req, log_path, self.config.export_timeout_s, self.config.export_memory_gb)
        except BaseException:  # nothing of a failed or interrupted export stays behind in the cache
            shutil.rmtree(staging, ignore_errors=True)
            raise
        if disk_full(outcome):
            self.stop_reason = (
                f"the export of {cell.id} ran out of disk space ({first_line(outcome.message)}); free space "
                f"on that disk (the export cache is {self.cache.root}) and run again"
            )
        outcome = replace(
            outcome,
            exported_by_run=self.config.run_id,
            exported_at=datetime.now(UTC).isoformat(timespec="seconds"),
            cache_note=found.miss,
        )
        outcome = self.cache.store(entry, staging, outcome, limits)
        why = None if outcome.cache_entry else not_replayable(outcome, limits)
        self.progress(
            f"{cell.id}: export {outcome.status} in {outcome.wall_s:.1f}s"
            + (f" (not cached: {why})" if why else "")
        )
        return outcome

    def note_fresh_failure(self, outcome: ExportOutcome, stage: str, reason: str | None) -> None:
        """A freshly exported, cached artifact failed to load or run: say so in its cache entry, so a later run
        that loads the cached copy knows the failure is genuine and does not export it again."""
        if not outcome.cache_entry:
            return
        entry = Path(outcome.cache_entry)
        try:
            with self.cache.locked(entry, LOCK_MARGIN_S):
                self.cache.note_fresh_failure(
                    entry,
                    outcome.content_sha256,
                    {"stage": stage, "reason": reason, "run": self.config.run_id},
                )
        except Timeout:
            log.warning("could not note the fresh failure in %s: its lock stayed held", entry)

    # -- the dynamic probe ----------------------------------------------------------------------------------------
    def dynamic(self, cell: Cell) -> list[dict]:
        """Export once with dynamic H/W over the range, then run that one artifact over the shape sweep.

        When the dynamic export fails, the ladder applies matching remedies (32*Dim, raw head, ...) cumulatively,
        and the first remedied artifact that exports is swept instead.
        """
        base = {"dynamic_range": list(self.config.dynamic_range)}
        recs = self.dynamic_attempt(Attempt(cell, cell.id, export_options=base))
        if recs[0]["status"] != "export_failed" or not self.config.remedies:
            return recs

        def try_remedy(a: Attempt) -> tuple[list[dict], bool]:
            a.export_options = {**base, **a.export_options}
            out = self.dynamic_attempt(a)
            return out, out[0]["status"] != "export_failed"

        return [*recs, *climb(cell, recs[0], try_remedy, dynamic=True)]

    def dynamic_attempt(self, a: Attempt) -> list[dict]:
        """The dynamic export of `a` (its own record, summarising the sweep), then one record per sweep shape."""
        s = self.state(a)
        try:
            if not (plan(self, s) and export(self, s)):
                rec = self.finish(s)
                self.check_stop()
                return [rec]
        except Exception as e:
            self.crashed(s, e)
            return [self.finish(s)]
        sweep = self.sweep(a, s.outcome)
        summarise_sweep(s.rec, sweep)
        return [self.finish(s), *sweep]

    def sweep(self, a: Attempt, outcome: ExportOutcome) -> list[dict]:
        """Run one dynamic artifact at each sweep shape; a shape that is not a multiple of 32 and fails is
        retried letterbox-padded to the next multiple of 32 (the ladder's padding remedy)."""
        recs = []
        for side in self.config.sweep:
            target = a.cell.with_(shape=Shape(side, side, dynamic=True))
            rid = target.id + (f"+{a.remedy}" if a.remedy else "")
            shape_attempt = Attempt(
                target, rid, a.remedy, a.remedy_of, a.export_options, export_cell=a.cell, prebuilt=outcome
            )
            rec = self.attempt(shape_attempt)
            recs.append(rec)
            rec["_sweep"] = (side, rec["status"], None)
            if rec["status"] in FAILED_STATUSES and self.config.remedies and not target.shape.multiple_of_32:

                def try_padded(
                    pa: Attempt, rec=rec, shape_attempt=shape_attempt, side=side
                ) -> tuple[list[dict], bool]:
                    pa.remedy = f"{shape_attempt.remedy}+{pa.remedy}" if shape_attempt.remedy else pa.remedy
                    pa.export_options, pa.export_cell, pa.prebuilt = a.export_options, a.cell, outcome
                    r = self.attempt(pa)
                    rec["_sweep"] = (side, r["status"], f"padded to {r['height']}")
                    return [r], True

                recs += climb(
                    target, rec, try_padded, dynamic=True, select=lambda r: "pad_to" in r.change, max_chain=1
                )
        return recs


def summarise_sweep(rec: dict, sweep: list[dict]) -> None:
    """The dynamic cell's own record: ok when every sweep shape ran (directly, or letterbox-padded)."""
    shapes = [r.pop("_sweep") for r in sweep if "_sweep" in r]
    parts = [f"{s}: {st}{f' ({via})' if via else ''}" for s, st, via in shapes]
    rec["reason"] = "dynamic artifact swept over " + ", ".join(parts)
    failed = [s for s, st, _ in shapes if st != "ok"]
    rec["status"] = "ok" if not failed else "run_failed"
    if failed:
        first = next(r for r in sweep if r["status"] != "ok")
        rec["failure"] = dict(first.get("failure") or {}, message=f"failed at {failed}: {first['reason']}")
    set_null(rec, "latency_ms", "dynamic probe: latency is in the per-shape sweep records")
