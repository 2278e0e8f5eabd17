"""One attempt of a cell as named stages, each a small function with one job.

plan -> export -> probe -> load -> first run -> warm-up -> timed rounds -> end to end -> parity -> scenarios ->
operators -> accuracy; the record is written after the
last stage that ran (by `harness.execute.attempt.CellRunner`). A stage returns True to go on, False when the
attempt ends there (the stage has then set the record's status and reason). The state that flows between stages is
one `AttemptState`; the run-wide services (config, export cache, checkpoints, references, progress) are the
`CellRunner` passed as `svc`.
"""

from __future__ import annotations

import logging
import random
import time
import traceback
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from harness import backends
from harness.backends._shared.ultralytics_export import artifact_bytes
from harness.core.cell import Cell
from harness.core.record import Latency, set_null
from harness.diagnosis.failure import failure_from_exception, failure_from_outcome, first_line, parity_failure
from harness.execute.isolate import ExportOutcome, run_probe
from harness.execute.usecase import end_to_end, operators, scenarios
from harness.measure.base import Tracker
from harness.measure.canary import around, merge
from harness.measure.corrupt import CORRUPT_ENV, corrupt, corruptions
from harness.measure.host_memory import MIB, release_memory
from harness.measure.interleave import Contestant, Interleaved, episode_label, run_interleaved
from harness.measure.parity import compare
from harness.measure.timing import SLOWDOWN_ENV, TimedCall, loop_timer, stretched
from harness.measure.trackers import trackers_for
from harness.yolo.inputs import letterboxed

if TYPE_CHECKING:
    from harness.execute.attempt import CellRunner

log = logging.getLogger(__name__)


@dataclass
class Attempt:
    """One recorded attempt: the cell that runs, how its record is labelled, and what differs from the plain cell."""

    cell: Cell
    cell_id: str
    remedy: str | None = None
    remedy_of: str | None = None
    export_options: dict = field(default_factory=dict)
    export_cell: Cell | None = None  # the cell whose export is reused (dynamic sweeps run one artifact)
    skip_reason: str | None = None
    prebuilt: ExportOutcome | None = None  # an export made outside this attempt (the dynamic artifact)


@dataclass
class AttemptState:
    """What one attempt knows so far; each stage reads what earlier ones left and adds its own."""

    attempt: Attempt
    rec: dict
    log_path: Path
    backend: Any = None
    mat: Any = None
    artifact: Path | None = None
    export_info: dict = field(default_factory=dict)
    fresh: bool = False
    outcome: ExportOutcome | None = None
    runner: Any = None
    prepared: Any = None
    outputs: list[np.ndarray] | None = None
    call: Callable[[], None] | None = None
    trackers: list[Tracker] = field(default_factory=list)
    samples: list[float] = field(default_factory=list)
    #: the fastest warm-up round (ms): how long a round takes, for blocking the timed rounds
    estimate_ms: float | None = None
    #: the timing of this attempt's rounds, interleaved with its workload's other runners or alone; set by the
    #: workload (harness.execute.workload) before the timed-rounds stage when the attempt is timed with others
    timed: Interleaved | None = None
    #: the canary readings around the timing (harness.measure.canary.around)
    canary: dict | None = None
    #: index into STAGES of the next stage to run (an attempt can be advanced in parts: harness.execute.workload)
    next_stage: int = 0
    #: the content of a cached artifact that failed to load: the export stage asks for it to be exported again
    replace_digest: str | None = None
    #: why this attempt re-exported a cached artifact (said in the record); set once, so it retries only once
    reexported: str | None = None
    #: the end-to-end rounds (harness.execute.usecase), or why they could not run
    e2e: Any = None
    e2e_error: str | None = None
    #: the end-to-end pairs its workload timed at least (harness.execute.usecase.e2e_min_pairs)
    e2e_min_pairs: int = 20

    @property
    def cell(self) -> Cell:
        return self.attempt.cell


