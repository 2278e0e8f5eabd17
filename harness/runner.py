"""Run one cell end to end: export (isolated, cached), first run of a fresh artifact (isolated), load, first
inference, warm-up, timed rounds, parity; then the remedy ladder for failures and the shape sweep for dynamic cells.

Every attempt writes exactly one record as soon as it finishes, whatever failed, so a crash in one cell never loses
the records of the others.
"""

from __future__ import annotations

import inspect
import logging
import math
import os
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from harness import backends
from harness.axes import Shape
from harness.backends.base import ExportRequest
from harness.backends.ultralytics_export import artifact_bytes
from harness.cell import Cell
from harness.diagnosis_glue import failure_from_exception, failure_from_outcome, first_line, parity_failure
from harness.dynamic import DEFAULT_RANGE, SWEEP
from harness.exportcache import ExportCache, cache_key
from harness.gpumeasure import DeviceMeasure
from harness.inputs import letterboxed
from harness.isolate import ExportOutcome, run_export, run_probe
from harness.memory import MB, RssHighWater, Sampler, rss_probe
from harness.models import Materialized, ModelSource, materialize
from harness.parity import compare
from harness.records import FAILED_STATUSES, Latency, RecordWriter, new_record, set_null
from harness.remedies import Remedy, combined_change, matching, padded

log = logging.getLogger(__name__)

SLOWDOWN_ENV = "YOLO26_BENCH_SLOWDOWN"
MAX_REMEDY_CHAIN = 3

# A timer takes (call, rounds) and returns the duration of each round in milliseconds.
Timer = Callable[[Callable[[], object], int], list[float]]


def loop_timer(call: Callable[[], object], rounds: int) -> list[float]:
    """The plain timing loop: perf_counter_ns around each call."""
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        call()
        out.append((time.perf_counter_ns() - t0) / 1e6)
    return out


def slowdown_factors(env: str | None = None) -> dict[str, float]:
    """Parse YOLO26_BENCH_SLOWDOWN=`backend=factor[,backend=factor]` (a testing knob for the regression tracker)."""
    text = os.environ.get(SLOWDOWN_ENV, "") if env is None else env
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, factor = part.partition("=")
        try:
            f = float(factor)
        except ValueError:
            raise ValueError(f"{SLOWDOWN_ENV}: {part!r} is not backend=factor") from None
        if f < 1:
            raise ValueError(f"{SLOWDOWN_ENV}: factor {f} must be >= 1")
        out[name.strip()] = f
    return out


@dataclass(frozen=True)
class RunConfig:
    """Session-wide settings of a run."""

    run_id: str
    results_dir: Path
    cache_dir: Path
    weights_dir: Path | None = None
    seed: int = 0
    warmup: int = 2
    rounds: int | None = None  # None: as many as fit in min_time, within [min_rounds, max_rounds]
    min_time_s: float = 2.0
    min_rounds: int = 5
    max_rounds: int = 200
    export_timeout_s: float = 1200.0
    export_memory_gb: float | None = None
    refresh_cache: bool = False
    remedies: bool = True
    isolate_first_run: bool = True
    dynamic_range: tuple[int, int] = DEFAULT_RANGE
    sweep: tuple[int, ...] = SWEEP

    @property
    def run_dir(self) -> Path:
        return Path(self.results_dir) / self.run_id

    def plan_rounds(self, estimate_ms: float) -> int:
        if self.rounds is not None:
            return self.rounds
        n = math.ceil(self.min_time_s * 1000.0 / max(estimate_ms, 1e-3))
        return max(self.min_rounds, min(self.max_rounds, n))


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


