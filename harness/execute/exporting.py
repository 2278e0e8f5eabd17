"""The export stage: the cell's artifact, exported in an isolated process (harness.execute.isolate), found in the
export cache (harness.execute.export_cache), or the checkpoint itself for backends that do not export; and the
remedy of a cached artifact that fails to load (`retry_fresh_export`: exported again once, before any remedy of
the ladder).
"""

from __future__ import annotations

import inspect
import logging
import shutil
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from filelock import Timeout

from harness.backends._shared import calibration
from harness.backends._shared.fake_cuda import FAKE_OPTION
from harness.backends._shared.ultralytics_export import artifact_bytes
from harness.backends.base import ExportRequest
from harness.core.cell import Cell
from harness.core.null_reasons import FAKE_LABEL
from harness.core.record import PENDING
from harness.core.results_dir import dig
from harness.diagnosis.failure import first_line
from harness.diagnosis.outcome import ExportOutcome
from harness.execute.config import RunConfig
from harness.execute.export_cache import (
    ExportCache,
    Lookup,
    cache_key,
    disk_full,
    export_limits,
    not_replayable,
)
from harness.execute.isolate import run_export
from harness.execute.services import EvalData, Progress, RunState
from harness.execute.state import AttemptState, fail_outcome
from harness.measure.host_memory import MIB
from harness.yolo import heads
from harness.yolo.dynamic import DEFAULT_RANGE
from harness.yolo.models import Materialized

log = logging.getLogger(__name__)

#: seconds to wait for an export cache entry's lock beyond the export timeout of the process holding it
LOCK_MARGIN_S = 300.0


def cache_identity(
    backend, cell: Cell, weights_sha256: str, options: dict, calibration_id=None
) -> tuple[str, str]:
    """(cache key, entry name) of the export of `cell` with `options`. A variant that shares its base's export
    (`Backend.export_as`: the CUDA-graph variants) gets the base's key and name, so both load one artifact."""
    shared = backend.export_as
    key_cell = cell.with_(backend=shared) if shared else cell
    key_type = type(backend)
    if shared:
        key_type = next((c for c in key_type.__mro__ if getattr(c, "name", None) == shared), key_type)
    fields = {
        "backend": key_cell.backend,
        "device": cell.device,
        "weights_sha256": weights_sha256,
        "task": cell.task,
        "head": cell.head,
        "shape": cell.shape.label,
        "batch": cell.batch,
        "precision": cell.precision,
        "options": options,
    }
    if calibration_id is not None:  # another calibration set is another artifact
        fields["calibration"] = calibration_id
    key = cache_key(fields, backend.library, inspect.getsourcefile(key_type))
    suffix = "".join(f"-{k}" for k in sorted(options) if k != "dynamic_range")
    return key, f"{key_cell.id}{suffix}"


def export_artifact(
    backend,
    cell: Cell,
    mat: Materialized,
    log_path: Path,
    options: dict,
    *,
    cache: ExportCache,
    config: RunConfig,
    run: RunState,
    data: EvalData,
    progress: Progress,
    replace_digest: str | None = None,
) -> ExportOutcome:
    """The export of `cell` with `options`: from the cache, or made now in an isolated process and cached.

    The entry's lock is held throughout, so a run sharing the cache waits for an export in progress and then
    finds it. `replace_digest` names the content of a cached artifact that failed to load: the entry is exported
    again, unless it now holds other content (another run replaced it) or content whose fresh export is known
    to fail the same way (`retry_fresh_export`). An export that meets a full disk sets `run.stop_reason`.
    """
    calib = calibration.identity(data.dataset_yaml()) if cell.precision == "int8" else None
    key, name = cache_identity(backend, cell, mat.sha256, options, calib)
    entry = cache.entry_dir(name, key)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    # Another process's export of this entry ends within its export timeout; wait that long and a margin.
    wait_s = config.export_timeout_s + LOCK_MARGIN_S

    def waiting() -> None:
        progress(f"{cell.id}: waiting for another process's export of {entry.name} ...")

    try:
        with cache.locked(entry, wait_s, on_wait=waiting):
            return _export_locked(
                backend,
                cell,
                mat,
                log_path,
                options,
                entry,
                replace_digest,
                cache,
                config,
                run,
                data,
                progress,
            )
    except Timeout:
        msg = f"waited {wait_s:.0f} s for another process's export of {entry.name}; gave up"
        with open(log_path, "a") as f:
            f.write(f"=== {msg}\n")
        progress(f"{cell.id}: {msg}")
        return ExportOutcome("timeout", None, message=msg, wall_s=wait_s, log=str(log_path))