def fail(svc: CellRunner, s: AttemptState, status: str, stage: str, exc: BaseException) -> bool:
    """End the attempt on an exception raised in `stage`: status, reason, diagnosis, full traceback in the log."""
    with open(s.log_path, "a") as f:
        f.write(f"=== {stage} failed\n{traceback.format_exc()}")
    s.rec.update(status=status, reason=first_line(str(exc)) or type(exc).__name__, log=svc.rel(s.log_path))
    s.rec["failure"] = failure_from_exception(exc, stage, s.rec["log"])
    svc.progress(f"{s.rec['cell_id']}: {status}: {s.rec['reason']}")
    return False


def fail_outcome(svc: CellRunner, s: AttemptState, outcome: ExportOutcome, stage: str) -> bool:
    """End the attempt on an isolated step (export or probe) that did not end ok."""
    s.rec["status"] = outcome.status
    s.rec["reason"] = first_line(outcome.message) or outcome.status
    s.rec["log"] = svc.rel(Path(outcome.log)) if outcome.log else s.rec["log"]
    s.rec["failure"] = failure_from_outcome(outcome, stage, s.rec["log"])
    svc.progress(f"{s.rec['cell_id']}: {outcome.status} ({s.rec['failure']['class']}): {s.rec['reason']}")
    return False


def plan(svc: CellRunner, s: AttemptState) -> bool:
    """Is the cell runnable here (skip reasons), and which weights does it use."""
    cell, rec = s.cell, s.rec
    if s.attempt.skip_reason:
        rec.update(status="skipped", reason=s.attempt.skip_reason)
        return False
    reason = svc.unrunnable(cell)
    if reason:
        rec.update(status="skipped", reason=reason)
        return False
    s.backend = backends.get(cell.backend)
    s.mat = svc.materialize(cell)
    rec["weights"] = s.mat.weights
    rec["threads_requested"] = svc.config.threads
    return True


def export(svc: CellRunner, s: AttemptState) -> bool:
    """The artifact: exported in an isolated process, from the cache, or the checkpoint for non-exporting backends."""
    rec, a = s.rec, s.attempt
    s.artifact = s.mat.checkpoint
    if s.backend.exports:
        # a retry after a cached artifact failed to load exports again, also for a prebuilt (dynamic) artifact
        prebuilt = a.prebuilt if s.replace_digest is None else None
        outcome = prebuilt or svc.export(
            s.backend,
            a.export_cell or s.cell,
            s.mat,
            s.log_path,
            a.export_options,
            replace_digest=s.replace_digest,
        )
        s.replace_digest = None
        s.outcome = outcome
        rec["log"] = svc.rel(s.log_path)
        rec["export_s"] = outcome.export_s
        rec["cache_hit"] = prebuilt is None and outcome.wall_s is None
        rec["export_origin"] = export_origin(outcome, prebuilt is not None, s.reexported)
        if outcome.status != "ok":
            return fail_outcome(svc, s, outcome, "export")
        s.artifact, s.export_info = Path(outcome.artifact), outcome.info
        s.fresh = prebuilt is not None or outcome.wall_s is not None
        if "ops" in s.export_info:
            rec["ops"] = s.export_info["ops"]
        if "calibration" in s.export_info:
            rec["calibration"] = s.export_info["calibration"]
    rec["artifact"] = str(s.artifact)
    rec["artifact_bytes"] = artifact_bytes(s.artifact)
    reason = s.backend.export_only_reason(s.cell)
    if reason:
        rec.update(status="exported", reason=reason)
        svc.progress(f"{a.cell_id}: exported ({rec['artifact_bytes'] / MIB:.1f} MiB)")
        return False
    return True


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