class CellRunner:
    """Runs cells and writes their records; holds the per-run caches (checkpoints, references)."""

    def __init__(self, config: RunConfig, progress: Callable[[str], None] | None = None) -> None:
        self.config = config
        self.progress = progress or (lambda msg: log.info("%s", msg))
        config.run_dir.mkdir(parents=True, exist_ok=True)
        (config.run_dir / "logs").mkdir(exist_ok=True)
        self.writer = RecordWriter(config.run_dir)
        self.cache = ExportCache(config.cache_dir)
        self._materialized: dict[tuple, Materialized] = {}
        self._references: dict[tuple, list[np.ndarray]] = {}
        self.slowdown = slowdown_factors()
        self.last_runner = None  # kept for side-by-side benchmarks of the harness against a bare loop

    # -- public -------------------------------------------------------------------------------------------------
    def run_cell(self, cell: Cell, timer: Timer = loop_timer, skip_reason: str | None = None) -> dict:
        """Run `cell` (and its remedies or shape sweep); return the cell's own record."""
        return self.run_cell_all(cell, timer, skip_reason)[0]

    def run_cell_all(
        self, cell: Cell, timer: Timer = loop_timer, skip_reason: str | None = None
    ) -> list[dict]:
        """Every record `cell` produces: its own first, then remedy attempts and dynamic sweep shapes."""
        if cell.shape.dynamic and not skip_reason:
            return self._dynamic(cell, timer)
        rec = self._attempt(Attempt(cell, cell.id, skip_reason=skip_reason), timer)
        recs = [rec]
        if rec["status"] in FAILED_STATUSES and self.config.remedies:
            recs += self._remedies(cell, rec, timer, dynamic=False)
        return recs

    # -- shared inputs ------------------------------------------------------------------------------------------
    def materialize(self, cell: Cell) -> Materialized:
        key = (cell.size, cell.task)
        if key not in self._materialized:
            src = ModelSource(cell.size, cell.task, self.config.weights_dir, self.config.seed)
            self._materialized[key] = materialize(src, self.config.cache_dir)
        return self._materialized[key]

    def reference(
        self, mat: Materialized, cell: Cell, height: int, width: int, options: dict
    ) -> list[np.ndarray]:
        """PyTorch fp32 eager outputs on the cell's input (memoised for the run; a few are kept)."""
        import torch

        from harness.backends.torch_eager import flatten_outputs
        from harness.models import prepared_model

        variant = options.get("remedy")
        key = (mat.sha256, cell.head, height, width, cell.batch, variant)
        if key not in self._references:
            if len(self._references) >= 8:
                self._references.pop(next(iter(self._references)))
            model = prepared_model(mat.checkpoint, cell.head, (height, width))
            if variant == "backbone-only":
                from harness.backends.executorch_cuda import backbone_only

                model = backbone_only(model)
            with torch.inference_mode():
                y = model(torch.from_numpy(letterboxed(height, width, cell.batch).copy()))
            self._references[key] = flatten_outputs(y)
        return self._references[key]

    # -- one attempt --------------------------------------------------------------------------------------------
    def _attempt(self, a: Attempt, timer: Timer, prebuilt: ExportOutcome | None = None) -> dict:
        rec = new_record(self.config.run_id, a.cell, weights="unknown")
        rec.update(cell_id=a.cell_id, remedy=a.remedy, remedy_of=a.remedy_of)
        rec["started_at"] = datetime.now(UTC).isoformat(timespec="seconds")
        t_cell = time.perf_counter()
        log_path = self.config.run_dir / "logs" / f"{a.cell_id}.log"
        try:
            self._run(a, rec, timer, log_path, prebuilt)
        except Exception as e:  # a harness bug in one cell must not lose the run
            log.exception("cell %s crashed in the harness", a.cell_id)
            rec["status"] = "crashed"
            rec["reason"] = f"harness error: {type(e).__name__}: {e}"
            with open(log_path, "a") as f:
                f.write(traceback.format_exc())
            rec["log"] = self._rel(log_path)
            rec["failure"] = failure_from_exception(e, "harness", rec["log"])
        return self._finish(rec, t_cell)

    def _finish(self, rec: dict, t_cell: float) -> dict:
        rec["duration_s"] = round(time.perf_counter() - t_cell, 3)
        fill_null_reasons(rec)
        self.writer.write(rec)
        return rec

    def _rel(self, path: Path) -> str:
        return str(Path(path).relative_to(self.config.run_dir))

    def _check(self, cell: Cell, rec: dict, skip_reason: str | None):
        """The backend, or None after marking the record skipped with the reason."""
        if skip_reason:
            rec.update(status="skipped", reason=skip_reason)
            return None
        try:
            backend = backends.get(cell.backend)
        except KeyError as e:
            rec.update(status="skipped", reason=str(e))
            return None
        reason = backend.unsupported(cell) or backend.probe(cell.device)
        if reason:
            rec.update(status="skipped", reason=reason)
            return None
        return backend

    def _record_failure(self, rec: dict, outcome: ExportOutcome, stage: str) -> None:
        rec["status"] = outcome.status
        rec["reason"] = first_line(outcome.message) or outcome.status
        rec["log"] = self._rel(outcome.log) if outcome.log else rec["log"]
        rec["failure"] = failure_from_outcome(outcome, stage, rec["log"])
        self.progress(f"{rec['cell_id']}: {outcome.status} ({rec['failure']['class']}): {rec['reason']}")

    def _run(
        self, a: Attempt, rec: dict, timer: Timer, log_path: Path, prebuilt: ExportOutcome | None
    ) -> None:
        cell = a.cell
        backend = self._check(cell, rec, a.skip_reason)
        if backend is None:
            return
        mat = self.materialize(cell)
        rec["weights"] = mat.weights
        h, w = cell.shape.height, cell.shape.width

        artifact, export_info, fresh = mat.checkpoint, {}, False
        if backend.exports:
            outcome = prebuilt or self._export(
                backend, a.export_cell or cell, mat, log_path, a.export_options
            )
            rec["cache_hit"] = prebuilt is None and outcome.wall_s is None
            rec["export_s"] = outcome.export_s
            rec["log"] = self._rel(log_path)
            if outcome.status != "ok":
                rec["log"] = self._rel(outcome.log) if outcome.log else rec["log"]
                return self._record_failure(rec, outcome, "export")
            artifact, export_info = Path(outcome.artifact), outcome.info
            fresh = prebuilt is not None or outcome.wall_s is not None
            if "ops" in export_info:
                rec["ops"] = export_info["ops"]
        rec["artifact"] = str(artifact)
        rec["artifact_bytes"] = artifact_bytes(artifact)
        if getattr(backend, "export_only", False):
            rec["status"] = "exported"
            rec["reason"] = getattr(backend, "export_only_reason", None) or (
                f"export-only target: no {cell.backend} runtime on this host"
            )
            self.progress(f"{a.cell_id}: exported ({rec['artifact_bytes'] / MB:.1f} MB)")
            return

        if fresh and self.config.isolate_first_run:
            # The first load and run of a fresh artifact happens in a separate process: a runtime that aborts or
            # segfaults on it is recorded instead of taking the run down.
            probe = run_probe(
                cell,
                str(artifact),
                export_info,
                h,
                w,
                log_path.parent / f"{a.cell_id}.probe",
                log_path,
                self.config.export_timeout_s,
                self.config.export_memory_gb,
            )
            if probe.status != "ok":
                return self._record_failure(rec, probe, "run")

        x = letterboxed(h, w, cell.batch)
        gpu = DeviceMeasure(cell) if cell.device == "cuda" else None
        # Host peak RSS from the kernel's high-water mark; a sampling thread only where something must be sampled
        # (NVML on GPU cells, or a kernel that cannot reset the mark), since it competes with CPU runtimes.
        hwm = RssHighWater().start()
        sampled = [*(gpu.probes() if gpu else []), *([] if hwm.available else [rss_probe()])]
        sampler = Sampler(sampled).start()
        try:
            t0 = time.perf_counter()
            try:
                runner = backend.load(artifact, cell, export_info)
            except Exception as e:
                return self._fail(rec, "load_failed", "load", e, log_path)
            rec["load_s"] = time.perf_counter() - t0
            self.last_runner = runner
            rec["precision_executed"] = runner.precision_executed
            if getattr(runner, "compile_s", None) is not None:
                rec["compile_s"] = runner.compile_s
            try:
                prepared = runner.prepare(x)
                t0 = time.perf_counter_ns()
                result = runner.run(prepared)
                runner.synchronize()
                rec["first_run_ms"] = (time.perf_counter_ns() - t0) / 1e6
                outputs = runner.outputs(result)
            except Exception as e:
                return self._fail(rec, "run_failed", "run", e, log_path)

            factor = self.slowdown.get(cell.backend, 1.0)
            t_run = [0.0]

            def run_once():
                t_run[0] = time.perf_counter()
                runner.run(prepared)

            def wait():
                runner.synchronize()
                if factor > 1.0:  # testing knob: stretch each timed call (YOLO26_BENCH_SLOWDOWN)
                    time.sleep((time.perf_counter() - t_run[0]) * (factor - 1.0))

            if gpu is not None:
                call = gpu.wrap(run_once, wait, torch_stream=getattr(runner, "torch_stream", False))
            else:

                def call():
                    run_once()
                    wait()

            try:
                warm = loop_timer(call, max(1, self.config.warmup))
                rounds = self.config.plan_rounds(min(warm))
                self.progress(
                    f"{a.cell_id}: load {rec['load_s']:.2f}s, first run {rec['first_run_ms']:.1f} ms, "
                    f"timing {rounds} rounds"
                )
                if gpu is not None:
                    gpu.start_timed()
                samples = timer(call, rounds)
            except Exception as e:
                return self._fail(rec, "run_failed", "run", e, log_path)
            runner.close()
        finally:
            sampler.stop()
            hwm.stop()

        self._fill_measurements(rec, cell, runner, samples, sampler, hwm, factor)
        if gpu is not None:
            gpu.fill(rec, sampler, len(samples))
        try:
            reference = self.reference(mat, cell, h, w, a.export_options)
        except Exception as e:
            rec["status"] = "parity_failed"
            rec["reason"] = f"no PyTorch reference at {h}x{w}: {first_line(str(e))}"
            set_null(rec, "parity", rec["reason"])
            rec["failure"] = failure_from_exception(e, "parity", None)
            return None
        # backbone-only outputs are the raw head's layout whatever the cell's head: compare them element-wise
        head = "raw" if a.export_options.get("remedy") == "backbone-only" else cell.head
        parity = compare(outputs, reference, head, cell.precision)
        rec["parity"] = parity.to_dict()
        if parity.ok:
            rec["status"] = "ok"
        else:
            rec["status"] = "parity_failed"
            rec["reason"] = (
                f"rel_l2 {parity.rel_l2:.3g} exceeds the {cell.precision} tolerance {parity.tolerance:g}"
            )
            rec["failure"] = parity_failure(rec["reason"])
        p50 = rec["latency_ms"]["p50"] if rec["latency_ms"] else float("nan")
        self.progress(f"{a.cell_id}: {rec['status']} p50 {p50:.2f} ms, rel_l2 {parity.rel_l2:.2e}")
        return None

    def _fill_measurements(self, rec, cell, runner, samples, sampler, hwm, factor) -> None:
        if hwm.available:
            rss = hwm
            source = "kernel peak-RSS high-water mark (VmHWM, reset at cell start) over load and timed rounds"
        else:
            rss = sampler.get("host_rss")
            source = (
                f"psutil RSS sampled at {sampler.hz:.0f} Hz over load and timed rounds "
                f"({sampler.samples} samples)"
            )
        rec["memory"] = {
            "host_peak_rss_mb": rss.peak / MB if rss.peak is not None else None,
            "host_peak_delta_mb": (rss.peak - rss.baseline) / MB if rss.peak is not None else None,
            "device_peak_used_mb": None,
            "device_peak_process_mb": None,
            "torch_max_allocated_mb": None,
            "torch_max_reserved_mb": None,
            "energy_per_inference_j": None,
            "source": source,
        }
        if samples:
            lat = Latency.from_samples(samples, runner.timing_scope)
            rec["latency_ms"] = lat.to_dict()
            rec["samples_ms"] = [round(s, 4) for s in samples]
            rec["throughput_ips"] = cell.batch * 1000.0 / lat.p50
        else:
            set_null(rec, "latency_ms", "no timed rounds ran (benchmarking disabled)")
        if factor > 1.0:
            rec["reason"] = f"latency artificially stretched x{factor} by {SLOWDOWN_ENV}"

    def _fail(self, rec: dict, status: str, stage: str, exc: BaseException, log_path: Path) -> None:
        with open(log_path, "a") as f:
            f.write(f"=== {stage} failed\n{traceback.format_exc()}")
        rec["status"] = status
        rec["reason"] = first_line(str(exc)) or type(exc).__name__
        rec["log"] = self._rel(log_path)
        rec["failure"] = failure_from_exception(exc, stage, rec["log"])
        self.progress(f"{rec['cell_id']}: {status}: {rec['reason']}")

    # -- export -------------------------------------------------------------------------------------------------
    def _export(self, backend, cell: Cell, mat: Materialized, log_path: Path, options: dict) -> ExportOutcome:
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
        key = cache_key(fields, backend.library, inspect.getsourcefile(type(backend)))
        suffix = "".join(f"-{k}" for k in sorted(options) if k != "dynamic_range")
        name = f"{cell.id}{suffix}"
        entry = self.cache.entry_dir(name, key)
        if self.config.refresh_cache:
            self.cache.clear(entry)
        cached = self.cache.lookup(entry)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        if cached is not None:
            self.progress(f"{cell.id}: export cache hit ({entry.name})")
            with open(log_path, "a") as f:
                f.write(f"=== export cache hit: {entry} (original export log: {cached.log})\n")
                if cached.traceback:
                    f.write(cached.traceback)
            return ExportOutcome(**{**cached.__dict__, "wall_s": None, "log": str(log_path)})
        self.cache.clear(entry)
        self.progress(f"{cell.id}: exporting ({cell.backend}{' ' + str(options) if options else ''}) ...")
        req = ExportRequest(
            backend=cell.backend,
            device=cell.device,
            checkpoint=str(mat.checkpoint),
            size=cell.size,
            task=cell.task,
            head=cell.head,
            height=cell.shape.height or max(options.get("dynamic_range", DEFAULT_RANGE)) // 2,
            width=cell.shape.width or max(options.get("dynamic_range", DEFAULT_RANGE)) // 2,
            dynamic=cell.shape.dynamic,
            batch=cell.batch,
            precision=cell.precision,
            out_dir=str(entry),
            options=options,
        )
        outcome = run_export(req, log_path, self.config.export_timeout_s, self.config.export_memory_gb)
        self.cache.store(entry, outcome)
        self.progress(f"{cell.id}: export {outcome.status} in {outcome.wall_s:.1f}s")
        return outcome

    # -- remedies and the dynamic probe -------------------------------------------------------------------------
    def _next_remedy(self, cell: Cell, applied: list[Remedy], failed: dict, dynamic: bool) -> Remedy | None:
        """The first remedy of the ladder that matches this failure and is not applied yet."""
        f = failed.get("failure") or {}
        target = self._remedy_attempt(cell, applied, "").cell if applied else cell
        names = {r.name for r in applied}
        return next(
            (
                r
                for r in matching(target, f.get("class"), dynamic, f.get("message") or failed.get("reason"))
                if r.name not in names
            ),
            None,
        )

    def _remedies(self, cell: Cell, failed: dict, timer: Timer, dynamic: bool) -> list[dict]:
        """Apply matching remedies cumulatively until an attempt works; each attempt is its own record."""
        out: list[dict] = []
        applied: list[Remedy] = []
        current = failed
        while len(applied) < MAX_REMEDY_CHAIN:
            remedy = self._next_remedy(cell, applied, current, dynamic)
            if remedy is None:
                break
            applied.append(remedy)
            rec = self._attempt(self._remedy_attempt(cell, applied, failed["cell_id"]), timer)
            self.progress(f"{failed['cell_id']}: remedy {rec['remedy']}: {rec['status']}")
            out.append(rec)
            if rec["status"] == "ok":
                break
            current = rec
        return out

    @staticmethod
    def _remedy_attempt(cell: Cell, remedies: list[Remedy], remedy_of: str) -> Attempt:
        change = combined_change(remedies)
        target = cell
        if "head" in change:
            target = target.with_(head=change["head"])
        if "pad_to" in change:
            m = change["pad_to"]
            target = target.with_(
                shape=Shape(padded(cell.shape.height, m), padded(cell.shape.width, m), cell.shape.dynamic)
            )
        name = "+".join(r.name for r in remedies)
        return Attempt(
            target,
            f"{remedy_of}+{name}",
            remedy=name,
            remedy_of=remedy_of,
            export_options=dict(change["export_options"]),
        )

    def _dynamic(self, cell: Cell, timer: Timer) -> list[dict]:
        """Export once with dynamic H/W over the range, then run that one artifact over the shape sweep.

        When the dynamic export fails, matching remedies (32*Dim, raw head, ...) are applied cumulatively, and
        the first remedied artifact that exports is swept instead.
        """
        rec = new_record(self.config.run_id, cell, weights="unknown")
        rec["started_at"] = datetime.now(UTC).isoformat(timespec="seconds")
        t_cell = time.perf_counter()
        log_path = self.config.run_dir / "logs" / f"{cell.id}.log"
        backend = self._check(cell, rec, None)
        if backend is None:
            return [self._finish(rec, t_cell)]
        mat = self.materialize(cell)
        rec["weights"] = mat.weights
        options = {"dynamic_range": list(self.config.dynamic_range)}
        outcome = self._export(backend, cell, mat, log_path, options)
        rec.update(export_s=outcome.export_s, cache_hit=outcome.wall_s is None, log=self._rel(log_path))
        if outcome.status == "ok":
            sweep = self._sweep(cell, outcome, options, timer, None, None)
            self._summarise_sweep(rec, outcome, sweep)
            return [self._finish(rec, t_cell), *sweep]
        self._record_failure(rec, outcome, "export")
        recs = [self._finish(rec, t_cell)]
        applied: list[Remedy] = []
        current = rec
        while self.config.remedies and len(applied) < MAX_REMEDY_CHAIN:
            remedy = self._next_remedy(cell, applied, current, dynamic=True)
            if remedy is None:
                break
            applied.append(remedy)
            a = self._remedy_attempt(cell, applied, cell.id)
            opts = {**options, **a.export_options}
            r_rec = new_record(self.config.run_id, a.cell, weights=mat.weights)
            r_rec.update(
                cell_id=a.cell_id,
                remedy=a.remedy,
                remedy_of=cell.id,
                started_at=datetime.now(UTC).isoformat(timespec="seconds"),
            )
            t_r = time.perf_counter()
            r_log = self.config.run_dir / "logs" / f"{a.cell_id}.log"
            r_out = self._export(backend, a.cell, mat, r_log, opts)
            r_rec.update(export_s=r_out.export_s, cache_hit=r_out.wall_s is None, log=self._rel(r_log))
            if r_out.status != "ok":
                self._record_failure(r_rec, r_out, "export")
                recs.append(self._finish(r_rec, t_r))
                current = r_rec
                continue
            sweep = self._sweep(a.cell, r_out, opts, timer, a.remedy, cell.id)
            self._summarise_sweep(r_rec, r_out, sweep)
            recs += [self._finish(r_rec, t_r), *sweep]
            break
        return recs

    def _sweep(
        self,
        cell: Cell,
        outcome: ExportOutcome,
        options: dict,
        timer: Timer,
        remedy: str | None,
        remedy_of: str | None,
    ) -> list[dict]:
        """Run one dynamic artifact at each sweep shape; a shape that is not a multiple of 32 and fails is
        retried letterbox-padded to the next multiple of 32."""
        recs = []
        for s in self.config.sweep:
            target = cell.with_(shape=Shape(s, s, dynamic=True))
            rid = target.id + (f"+{remedy}" if remedy else "")
            a = Attempt(
                target, rid, remedy=remedy, remedy_of=remedy_of, export_options=options, export_cell=cell
            )
            rec = self._attempt(a, timer, prebuilt=outcome)
            rec["_sweep"] = (s, rec["status"], None)
            recs.append(rec)
            if rec["status"] in FAILED_STATUSES and self.config.remedies and not target.shape.multiple_of_32:
                f = rec.get("failure") or {}
                pad = next(
                    (
                        r
                        for r in matching(target, f.get("class"), True, f.get("message"))
                        if "pad_to" in r.change
                    ),
                    None,
                )
                if pad is not None:
                    pa = self._remedy_attempt(target, [pad], rid)
                    pa.remedy = f"{remedy}+{pad.name}" if remedy else pad.name
                    pa.remedy_of = rid
                    pa.export_options, pa.export_cell = options, cell
                    padded_rec = self._attempt(pa, timer, prebuilt=outcome)
                    recs.append(padded_rec)
                    rec["_sweep"] = (s, padded_rec["status"], f"padded to {padded_rec['height']}")
        return recs

    @staticmethod
    def _summarise_sweep(rec: dict, outcome: ExportOutcome, sweep: list[dict]) -> None:
        """The dynamic cell's own record: ok when every sweep shape ran (directly, or letterbox-padded)."""
        rec["artifact"] = outcome.artifact
        rec["artifact_bytes"] = artifact_bytes(Path(outcome.artifact)) if outcome.artifact else None
        if "ops" in outcome.info:
            rec["ops"] = outcome.info["ops"]
        shapes = [r.pop("_sweep") for r in sweep if "_sweep" in r]
        parts = [f"{s}: {st}{f' ({via})' if via else ''}" for s, st, via in shapes]
        rec["reason"] = "dynamic artifact swept over " + ", ".join(parts)
        failed = [s for s, st, _ in shapes if st != "ok"]
        rec["status"] = "ok" if not failed else "run_failed"
        if failed:
            first = next(r for r in sweep if r["status"] != "ok")
            rec["failure"] = dict(
                first.get("failure") or {}, message=f"failed at {failed}: {first['reason']}"
            )
        set_null(rec, "latency_ms", "dynamic probe: latency is in the per-shape sweep records")


