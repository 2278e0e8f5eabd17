"""The measuring stages of an attempt, on the runner loaded in this process: the first run, the warm-up, the timed
rounds (alone, or taken already with the workload's other runners: harness.execute.workload), parity with the
PyTorch reference, and the accuracy pass. The use-case stages (end to end, scenarios, operators) follow in
harness.execute.usecase.
"""

from __future__ import annotations

import logging
import random
import time
import zlib
from collections.abc import Callable

from harness.core.record import set_null
from harness.diagnosis.failure import failure_from_exception, first_line, parity_failure
from harness.execute.config import RunConfig
from harness.execute.services import EvalData, Progress
from harness.execute.state import AttemptState, fail
from harness.measure.canary import Canary, around, merge
from harness.measure.corrupt import CORRUPT_ENV, corrupt, corruptions
from harness.measure.interleave import Contestant, Interleaved, RoundsPolicy, episode_label, run_interleaved
from harness.measure.parity import References, compare
from harness.measure.stats import latency_from_samples
from harness.measure.timing import SLOWDOWN_ENV, TimedCall, loop_timer, stretched
from harness.yolo.inputs import letterboxed

log = logging.getLogger(__name__)


def read_canary(canary: Canary | None, label: str) -> float | None:
    """The drift canary timed now (ms), or None when the run has none."""
    return canary.read(label) if canary is not None else None


def canary_reason(canary: Canary | None) -> str:
    """Why a record has no canary readings."""
    if canary is None:
        return "the drift canary was switched off for this run"
    return canary.reason or "no canary reading was taken around this attempt"


def first_run(s: AttemptState, progress: Progress) -> bool:
    """The first inference, timed on its own; its outputs are the ones parity checks."""
    runner = s.runner
    try:
        s.prepared = runner.prepare(letterboxed(s.cell.shape.height, s.cell.shape.width, s.cell.batch))
        t0 = time.perf_counter_ns()
        result = runner.run(s.prepared)
        runner.synchronize()
        s.rec.first_run_ms = (time.perf_counter_ns() - t0) / 1e6
        s.outputs = runner.outputs(result)
    except Exception as e:
        return fail(s, "run_failed", "run", e, progress)
    return True


def timed_call(s: AttemptState, slowdown: float) -> Callable[[], None]:
    """The call each round times: run plus synchronize, instrumented by the trackers (and the slowdown knob)."""
    runner, prepared = s.runner, s.prepared
    started = [0.0]

    def run() -> None:
        started[0] = time.perf_counter()
        runner.run(prepared)

    call: Callable[[], None] = TimedCall(run, stretched(runner.synchronize, slowdown, started))
    for t in s.trackers:
        call = t.wrap(call)
    return call


def warmup(s: AttemptState, rounds: int, slowdown: float, progress: Progress) -> bool:
    """Warm-up rounds, apart from the timed ones; their fastest sets how many timed rounds fit the time budget."""
    s.call = timed_call(s, slowdown)
    try:
        warm = loop_timer(s.call, max(1, rounds))
    except Exception as e:
        return fail(s, "run_failed", "run", e, progress)
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
    states: list[AttemptState],
    label: str,
    canary: Canary | None,
    policy: RoundsPolicy,
    reference: str | None = None,
    episode: tuple[int, int] = (1, 1),
) -> Interleaved:
    """Time the loaded runners of `states` interleaved (one alone is the same loop), with the drift canary read
    right before and after; each state gets the timing and the canary readings. `reference`: the cell id whose
    paired ratios must be narrow too before the rounds suffice; `episode` (k, n): the k-th of n episodes, going on
    with the states' timing so far (harness.measure.interleave.run_interleaved)."""
    k = episode[0]
    part = f" ({episode_label(episode)})" if episode[1] > 1 else ""
    before = read_canary(canary, f"before {label}{part}")
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
            policy,
            rng=rng,
            reference=reference,
            previous=previous,
            episode=episode,
        )
    finally:
        readings = around(before, read_canary(canary, f"after {label}{part}"))
        for s in states:
            s.canary = merge(s.canary, readings) if k > 1 else readings
    for s in states:
        s.timed = timed
    return timed