def probe(svc: CellRunner, s: AttemptState) -> bool:
    """Load and run the artifact in a separate process: the first run of a fresh artifact (a runtime that aborts on
    it is recorded, not fatal) and the cell's host memory, measured there so it does not depend on earlier cells
    (or reused from an earlier run's measurement of the same artifact, see harness.execute.memory_cache)."""
    cfg, cell = svc.config, s.cell
    kept = memory_entry(svc, s)
    cached = svc.memory_cache.get(kept) if kept and not cfg.refresh_cache else None
    first = s.fresh and cfg.isolate_first_run
    rounds = cfg.memory_rounds if kept and cached is None else 0
    if first or rounds:
        outcome = run_probe(
            cell,
            str(s.artifact),
            s.export_info,
            cell.shape.height,
            cell.shape.width,
            s.log_path.parent / f"{s.attempt.cell_id}.probe",
            s.log_path,
            cfg.probe_timeout_s,
            cfg.export_memory_gb,
            rounds=rounds,
        )
        if outcome.status != "ok":
            return fail_outcome(svc, s, outcome, "run")
        if "memory" in outcome.info:
            mem = outcome.info["memory"]
            mem["source"] = f"a fresh process running load, first run and {rounds} runs: {mem['source']}"
            cached = svc.memory_cache.put(kept, mem, outcome.info.get("null_reasons") or {}, cfg.run_id)
            cached["origin"] = "measured in this attempt"
    if cached:
        s.rec["memory"] = {**cached["memory"], "origin": cached["origin"]}
        s.rec["null_reasons"].update(cached["null_reasons"])
    return True


def memory_entry(svc: CellRunner, s: AttemptState) -> Path | None:
    """Where this cell's fresh-process memory measurement is kept; None when memory is measured in-process."""
    if not svc.config.memory_rounds:
        return None
    identity = s.mat.sha256 if not s.backend.exports else ""
    return svc.memory_cache.path(
        s.attempt.cell_id,
        s.artifact,
        identity,
        s.backend.library,
        svc.config.threads,
        svc.config.memory_rounds,
    )


def load(svc: CellRunner, s: AttemptState) -> bool:
    """Release the previous cell's runtime, start the trackers, and load the artifact."""
    svc.release_previous()
    if not svc.config.memory_rounds:
        release_memory()  # measured here: at least give back what earlier cells freed
    # host memory was measured in the probe's fresh process unless that is switched off
    s.trackers = trackers_for(s.cell, skip=("host_memory",) if svc.config.memory_rounds else ())
    for t in s.trackers:
        t.start()
    t0 = time.perf_counter()
    try:
        s.runner = s.backend.load(s.artifact, s.cell, s.export_info)
    except Exception as e:
        return fail(svc, s, "load_failed", "load", e)
    s.rec["load_s"] = time.perf_counter() - t0
    s.rec["compile_s"] = s.runner.compile_s
    if s.runner.compile_s is None and s.runner.compile_reason:
        s.rec.setdefault("null_reasons", {})["compile_s"] = s.runner.compile_reason
    svc.last_runner = s.runner
    for t in s.trackers:
        bind = getattr(t, "bind", None)
        if bind is not None:
            bind(s.runner)
    return True


def first_run(svc: CellRunner, s: AttemptState) -> bool:
    """The first inference, timed on its own; its outputs are the ones parity checks."""
    runner = s.runner
    try:
        s.prepared = runner.prepare(letterboxed(s.cell.shape.height, s.cell.shape.width, s.cell.batch))
        t0 = time.perf_counter_ns()
        result = runner.run(s.prepared)
        runner.synchronize()
        s.rec["first_run_ms"] = (time.perf_counter_ns() - t0) / 1e6
        s.outputs = runner.outputs(result)
    except Exception as e:
        return fail(svc, s, "run_failed", "run", e)
    return True


def timed_call(svc: CellRunner, s: AttemptState) -> Callable[[], None]:
    """The call each round times: run plus synchronize, instrumented by the trackers (and the slowdown knob)."""
    runner, prepared = s.runner, s.prepared
    started = [0.0]

    def run() -> None:
        started[0] = time.perf_counter()
        runner.run(prepared)

    call: Callable[[], None] = TimedCall(
        run, stretched(runner.synchronize, svc.slowdown_factor(s.cell), started)
    )
    for t in s.trackers:
        call = t.wrap(call)
    return call


