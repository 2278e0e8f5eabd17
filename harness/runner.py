"""Run one cell end to end: export (isolated, cached), load, first inference, warm-up, timed rounds, parity.

Every path out of `run_cell` writes exactly one record, whatever failed, so a crash in one cell never loses the
records of the others.
"""

from __future__ import annotations

import logging
import math
import os
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from harness import backends
from harness.backends.base import ExportRequest
from harness.backends.ultralytics_export import artifact_bytes
from harness.cell import Cell
from harness.exportcache import ExportCache, cache_key
from harness.inputs import letterboxed
from harness.isolate import ExportOutcome, run_export
from harness.memory import MB, Sampler, rss_probe
from harness.models import Materialized, ModelSource, materialize
from harness.parity import compare
from harness.records import Latency, RecordWriter, new_record, set_null

log = logging.getLogger(__name__)

SLOWDOWN_ENV = "YOLO26_BENCH_SLOWDOWN"

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

    @property
    def run_dir(self) -> Path:
        return Path(self.results_dir) / self.run_id

    def plan_rounds(self, estimate_ms: float) -> int:
        if self.rounds is not None:
            return self.rounds
        n = math.ceil(self.min_time_s * 1000.0 / max(estimate_ms, 1e-3))
        return max(self.min_rounds, min(self.max_rounds, n))


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
        self.last_runner = None

    # -- inputs shared by cells ---------------------------------------------------------------------------------
    def materialize(self, cell: Cell) -> Materialized:
        key = (cell.size, cell.task)
        if key not in self._materialized:
            src = ModelSource(cell.size, cell.task, self.config.weights_dir, self.config.seed)
            self._materialized[key] = materialize(src, self.config.cache_dir)
        return self._materialized[key]

    def reference(self, mat: Materialized, cell: Cell, height: int, width: int) -> list[np.ndarray]:
        """PyTorch fp32 eager outputs on the cell's input (memoised for the run; a few are kept)."""
        import torch

        from harness.backends.torch_eager import flatten_outputs
        from harness.models import prepared_model

        key = (mat.sha256, cell.head, height, width, cell.batch)
        if key not in self._references:
            if len(self._references) >= 8:
                self._references.pop(next(iter(self._references)))
            model = prepared_model(mat.checkpoint, cell.head, (height, width))
            with torch.inference_mode():
                y = model(torch.from_numpy(letterboxed(height, width, cell.batch).copy()))
            self._references[key] = flatten_outputs(y)
        return self._references[key]

    # -- the cell -----------------------------------------------------------------------------------------------
    def run_cell(self, cell: Cell, timer: Timer = loop_timer, skip_reason: str | None = None) -> dict:
        """Run `cell` and write its record. `skip_reason` (an exclusion) skips without touching the backend."""
        rec = new_record(self.config.run_id, cell, weights="unknown")
        rec["started_at"] = datetime.now(UTC).isoformat(timespec="seconds")
        t_cell = time.perf_counter()
        log_path = self.config.run_dir / "logs" / f"{cell.id}.log"
        try:
            self._run(cell, rec, timer, skip_reason, log_path)
        except Exception as e:  # a harness bug in one cell must not lose the run
            log.exception("cell %s crashed in the harness", cell.id)
            rec["status"] = "crashed" if rec.get("status") in (None, "ok") else rec["status"]
            rec["reason"] = f"harness error: {type(e).__name__}: {e}"
            with open(log_path, "a") as f:
                f.write(traceback.format_exc())
            rec["log"] = str(log_path.relative_to(self.config.run_dir))
        rec["duration_s"] = round(time.perf_counter() - t_cell, 3)
        self._fill_null_reasons(rec)
        self.writer.write(rec)
        return rec

    def _skip(self, rec: dict, reason: str) -> None:
        rec["status"] = "skipped"
        rec["reason"] = reason

    def _run(self, cell: Cell, rec: dict, timer: Timer, skip_reason: str | None, log_path: Path) -> None:
        if skip_reason:
            return self._skip(rec, skip_reason)
        try:
            backend = backends.get(cell.backend)
        except KeyError as e:
            return self._skip(rec, str(e))
        reason = backend.unsupported(cell) or backend.probe(cell.device)
        if reason:
            return self._skip(rec, reason)

        mat = self.materialize(cell)
        rec["weights"] = mat.weights
        h, w = cell.shape.height, cell.shape.width

        # Export (isolated process, cached on disk)
        artifact = mat.checkpoint
        export_info: dict = {}
        if backend.exports:
            outcome = self._export(backend, cell, mat, log_path)
            rec["cache_hit"] = outcome.wall_s is None
            rec["export_s"] = outcome.export_s
            if outcome.log and Path(outcome.log).exists():
                rec["log"] = str(Path(outcome.log).relative_to(self.config.run_dir))
            if outcome.status != "ok":
                rec["status"] = outcome.status
                rec["reason"] = _first_line(outcome.message) or outcome.status
                rec["failure"] = _failure(outcome, stage="export")
                self.progress(f"{cell.id}: {outcome.status}: {rec['reason']}")
                return None
            artifact = Path(outcome.artifact)
            export_info = outcome.info
            if "ops" in export_info:
                rec["ops"] = export_info["ops"]
        rec["artifact"] = str(artifact)
        rec["artifact_bytes"] = artifact_bytes(artifact)

        x = letterboxed(h, w, cell.batch)
        reference = self.reference(mat, cell, h, w)

        sampler = Sampler([rss_probe()]).start()
        try:
            t0 = time.perf_counter()
            try:
                runner = backend.load(artifact, cell, export_info)
            except Exception as e:
                return self._fail(rec, "load_failed", "load", e, log_path)
            rec["load_s"] = time.perf_counter() - t0
            self.last_runner = runner  # kept for side-by-side benchmarks of the harness against a bare loop
            rec["precision_executed"] = runner.precision_executed
            try:
                prepared = runner.prepare(x)
                t0 = time.perf_counter_ns()
                result = runner.run(prepared)
                runner.synchronize()
                rec["first_run_ms"] = (time.perf_counter_ns() - t0) / 1e6
                outputs = runner.outputs(result)
            except Exception as e:
                return self._fail(rec, "run_failed", "run", e, log_path)

            parity = compare(outputs, reference, cell.head, cell.precision)
            rec["parity"] = parity.to_dict()

            factor = self.slowdown.get(cell.backend, 1.0)

            def call():
                t = time.perf_counter()
                runner.run(prepared)
                runner.synchronize()
                if factor > 1.0:  # testing knob: stretch each timed call (YOLO26_BENCH_SLOWDOWN)
                    time.sleep((time.perf_counter() - t) * (factor - 1.0))

            try:
                warm = loop_timer(call, max(1, self.config.warmup))
                rounds = self.config.plan_rounds(min(warm))
                self.progress(
                    f"{cell.id}: load {rec['load_s']:.2f}s, first run {rec['first_run_ms']:.1f} ms, "
                    f"timing {rounds} rounds"
                )
                samples = timer(call, rounds)
            except Exception as e:
                return self._fail(rec, "run_failed", "run", e, log_path)
            runner.close()
        finally:
            sampler.stop()

        rss = sampler.get("host_rss")
        rec["memory"] = {
            "host_peak_rss_mb": rss.peak / MB if rss.peak is not None else None,
            "host_peak_delta_mb": (rss.peak - rss.baseline) / MB if rss.peak is not None else None,
            "device_peak_used_mb": None,
            "device_peak_process_mb": None,
            "torch_max_allocated_mb": None,
            "torch_max_reserved_mb": None,
            "energy_per_inference_j": None,
            "source": f"psutil RSS sampled at {sampler.hz:.0f} Hz over load and timed rounds ({sampler.samples} samples)",
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
        if parity.ok:
            rec["status"] = "ok"
        else:
            rec["status"] = "parity_failed"
            rec["reason"] = f"rel_l2 {parity.rel_l2:.3g} exceeds the {cell.precision} tolerance {parity.tolerance:g}"
            rec["failure"] = {
                "class": "numerical_mismatch",
                "stage": "parity",
                "message": rec["reason"],
                "ops": [],
                "guards": [],
                "suggested_fix": None,
                "exception_type": None,
                "log": None,
            }
        p50 = rec["latency_ms"]["p50"] if rec["latency_ms"] else float("nan")
        self.progress(f"{cell.id}: {rec['status']} p50 {p50:.2f} ms, rel_l2 {parity.rel_l2:.2e}")
        return None

    def _export(self, backend, cell: Cell, mat: Materialized, log_path: Path) -> ExportOutcome:
        fields = {
            "backend": cell.backend,
            "device": cell.device,
            "weights_sha256": mat.sha256,
            "task": cell.task,
            "head": cell.head,
            "shape": cell.shape.label,
            "batch": cell.batch,
            "precision": cell.precision,
        }
        key = cache_key(fields, backend.library)
        name = f"yolo26{cell.size}-{cell.task}-{cell.head}-{cell.backend}-{cell.device}-{cell.shape.label}-b{cell.batch}-{cell.precision}"
        entry = self.cache.entry_dir(name, key)
        if self.config.refresh_cache:
            self.cache.clear(entry)
        cached = self.cache.lookup(entry)
        if cached is not None:
            self.progress(f"{cell.id}: export cache hit ({entry.name})")
            log_path.parent.mkdir(parents=True, exist_ok=True)
            with open(log_path, "a") as f:
                f.write(f"=== export cache hit: {entry} (original export log: {cached.log})\n")
            return ExportOutcome(**{**cached.__dict__, "wall_s": None, "log": str(log_path)})
        self.cache.clear(entry)
        self.progress(f"{cell.id}: exporting ({cell.backend}) ...")
        req = ExportRequest(
            backend=cell.backend,
            device=cell.device,
            checkpoint=str(mat.checkpoint),
            size=cell.size,
            task=cell.task,
            head=cell.head,
            height=cell.shape.height,
            width=cell.shape.width,
            dynamic=cell.shape.dynamic,
            batch=cell.batch,
            precision=cell.precision,
            out_dir=str(entry),
        )
        outcome = run_export(req, log_path, self.config.export_timeout_s, self.config.export_memory_gb)
        self.cache.store(entry, outcome)
        self.progress(f"{cell.id}: export {outcome.status} in {outcome.wall_s:.1f}s")
        return outcome

    def _fail(self, rec: dict, status: str, stage: str, exc: BaseException, log_path: Path) -> None:
        tb = traceback.format_exc()
        with open(log_path, "a") as f:
            f.write(f"=== {stage} failed\n{tb}")
        rec["status"] = status
        rec["reason"] = _first_line(str(exc)) or type(exc).__name__
        rec["log"] = str(log_path.relative_to(self.config.run_dir))
        rec["failure"] = {
            "class": None,
            "stage": stage,
            "message": rec["reason"],
            "ops": [],
            "guards": [],
            "suggested_fix": None,
            "exception_type": f"{type(exc).__module__}.{type(exc).__qualname__}",
            "log": rec["log"],
        }
        self.progress(f"{rec['cell_id']}: {status}: {rec['reason']}")

    @staticmethod
    def _fill_null_reasons(rec: dict) -> None:
        """Every null measurement of a record that ran says why it is null."""
        nr = rec.setdefault("null_reasons", {})
        status = rec["status"]
        if status != "ok" and status != "parity_failed":
            for f in ("latency_ms", "samples_ms", "throughput_ips", "memory", "parity", "first_run_ms", "load_s"):
                if rec.get(f) is None:
                    nr.setdefault(f, f"cell did not run ({status})")
        if rec.get("export_s") is None and rec["status"] not in ("skipped",):
            nr.setdefault("export_s", "no export step (the backend runs the checkpoint)"
                          if rec.get("cache_hit") is None else "export did not finish")
        if rec.get("gflops") is None:
            nr.setdefault("gflops", "published GFLOPs exist for detect models only")
        mem = rec.get("memory")
        if mem:
            for k in ("device_peak_used_mb", "device_peak_process_mb", "energy_per_inference_j"):
                if mem.get(k) is None:
                    nr.setdefault(f"memory.{k}", f"not measured: {rec['device']} cell, NVML reads NVIDIA GPUs only")
            for k in ("torch_max_allocated_mb", "torch_max_reserved_mb"):
                if mem.get(k) is None:
                    nr.setdefault(f"memory.{k}", "torch CUDA allocator not used by this cell")


def _first_line(msg: str | None) -> str | None:
    if not msg:
        return None
    for line in str(msg).splitlines():
        if line.strip():
            return line.strip()[:500]
    return None


def _failure(outcome: ExportOutcome, stage: str) -> dict:
    return {
        "class": {"timeout": "timeout", "crashed": "crash"}.get(outcome.status),
        "stage": stage,
        "message": _first_line(outcome.message),
        "ops": [],
        "guards": [],
        "suggested_fix": None,
        "exception_type": outcome.exception_type,
        "signal": outcome.signal,
        "log": outcome.log,
    }