def _export_locked(
    backend,
    cell: Cell,
    mat: Materialized,
    log_path: Path,
    options: dict,
    entry: Path,
    replace_digest: str | None,
    cache: ExportCache,
    config: RunConfig,
    run: RunState,
    data: EvalData,
    progress: Progress,
) -> ExportOutcome:
    """`export_artifact` with the entry's lock held: look up, or export into a staging directory and store."""
    limits = export_limits(config.export_memory_gb)
    if config.refresh_cache and entry.name not in run.refreshed:
        found = Lookup()  # --refresh-cache: every entry this run uses is exported again, once
        run.refreshed.add(entry.name)
    else:
        found = cache.lookup(entry, limits)
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
        progress(f"{cell.id}: export cache hit ({entry.name})")
        with open(log_path, "a") as f:
            f.write(f"=== export cache hit: {entry} (original export log: {cached.log})\n")
            if cached.traceback:
                f.write(cached.traceback)
        return replace(cached, wall_s=None, log=str(log_path))
    if found.miss:
        progress(f"{cell.id}: export cache held {found.miss}; exporting again")
        with open(log_path, "a") as f:
            f.write(f"=== export cache entry {entry} not used: {found.miss}\n")
    progress(f"{cell.id}: exporting ({cell.backend}{' ' + str(options) if options else ''}) ...")
    side = max(options.get("dynamic_range", DEFAULT_RANGE)) // 2
    staging = cache.staging_dir(entry)
    calib = data.dataset_yaml() if cell.precision == "int8" else None
    req = ExportRequest.for_cell(cell, mat.checkpoint, staging, options, side, calibration=calib)
    try:
        outcome = run_export(req, log_path, config.export_timeout_s, config.export_memory_gb)
    except BaseException:  # nothing of a failed or interrupted export stays behind in the cache
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if disk_full(outcome):
        run.stop_reason = (
            f"the export of {cell.id} ran out of disk space ({first_line(outcome.message)}); free space "
            f"on that disk (the export cache is {cache.root}) and run again"
        )
    outcome = replace(
        outcome,
        exported_by_run=config.run_id,
        exported_at=datetime.now(UTC).isoformat(timespec="seconds"),
        cache_note=found.miss,
    )
    outcome = cache.store(entry, staging, outcome, limits)
    why = None if outcome.cache_entry else not_replayable(outcome, limits)
    progress(
        f"{cell.id}: export {outcome.status} in {outcome.wall_s:.1f}s"
        + (f" (not cached: {why})" if why else "")
    )
    return outcome


def export(
    s: AttemptState,
    cache: ExportCache,
    config: RunConfig,
    run: RunState,
    data: EvalData,
    progress: Progress,
) -> bool:
    """The artifact: exported in an isolated process, from the cache, or the checkpoint for non-exporting backends."""
    rec, a = s.rec, s.attempt
    s.artifact = s.mat.checkpoint
    if s.cell.task != "cls":  # a classifier has no detection head to select
        rec.head_selection = heads.select(s.cell.head, s.cell.family).record()
    if s.backend.exports:
        # a retry after a cached artifact failed to load exports again, also for a prebuilt (dynamic) artifact
        prebuilt = a.prebuilt if s.replace_digest is None else None
        outcome = prebuilt or export_artifact(
            s.backend,
            a.export_cell or s.cell,
            s.mat,
            s.log_path,
            a.export_options,
            cache=cache,
            config=config,
            run=run,
            data=data,
            progress=progress,
            replace_digest=s.replace_digest,
        )
        s.replace_digest = None
        s.outcome = outcome
        rec.log = s.rel(s.log_path)
        rec.export_s = outcome.export_s
        rec.cache_hit = prebuilt is None and outcome.wall_s is None
        rec.export_origin = export_origin(outcome, prebuilt is not None, s.reexported)
        if a.export_options.get(FAKE_OPTION):
            return traced(s, outcome, progress)
        if outcome.status != "ok":
            return fail_outcome(s, outcome, "export", progress)
        s.artifact, s.export_info = Path(outcome.artifact), outcome.info
        if (
            a.load_options
        ):  # the backend's load (here and in the probe process) reads them from the export info
            s.export_info = {**s.export_info, "load_options": dict(a.load_options)}
        s.fresh = prebuilt is not None or outcome.wall_s is not None
        if "ops" in s.export_info:
            rec.ops = s.export_info["ops"]
        if "calibration" in s.export_info:
            rec.calibration = s.export_info["calibration"]
    rec.artifact = str(s.artifact)
    rec.artifact_bytes = size = artifact_bytes(s.artifact)
    reason = s.backend.export_only_reason(s.cell)
    if reason:
        rec.status, rec.reason = "exported", reason
        progress(f"{a.cell_id}: exported ({size / MIB:.1f} MiB)")
        return False
    return True