def warmup(svc: CellRunner, s: AttemptState) -> bool:
    """Warm-up rounds, apart from the timed ones; their fastest sets how many timed rounds fit the time budget."""
    s.call = timed_call(svc, s)
    try:
        warm = loop_timer(s.call, max(1, svc.config.warmup))
    except Exception as e:
        return fail(svc, s, "run_failed", "run", e)
    s.estimate_ms = min(warm)
    return True


def contestant(s: AttemptState) -> Contestant:
    """The attempt's runner as one contestant of an interleaved timing (its trackers pause between its blocks)."""

    def resume() -> None:
        for t in s.trackers:
            t.resume()

    def pause() -> None:
        for t in s.trackers:
            t.pause()

    return Contestant(s.attempt.cell_id, s.call, s.estimate_ms or 1.0, resume, pause)


def start_timed(s: AttemptState) -> None:
    for t in s.trackers:
        t.start_timed()


def time_together(
    svc: CellRunner,
    states: list[AttemptState],
    label: str,
    reference: str | None = None,
    episode: tuple[int, int] = (1, 1),
) -> Interleaved:
    """Time the loaded runners of `states` interleaved (one alone is the same loop), with the drift canary read
    right before and after; each state gets the timing and the canary readings. `reference`: the cell id whose
    paired ratios must be narrow too before the rounds suffice; `episode` (k, n): the k-th of n episodes, going on
    with the states' timing so far (harness.measure.interleave.run_interleaved)."""
    k = episode[0]
    part = f" ({episode_label(episode)})" if episode[1] > 1 else ""
    before = svc.read_canary(f"before {label}{part}")
    if k == 1:
        for s in states:
            start_timed(s)
    previous = states[0].timed if k > 1 else None
    rng = random.Random(
        zlib.crc32(f"{label}{part}".encode())
    )  # a reproducible order per workload and episode
    try:
        timed = run_interleaved(
            [contestant(s) for s in states],
            svc.config.rounds_policy(),
            rng=rng,
            reference=reference,
            previous=previous,
            episode=episode,
        )
    finally:
        canary = around(before, svc.read_canary(f"after {label}{part}"))
        for s in states:
            s.canary = merge(s.canary, canary) if k > 1 else canary
    for s in states:
        s.timed = timed
    return timed


def timed_rounds(svc: CellRunner, s: AttemptState) -> bool:
    """The timed rounds: taken already when the attempt was timed interleaved with its workload (`s.timed`), else
    timed here alone by the same loop (harness.measure.interleave), with the canary read around them."""
    if s.timed is None:
        svc.progress(
            f"{s.attempt.cell_id}: load {s.rec['load_s']:.2f}s, first run {s.rec['first_run_ms']:.1f} ms, timing"
        )
        time_together(svc, [s], s.attempt.cell_id)
    timing = s.timed.timings[s.attempt.cell_id]
    s.samples = list(timing.samples)
    stop_trackers(s)
    if timing.error is not None:
        try:
            raise timing.error
        except Exception as e:
            return fail(svc, s, "run_failed", "run", e)
    record_run(svc, s)
    return True


def stop_trackers(s: AttemptState) -> None:
    """Stop every started tracker and let each fill the record (also when an attempt ends early)."""
    for t in s.trackers:
        try:
            t.stop(len(s.samples))
            t.fill(s.rec)
        except Exception as e:  # a measurement that fails must not lose the cell
            log.exception("tracker %s failed", type(t).__name__)
            set_null(s.rec, t.field or type(t).__name__, f"tracker failed: {type(e).__name__}: {e}")
    s.trackers = []