def fill_null_reasons(rec: dict) -> None:
    """Every null measurement of a record says why it is null."""
    nr = rec.setdefault("null_reasons", {})
    status = rec["status"]
    if status not in ("ok", "parity_failed"):
        why = (
            f"cell did not run ({status})"
            if status != "exported"
            else "export-only target: nothing runs here"
        )
        for f in ("latency_ms", "samples_ms", "throughput_ips", "memory", "parity", "first_run_ms", "load_s"):
            if rec.get(f) is None:
                nr.setdefault(f, why)
    if rec.get("export_s") is None and status != "skipped":
        nr.setdefault(
            "export_s",
            "no export step (the backend runs the checkpoint)"
            if rec.get("cache_hit") is None
            else "export did not finish",
        )
    if rec.get("gflops") is None:
        nr.setdefault("gflops", "published GFLOPs exist for detect models at static shapes only")
    if rec.get("device_latency_ms") is None and rec.get("latency_ms") is not None:
        nr.setdefault(
            "device_latency_ms", f"not measured: {rec['device']} cell (CUDA events time CUDA devices)"
        )
    if rec.get("gpu_snapshot") is None:
        nr.setdefault("gpu_snapshot", f"no NVIDIA GPU snapshot for a {rec['device']} cell")
    if rec.get("compile_s") is None and rec.get("status") == "ok":
        nr.setdefault("compile_s", "no JIT compile step in this backend")
    mem = rec.get("memory")
    if mem:
        for k in ("device_peak_used_mb", "device_peak_process_mb", "energy_per_inference_j"):
            if mem.get(k) is None:
                nr.setdefault(
                    f"memory.{k}", f"not measured: {rec['device']} cell, NVML reads NVIDIA GPUs only"
                )
        for k in ("torch_max_allocated_mb", "torch_max_reserved_mb"):
            if mem.get(k) is None:
                nr.setdefault(f"memory.{k}", "torch CUDA allocator not used by this cell")