def timed_rounds(
    s: AttemptState, canary: Canary | None, policy: RoundsPolicy, slowdown: float, progress: Progress
) -> bool:
    """The timed rounds: taken already when the attempt was timed interleaved with its workload (`s.timed`), else
    timed here alone by the same loop (harness.measure.interleave), with the canary read around them."""
    if s.timed is None:
        progress(
            f"{s.attempt.cell_id}: load {s.rec.load_s:.2f}s, first run {s.rec.first_run_ms:.1f} ms, timing"
        )
        time_together([s], s.attempt.cell_id, canary, policy)
    timing = s.timed.timings[s.attempt.cell_id]
    s.samples = list(timing.samples)
    stop_trackers(s)
    if timing.error is not None:
        try:
            raise timing.error
        except Exception as e:
            return fail(s, "run_failed", "run", e, progress)
    record_run(s, canary, slowdown)
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


def record_run(s: AttemptState, canary: Canary | None, slowdown: float) -> None:
    """What the runtime reports it executed (threads, precision), and the latency of the timed rounds."""
    rec, runner = s.rec, s.runner
    threads, how = runner.cpu_threads()
    rec.threads = threads
    if threads is None:
        set_null(rec, "threads", how)
    rec.precision_executed = runner.precision_executed
    rec.precision_source = runner.precision_source
    rec.precision_detail = runner.precision_detail
    if runner.precision_executed is None:
        set_null(rec, "precision_executed", runner.precision_source)
    if s.samples:
        lat = latency_from_samples(s.samples, runner.timing_scope)
        rec.latency_ms = lat
        for key, why in lat.null_reasons().items():
            set_null(rec, f"latency_ms.{key}", why)
        rec.samples_ms = [round(v, 4) for v in s.samples]
        rec.throughput_ips = s.cell.batch * 1000.0 / lat.p50
    else:
        set_null(rec, "latency_ms", "no timed rounds ran")
    if s.timed is not None:
        rec.timing = s.timed.section(s.attempt.cell_id)
    if s.canary is not None:
        rec.canary_ms = s.canary
    else:
        set_null(rec, "canary_ms", canary_reason(canary))
    if slowdown > 1.0:
        rec.reason = f"latency artificially stretched x{slowdown} by {SLOWDOWN_ENV}"


def parity(s: AttemptState, references: References, progress: Progress) -> bool:
    """Agreement of the first run's outputs with the PyTorch fp32 eager reference on the same input, per output and
    per quantity (harness.measure.parity); the corruption knob (harness.measure.corrupt), when on, applies first."""
    rec, cell, opts = s.rec, s.cell, s.attempt.export_options
    h, w = cell.shape.height, cell.shape.width
    try:
        reference = references.get(s.mat, cell, h, w, opts)
        layout = references.layout(s.mat, cell, h, w, opts)
    except Exception as e:
        rec.status = "parity_failed"
        rec.reason = why = f"no PyTorch reference at {h}x{w}: {first_line(str(e))}"
        set_null(rec, "parity", why)
        rec.failure = failure_from_exception(e, "parity", None)
        return False
    outputs, note = s.outputs, None
    modes = corruptions().get(cell.backend)
    if modes:
        outputs, changes = corrupt(outputs, modes, layout)
        rec.corrupted = list(modes)
        note = f"outputs corrupted on purpose by {CORRUPT_ENV} before parity ({'; '.join(changes)})"
    result = compare(outputs, reference, layout, cell.precision)
    result.corrupted = list(modes) if modes else None
    rec.parity = result.to_dict()
    for name, why in result.null_reasons.items():
        set_null(rec, f"parity.metrics.{name}", why)
    if result.ok:
        rec.status = "ok"
    else:
        rec.status = "parity_failed"
        rec.reason = result.reason()
        rec.failure = parity_failure(rec.reason)
    if note:
        rec.reason = f"{rec.reason}; {note}" if rec.reason else note
    p50 = rec.latency_ms.p50 if rec.latency_ms else float("nan")
    verdict = "parity ok" if result.ok else "parity failed: " + ", ".join(result.failed)
    progress(f"{s.attempt.cell_id}: {rec.status} p50 {p50:.2f} ms, {verdict}")
    return True