def record_run(svc: CellRunner, s: AttemptState) -> None:
    """What the runtime reports it executed (threads, precision), and the latency of the timed rounds."""
    rec, runner = s.rec, s.runner
    threads, how = runner.cpu_threads()
    rec["threads"] = threads
    if threads is None:
        set_null(rec, "threads", how)
    rec["precision_executed"] = runner.precision_executed
    rec["precision_source"] = runner.precision_source
    rec["precision_detail"] = runner.precision_detail
    if runner.precision_executed is None:
        set_null(rec, "precision_executed", runner.precision_source)
    if s.samples:
        lat = Latency.from_samples(s.samples, runner.timing_scope)
        rec["latency_ms"] = lat.to_dict()
        for key, why in lat.null_reasons().items():
            set_null(rec, f"latency_ms.{key}", why)
        rec["samples_ms"] = [round(v, 4) for v in s.samples]
        rec["throughput_ips"] = s.cell.batch * 1000.0 / lat.p50
    else:
        set_null(rec, "latency_ms", "no timed rounds ran")
    if s.timed is not None:
        rec["timing"] = s.timed.section(s.attempt.cell_id)
    if s.canary is not None:
        rec["canary_ms"] = s.canary
    else:
        set_null(rec, "canary_ms", svc.canary_reason())
    factor = svc.slowdown_factor(s.cell)
    if factor > 1.0:
        rec["reason"] = f"latency artificially stretched x{factor} by {SLOWDOWN_ENV}"


def parity(svc: CellRunner, s: AttemptState) -> bool:
    """Agreement of the first run's outputs with the PyTorch fp32 eager reference on the same input, per output and
    per quantity (harness.measure.parity); the corruption knob (harness.measure.corrupt), when on, applies first."""
    rec, cell, opts = s.rec, s.cell, s.attempt.export_options
    h, w = cell.shape.height, cell.shape.width
    try:
        reference = svc.reference(s.mat, cell, h, w, opts)
        layout = svc.references.layout(s.mat, cell, h, w, opts)
    except Exception as e:
        rec.update(status="parity_failed", reason=f"no PyTorch reference at {h}x{w}: {first_line(str(e))}")
        set_null(rec, "parity", rec["reason"])
        rec["failure"] = failure_from_exception(e, "parity", None)
        return False
    outputs, note = s.outputs, None
    modes = corruptions().get(cell.backend)
    if modes:
        outputs, changes = corrupt(outputs, modes, layout)
        rec["corrupted"] = list(modes)
        note = f"outputs corrupted on purpose by {CORRUPT_ENV} before parity ({'; '.join(changes)})"
    result = compare(outputs, reference, layout, cell.precision)
    result.corrupted = list(modes) if modes else None
    rec["parity"] = result.to_dict()
    for name, why in result.null_reasons.items():
        set_null(rec, f"parity.metrics.{name}", why)
    if result.ok:
        rec["status"] = "ok"
    else:
        rec["status"] = "parity_failed"
        rec["reason"] = result.reason()
        rec["failure"] = parity_failure(rec["reason"])
    if note:
        rec["reason"] = f"{rec['reason']}; {note}" if rec.get("reason") else note
    p50 = rec["latency_ms"]["p50"] if rec["latency_ms"] else float("nan")
    verdict = "parity ok" if result.ok else "parity failed: " + ", ".join(result.failed)
    svc.progress(f"{s.attempt.cell_id}: {rec['status']} p50 {p50:.2f} ms, {verdict}")
    return True