def traced(s: AttemptState, outcome: ExportOutcome, progress: Progress) -> bool:
    """End an attempt whose export was traced on a fake CUDA device: `traced` when it reached the step that needs
    a GPU, `trace_failed` (with the failure classified as a GPU export's) when it failed before; the record keeps
    the trace (`fake_device`) and says so in its reason. Nothing loads or runs after it."""
    rec = s.rec
    rec.fake_device = outcome.info.get("fake_device")
    if outcome.status != "ok":
        fail_outcome(s, outcome, "export", progress)
        rec.status = "trace_failed"
        rec.reason = f"{rec.reason} ({FAKE_LABEL})"
        return False
    info = outcome.info
    rec.artifact, rec.artifact_bytes = outcome.artifact, artifact_bytes(Path(outcome.artifact or ""))
    rec.ops = info.get("ops")
    stopped = dig(rec.fake_device, "stopped_at") or "the end of what it could trace"
    rec.status, rec.reason = "traced", f"{FAKE_LABEL}; stopped at: {stopped}"
    progress(f"{s.attempt.cell_id}: traced on a fake CUDA device, stopped at: {stopped}")
    return False


def export_origin(outcome: ExportOutcome, prebuilt: bool, reexported: str | None = None) -> str:
    """Where the record's `export_s` comes from: this attempt, or an earlier run's export found in the cache; and
    why a cached export was not used (a corrupt entry, a failure under other limits, a load failure)."""
    if prebuilt:
        return "the dynamic probe's export in this run"
    if outcome.wall_s is not None:
        why = reexported or (f"the export cache held {outcome.cache_note}" if outcome.cache_note else None)
        return "exported in this attempt" + (f" ({why})" if why else "")
    who = outcome.exported_by_run or "an earlier run"
    when = f" at {outcome.exported_at}" if outcome.exported_at else ""
    took = f" in {outcome.export_s:.1f} s" if outcome.export_s is not None else ""
    return f"cache: exported by run {who}{when}{took}" + (f" ({reexported})" if reexported else "")


def note_fresh_failure(
    outcome: ExportOutcome, stage: str, reason: str | None, cache: ExportCache, run_id: str
) -> None:
    """A freshly exported, cached artifact failed to load or run: say so in its cache entry, so a later run
    that loads the cached copy knows the failure is genuine and does not export it again."""
    if not outcome.cache_entry:
        return
    entry = Path(outcome.cache_entry)
    try:
        with cache.locked(entry, LOCK_MARGIN_S):
            cache.note_fresh_failure(
                entry,
                outcome.content_sha256,
                {"stage": stage, "reason": reason, "run": run_id},
            )
    except Timeout:
        log.warning("could not note the fresh failure in %s: its lock stayed held", entry)


def retry_fresh_export(
    s: AttemptState, stage: str, cache: ExportCache, run_id: str, progress: Progress
) -> bool:
    """After the probe or the load (`stage`) failed: whether to export the artifact again and go back to the export
    stage.

    A cached artifact that fails to load or run is exported once more, and the attempt retried with the fresh
    export before anything else happens, so a corrupt cache entry can never read as a compatibility finding (and
    set off a remedy). Not when a fresh export of this very content is known to fail the same way (the entry's
    `fresh_failure`, noted here whenever a fresh export fails to load or run): then the failure is genuine.
    """
    o = s.outcome
    if o is None or not o.cache_entry or s.attempt.skip_reason:
        return False  # no export (checkpoint backends), or one that is not cached
    if o.wall_s is not None:  # a fresh export that failed: the failure is genuine; remember it for later runs
        note_fresh_failure(o, stage, s.rec.reason, cache, run_id)
        return False
    if s.reexported or o.fresh_failure:
        return False
    reason = s.rec.reason or s.rec.status
    what = (
        "failed to load" if stage == "load" else "failed its probe (load and first run in a separate process)"
    )
    s.reexported = f"the cached artifact {what}: {reason}; re-exported before any remedy"
    progress(f"{s.attempt.cell_id}: {s.reexported}")
    with open(s.log_path, "a") as f:
        f.write(f"=== {s.reexported}\n")
    for t in s.trackers:  # the retry starts them afresh; nothing of the failed load is measured
        try:
            t.stop(0)
        except Exception:
            log.debug("tracker %s did not stop cleanly", type(t).__name__, exc_info=True)
    s.trackers = []
    if s.runner is not None:
        s.runner.close()
        s.runner = None
    s.rec.status, s.rec.reason, s.rec.failure = PENDING, None, None
    s.replace_digest = o.content_sha256
    return True