def accuracy(
    s: AttemptState,
    config: RunConfig,
    data: EvalData,
    accuracy_refs: dict[tuple, dict],
    references: References,
    progress: Progress,
) -> bool:
    """The task's accuracy (detect box mAP50-95, segment mask mAP50-95, pose keypoint mAP50-95, obb mAP50, classify
    top-1, harness.accuracy.per_cell) of the cell's runner on the run's val split, beside the PyTorch fp32
    reference's on the same images; a null with the reason where it would mean nothing. Never ends the attempt."""
    from harness.accuracy import per_cell
    from harness.accuracy.evaluate import torch_reference

    rec, cell, cfg = s.rec, s.cell, config
    why = per_cell.skip_reason(
        enabled=cfg.accuracy,
        task=cell.task,
        dynamic=cell.shape.dynamic,
        weights=s.mat.weights,
        user_data=cfg.data is not None,
        remedy=bool(s.attempt.export_options),
    ) or per_cell.data_problem(cell.task, cfg.data)
    if why:
        set_null(rec, "accuracy", why)
        return True
    h, w = cell.shape.height, cell.shape.width
    t0 = time.perf_counter()
    try:
        split = per_cell.split_for(cell, data, cfg.data, cfg.accuracy_images)
        layout = references.layout(s.mat, cell, h, w, s.attempt.export_options)
        facts = per_cell.model_facts(cell, s.mat.checkpoint, s.mat.sha256, layout)
        infer = per_cell.runner_infer(s.runner)
        modes = corruptions().get(cell.backend)
        if modes:  # the corruption knob spoils what accuracy scores too
            plain = infer

            def infer(x):
                return corrupt(plain(x), modes, layout)[0]

        result = per_cell.score(infer, cell, split, facts, cell.batch)
        key = per_cell.reference_key(s.mat.sha256, cell.head, h, w, split.dataset, len(split))
        if cell.backend == "torch-eager" and cell.precision == "fp32" and not modes:
            accuracy_refs.setdefault(key, result)  # this cell is the PyTorch fp32 reference
        if key not in accuracy_refs:
            ref_infer = torch_reference(s.mat.checkpoint, cell.head, h, w)
            accuracy_refs[key] = per_cell.score(ref_infer, cell, split, facts, 1)
        section = per_cell.record(result, accuracy_refs[key], cell.task)
    except Exception as e:  # a failed accuracy pass is a null with its reason, never a lost cell
        log.exception("accuracy pass of %s failed", s.attempt.cell_id)
        set_null(rec, "accuracy", f"accuracy pass failed: {type(e).__name__}: {first_line(str(e))}")
        return True
    section["tier"] = per_cell.tier(section["ratio"])
    section["seconds"] = round(time.perf_counter() - t0, 3)
    rec.accuracy = section
    if section["map50"] is None:
        set_null(rec, "accuracy.map50", "classification has no mAP: its figures are top1 and top5")
    if section["ratio"] is None:
        set_null(rec, "accuracy.ratio", f"the reference's {section['metric']} is 0: no ratio")
        set_null(rec, "accuracy.tier", "no ratio to the reference")
    progress(
        f"{s.attempt.cell_id}: {section['metric']} {section['map50_95']:.3f} on {section['images']} images"
        + (f", {section['ratio']:.3f} of the reference ({section['tier']})" if section["ratio"] else "")
    )
    return True