def accuracy(svc: CellRunner, s: AttemptState) -> bool:
    """mAP50-95 and mAP50 of the cell's runner on the run's val split, beside the PyTorch fp32 reference's on the
    same images (harness.accuracy); a null with the reason where it would mean nothing. Never ends the attempt."""
    from harness.accuracy import per_cell
    from harness.accuracy.evaluate import accuracy_record, evaluate, torch_reference

    rec, cell, cfg = s.rec, s.cell, svc.config
    why = per_cell.skip_reason(
        enabled=cfg.accuracy,
        task=cell.task,
        dynamic=cell.shape.dynamic,
        weights=s.mat.weights,
        user_data=cfg.data is not None,
        remedy=bool(s.attempt.export_options),
    )
    if why:
        set_null(rec, "accuracy", why)
        return True
    h, w = cell.shape.height, cell.shape.width
    t0 = time.perf_counter()
    try:
        split = svc.accuracy_split(cell)
        infer = per_cell.runner_infer(s.runner)
        modes = corruptions().get(cell.backend)
        if modes:  # the corruption knob spoils what accuracy scores too
            layout = svc.references.layout(s.mat, cell, h, w, s.attempt.export_options)
            plain = infer

            def infer(x):
                return corrupt(plain(x), modes, layout)[0]

        result = evaluate(infer, cell.head, h, w, split=split, batch=cell.batch)
        key = per_cell.reference_key(s.mat.sha256, cell.head, h, w, split.dataset, len(split))
        if cell.backend == "torch-eager" and cell.precision == "fp32" and not modes:
            svc.accuracy_refs.setdefault(key, result)  # this cell is the PyTorch fp32 reference
        if key not in svc.accuracy_refs:
            ref_infer = torch_reference(s.mat.checkpoint, cell.head, h, w)
            svc.accuracy_refs[key] = evaluate(ref_infer, cell.head, h, w, split=split, batch=1)
        section = accuracy_record(result, svc.accuracy_refs[key])
    except Exception as e:  # a failed accuracy pass is a null with its reason, never a lost cell
        log.exception("accuracy pass of %s failed", s.attempt.cell_id)
        set_null(rec, "accuracy", f"accuracy pass failed: {type(e).__name__}: {first_line(str(e))}")
        return True
    section["tier"] = per_cell.tier(section["ratio"])
    section["seconds"] = round(time.perf_counter() - t0, 3)
    rec["accuracy"] = section
    if section["ratio"] is None:
        set_null(rec, "accuracy.ratio", "the reference's mAP50-95 is 0: no ratio")
        set_null(rec, "accuracy.tier", "no ratio to the reference")
    svc.progress(
        f"{s.attempt.cell_id}: mAP50-95 {section['map50_95']:.3f} on {section['images']} images"
        + (f", {section['ratio']:.3f} of the reference ({section['tier']})" if section["ratio"] else "")
    )
    return True


STAGES: tuple[Callable[[CellRunner, AttemptState], bool], ...] = (
    plan,
    export,
    probe,
    load,
    first_run,
    warmup,
    timed_rounds,
    end_to_end,
    parity,
    scenarios,
    operators,
    accuracy,
)


def retry_fresh_export(svc: CellRunner, s: AttemptState, stage: str) -> bool:
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
        svc.note_fresh_failure(o, stage, s.rec.get("reason"))
        return False
    if s.reexported or o.fresh_failure:
        return False
    reason = s.rec.get("reason") or s.rec.get("status")
    what = (
        "failed to load" if stage == "load" else "failed its probe (load and first run in a separate process)"
    )
    s.reexported = f"the cached artifact {what}: {reason}; re-exported before any remedy"
    svc.progress(f"{s.attempt.cell_id}: {s.reexported}")
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
    s.rec.update(status=None, reason=None, failure=None)
    s.replace_digest = o.content_sha256
    return True


def advance(svc: CellRunner, s: AttemptState, until: Callable | None = None) -> bool:
    """Run the attempt's stages from where it stands, up to (not including) `until`, or to the end.

    True when it got there and the attempt goes on; False when a stage ended it (now, or before this call: an
    attempt that is over never reaches `until`). A cached artifact that fails in the probe or the load is exported
    again once and the attempt goes back to the export stage (retry_fresh_export).
    """
    if s.next_stage >= len(STAGES):
        return until is None
    while s.next_stage < len(STAGES):
        stage = STAGES[s.next_stage]
        if stage is until:
            return True
        if stage(svc, s):
            s.next_stage += 1
        elif stage in (probe, load) and retry_fresh_export(svc, s, stage.__name__):
            s.next_stage = STAGES.index(export)
        else:
            s.next_stage = len(STAGES)
            return False
    return True


def end(s: AttemptState) -> None:
    """The attempt is over: trackers stopped, its runtime closed, and a re-export said in an ok record."""
    stop_trackers(s)
    if s.runner is not None:
        s.runner.close()
        s.runner = None
    if s.reexported and s.rec["status"] == "ok" and not s.rec["reason"]:
        s.rec["reason"] = s.reexported


def run_stages(svc: CellRunner, s: AttemptState) -> None:
    """Run the remaining stages in order until one ends the attempt; trackers are stopped whatever happened."""
    try:
        advance(svc, s)
    finally:
        end(s)
