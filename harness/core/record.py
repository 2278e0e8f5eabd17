"""Result records: one JSON object per cell, appended to results/<run_id>/cells.jsonl as each cell finishes.

Records are plain JSON objects on disk (readable without this package). `CellRecord` is their typed form, every
field named and typed (`RECORD_FIELDS` lists them in the written order), with `STATUSES` the contract that the
report, diagnosis and history stages read. The cell's stages fill one (`new_record`, then attributes), readers
read its attributes; the one conversion between it and the JSON line is harness.core.record_codec. Writing and
reading the files is harness.core.results_dir's job (RecordWriter, read_records); older schema versions are
migrated by harness.core.migrate.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, fields
from typing import Any

from harness.core.axes import DEFAULT_FAMILY
from harness.core.version import SCHEMA_VERSION

STATUSES = (
    "ok",
    "export_failed",
    "load_failed",
    "run_failed",
    "parity_failed",
    "skipped",
    "timeout",
    "crashed",
    "exported",  # export-only targets: the artifact exists, no runtime for it here
    # a CUDA export traced on a CPU machine with fake CUDA tensors (harness.backends._shared.fake_cuda): it reached
    # the step that needs a GPU (traced) or failed before it (trace_failed); never a GPU measurement
    "traced",
    "trace_failed",
)
FAILED_STATUSES = ("export_failed", "load_failed", "run_failed", "parity_failed", "timeout", "crashed")
#: the statuses of an export traced on a fake CUDA device: neither a GPU export's nor a failure of one
TRACED_STATUSES = ("traced", "trace_failed")
#: the statuses the remedy ladder climbs from: a failure, or a fake-device trace that failed as a GPU export would
REMEDIABLE_STATUSES = (*FAILED_STATUSES, "trace_failed")


#: a percentile rests on at least this many timed rounds; below, it is null with the reason (p99 of 5 rounds would
#: be the maximum, reported as p99)
PERCENTILE_MIN_ROUNDS = {"p90": 20, "p99": 100}
#: a cell whose rounds scatter more than this (robust coefficient of variation: 1.4826 x MAD / median) is flagged
#: `unstable`: its p50 stands, but the machine (or the runtime) did not hold one speed while it was timed
UNSTABLE_SCATTER = 0.10


class _Stamped:
    """Room for what the codec notes of a record or section it read (harness.core.record_codec): the order its
    fields were written in, or the keys it lacked, so that writing it back gives the same line. The record types
    have slots: assigning a misspelt field is an AttributeError, never a figure silently left out of the line."""

    __slots__ = ("_absent_keys", "_field_order")


@dataclass(frozen=True, slots=True)
class Latency(_Stamped):
    """Latency statistics over timed rounds, in milliseconds.

    `p50_ci` is the p50's distribution-free 95% confidence interval, None below 6 rounds; p90 and p99 are None
    below PERCENTILE_MIN_ROUNDS (the record's null_reasons say so); `scatter` is the rounds' robust coefficient of
    variation and `unstable` flags scatter above UNSTABLE_SCATTER. Built from timed rounds by
    harness.measure.stats.latency_from_samples.
    """

    p50: float
    p90: float | None
    p99: float | None
    mean: float
    min: float
    max: float
    stdev: float
    rounds: int
    timing_scope: str
    p50_ci: list[float] | None = None
    scatter: float | None = None
    unstable: bool = False

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    def null_reasons(self) -> dict[str, str]:
        """Why each null figure is null (keys relative to the section)."""
        out = {}
        for name, need in PERCENTILE_MIN_ROUNDS.items():
            if getattr(self, name) is None:
                out[name] = (
                    f"too few timed rounds for this percentile: needs at least {need}, {self.rounds} timed"
                )
        if self.p50_ci is None:
            out["p50_ci"] = (
                f"too few timed rounds for a 95% interval of the p50 ({self.rounds} timed; needs 6)"
            )
        if self.scatter is None:
            out["scatter"] = f"one timed round: no spread ({self.rounds} timed)"
        return out


MIB = 2**20


@dataclass(slots=True)
class Memory(_Stamped):
    """The `memory` section, in MiB (2**20 bytes). Host figures come from the host tracker, device ones from the
    GPU memory tracker; a figure not measured stays None and gets a null reason from the tracker. The device figures
    keep harness.core.memory_order's relation (allocated <= reserved <= process peak) or are null with the reason."""

    host_peak_rss_mib: float | None = None
    host_peak_delta_mib: float | None = None
    host_baseline_mib: float | None = None
    device_peak_used_mib: float | None = None
    device_peak_process_mib: float | None = None
    torch_max_allocated_mib: float | None = None
    torch_max_reserved_mib: float | None = None
    #: the process's device memory before load, right after a trivial CUDA op, less torch's reserved memory then:
    #: the CUDA context (measured in the probe's fresh process; docs/gpu.md)
    device_context_mib: float | None = None
    #: the process's device memory at the end of warm-up beyond the context and torch's reserved memory: kernel
    #: modules and library handles and workspaces loaded on first use (cuDNN, cuBLAS, Triton) and whatever a runtime
    #: allocates outside torch's allocator (TensorRT, ONNX Runtime)
    device_outside_torch_mib: float | None = None
    source: str = ""
    #: where the host figures come from: "measured in this attempt", or the earlier run whose fresh-process
    #: measurement of the same artifact was reused (harness.execute.memory_cache)
    origin: str | None = None

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(slots=True)
class Energy(_Stamped):
    """The `energy` section: joules per inference over the timed rounds (gross: the whole GPU's counter; net: less
    the run's one idle baseline times the window), and how they were read."""

    per_inference_j: float | None = None
    window_s: float | None = None
    inferences: int | None = None
    source: str = ""
    #: per_inference_j less idle_power_w x window_s per inference (what the inferences added over idling)
    net_per_inference_j: float | None = None
    #: the run's idle baseline (W): read once before the first cell, after the GPU settled (env.json
    #: gpu_env.idle_baseline, harness.measure.energy.take_run_baseline)
    idle_power_w: float | None = None
    #: energy per inference by the difference of two windows with different inference counts, where the power
    #: drawn besides the inferences (idle, static, clocks held up) cancels (harness.measure.energy.difference)
    diff_per_inference_j: float | None = None
    #: the two windows (energy, seconds, inferences), the power besides the inferences they imply, the method
    diff: dict[str, Any] | None = None

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(slots=True)
class Roofline(_Stamped):
    """The `roofline` section: the model's work per inference and how close to the machine's measured limits the
    cell ran (harness.core.roofline computes it; docs/methodology.md, "How close to the machine").

    The work is counted on the fp32 PyTorch reference model of the exported graph (floating-point operations of
    the operators torch's FlopCounterMode counts; the elements an inference moves at least: weights once, the
    input, every counted operator's output written once), the bytes at the precision executed. The peaks are the
    run's env.json `peaks` (harness.measure.peaks), the compute peak the highest measured at that precision or a
    wider one. A figure that cannot be known is None, its reason under `null_reasons` (`roofline.<key>`).
    """

    #: floating-point operations of one call (the whole batch)
    flops: float | None = None
    #: bytes one call moves at least at the precision executed: weights once, the input, the activations
    bytes: float | None = None
    weight_bytes: float | None = None
    activation_bytes: float | None = None
    #: flops / bytes (FLOP per byte)
    intensity: float | None = None
    #: flops over the model-only p50 (FLOP/s)
    achieved_flops_s: float | None = None
    #: the precision whose peaks bound the cell (the executed one; int8 for `mixed`)
    precision: str | None = None
    #: the machine's compute peak for that precision (FLOP/s), and which measured figure it is
    peak_flops_s: float | None = None
    peak_of: str | None = None
    #: the machine's memory bandwidth (bytes/s)
    bandwidth_bytes_s: float | None = None
    #: the roofline bound: the lower of the compute peak and intensity x bandwidth (FLOP/s); "compute" or "memory"
    bound_flops_s: float | None = None
    bound_by: str | None = None
    share_of_peak: float | None = None
    share_of_bound: float | None = None
    #: how the work was counted, and where the peaks come from
    work_source: str = ""
    peaks_source: str = ""

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(slots=True)
class CellRecord(_Stamped):
    """One cell's record, every top-level field typed, in the order they are written to cells.jsonl.

    harness.core.record_codec is the one place that turns it into the JSON line and back (validating field names
    and types, migrating older schema versions). Sections whose shape is fixed are dataclasses (Latency, Memory,
    Energy); sections whose keys vary by backend, scenario or schema version stay dict[str, Any], with their shape
    described beside them. A figure not measured is None and `null_reasons` says why (dotted path -> reason).
    """

    schema_version: int
    run_id: str
    cell_id: str
    # the cell's axes (harness.core.cell.Cell.axes)
    model: str
    size: str
    task: str
    head: str
    backend: str
    device: str
    height: int | None  # None for a dynamic shape
    width: int | None
    dynamic: bool
    batch: int
    precision_requested: str
    precision_executed: str | None
    precision_source: str | None
    #: what the runtime reports of its precision; its keys vary by backend (OpenVINO: compute, data, by_layer_type,
    #: ...; ONNX: input, initializers, ...; ExecuTorch: portable, delegated, ...)
    precision_detail: dict[str, Any] | None
    threads: int | None
    threads_requested: int | None
    weights: str
    status: str  # one of STATUSES
    reason: str | None
    artifact: str | None
    artifact_bytes: int | None
    cache_hit: bool | None
    export_s: float | None
    export_origin: str | None
    compile_s: float | None
    load_s: float | None
    first_run_ms: float | None
    latency_ms: Latency | None
    samples_ms: list[float] | None
    #: how the rounds were timed: mode, with, trials, block_rounds, block_s, stop, elapsed_s (+ episodes, quiesce,
    #: session: the interleaved timing's id, harness.core.pairing)
    timing: dict[str, Any] | None
    #: the p50 relative to the reference runner's: reference, reference_backend, ratio, ratio_ci, trials, ...
    paired: dict[str, Any] | None
    #: the canary's ms before and after the cell: before, after, mean (+ readings)
    canary_ms: dict[str, Any] | None
    device_latency_ms: Latency | None
    device_samples_ms: list[float] | None
    throughput_ips: float | None
    latency_e2e_ms: Latency | None
    #: per-stage ms of the end-to-end pipeline: preprocess, h2d, model, d2h, postprocess
    stages_ms: dict[str, Any] | None
    #: the end-to-end check: image, decode, postprocess, input_path, pairs, stage_sum_ms, wall_ms, gap, check
    e2e: dict[str, Any] | None
    scenario: str | None
    #: one scenario's LoadGen result: scenario, metric, value, unit, valid, rule, p50, p90, p99, queries (+ reason)
    scenario_result: dict[str, Any] | None
    #: scenario name -> its result (the names and their order vary by run)
    scenarios: dict[str, Any] | None
    #: the profiler's operator table: source, ops, fallback_ops, fallback_time_share, total_ops
    operators: dict[str, Any] | None
    memory: Memory | None
    energy: Energy | None
    #: two shapes: v2 (reference, precision, method, metrics, thresholds, compared, failed, ok) and the older
    #: (max_abs, rel_l2, tolerance, compared, reference, ok)
    parity: dict[str, Any] | None
    #: map50_95, map50, reference_map50_95, ratio, images, dataset (+ postprocess), tier, seconds
    accuracy: dict[str, Any] | None
    #: int8 calibration data: images, dataset, split
    calibration: dict[str, Any] | None
    gflops: float | None
    #: NVML clocks, temperature, power, clock-event reasons (keys as the driver reports them)
    gpu_snapshot: dict[str, Any] | None
    #: class, stage, message, ops, guards, suggested_fix, exception_type (+ signal), log; fewer in synthetic runs
    failure: dict[str, Any] | None
    #: delegated and fallback operators: delegated, fallback, fallback_ops, delegated_subgraphs
    ops: dict[str, Any] | None
    remedy: str | None
    remedy_of: str | None
    log: str | None
    null_reasons: dict[str, str]
    started_at: str | None
    duration_s: float | None
    # -- OPTIONAL_FIELDS: only some records carry them (after the others); a None here is not written --
    #: the parity stage's outputs were corrupted on purpose (harness.measure.corrupt's environment variable)
    corrupted: list[str] | None = None
    #: a synthetic record (harness.history.synthetic), never a measurement
    synthetic: bool | None = None
    #: a merged run's machine and the run it came from (`python -m harness merge`; harness.core.results_dir's
    #: MACHINE_FIELD and SOURCE_RUN_FIELD)
    machine: str | None = None
    source_run_id: str | None = None
    #: a CUDA cell's host-bound verdict and what it rests on (harness.measure.host_bound); CUDA cells only
    host_bound: dict[str, Any] | None = None
    #: an ok cell's counted work and its share of the machine's measured peaks (harness.core.roofline); ok cells
    #: only (a record written before it has none: the report derives it, harness.decide.roofline)
    roofline: Roofline | None = None
    #: how the runtime loaded the artifact, where a loader remedy or the artifact's own libraries matter: the
    #: load options (the rung), a library preloaded and how, an AOTInductor wrapper's needed libraries
    #: (harness.backends._shared.libstdcxx); the cells whose load it describes only
    loader: dict[str, Any] | None = None
    #: an export traced on a fake CUDA device (status traced or trace_failed): label, device, target (the stated
    #: GPU's facts), stages (name, status, seconds), stopped_at, shims, device_facts_asked, notes
    fake_device: dict[str, Any] | None = None
    #: where the process ran in a cgroup CPU quota: how many of the quota periods of the cell's timed rounds the
    #: quota throttled (periods, throttled, throttled_s, share, quota_cpus, period_us, source:
    #: harness.measure.throttle); timed cells under a quota only
    throttle: dict[str, Any] | None = None
    #: the model family (harness.core.axes.FAMILIES): written only on another family's records (yolo11, yolov8);
    #: a record without it is YOLO26's, as every record written before families existed is
    family: str = DEFAULT_FAMILY
    #: the end-to-end p50 relative to each other cell whose end-to-end rounds were timed interleaved with it (its
    #: YOLO26 or YOLO11 counterpart, the workload's other backends): scope, estimator, others {cell_id: {ratio,
    #: ratio_ci, trials}}; ok cells with such a partner only (harness.execute.usecase)
    paired_e2e: dict[str, Any] | None = None
    #: how the cell's head was selected through ultralytics' API: head, branch, export_args (what `YOLO.export`
    #: is given), model (the attribute set on an in-process model), rule, ultralytics (its version)
    #: (harness.yolo.heads); cells that reached their export, detection heads only
    head_selection: dict[str, Any] | None = None


#: the fields only some records carry, written only when set (one whose default is not None: when it differs from
#: that default, OPTIONAL_DEFAULTS)
OPTIONAL_FIELDS = (
    "corrupted",
    "synthetic",
    "machine",
    "source_run_id",
    "host_bound",
    "roofline",
    "loader",
    "fake_device",
    "throttle",
    "family",
    "paired_e2e",
    "head_selection",
)
#: an optional field's value when its record does not carry it
OPTIONAL_DEFAULTS: dict[str, Any] = {"family": DEFAULT_FAMILY}
#: every record's fields, in the order they are written
RECORD_FIELDS = tuple(f.name for f in fields(CellRecord) if f.name not in OPTIONAL_FIELDS)


#: the status of an attempt whose stages have not decided one yet (RecordWriter refuses to write it)
PENDING = "pending"


def new_record(run_id: str, cell, weights: str) -> CellRecord:
    """A record with every field present: axes filled, the status pending, measurements null until measured."""
    values: dict[str, Any] = dict.fromkeys(RECORD_FIELDS)
    values.update(cell.axes())
    values.update(
        schema_version=SCHEMA_VERSION,
        run_id=run_id,
        cell_id=cell.id,
        weights=weights,
        status=PENDING,
        gflops=cell.gflops,
        null_reasons={},
    )
    return CellRecord(**values)


def set_null(rec: CellRecord, field: str, reason: str) -> None:
    """Mark a field (dotted path for nested ones) as not measured, with the reason."""
    rec.null_reasons[field] = reason


# ---- non-finite figures ----------------------------------------------------------------------------------------
# NaN and infinity are not JSON, are stored as NULL by SQLite and compare false with everything, so a NaN latency
# would pass every regression check in silence. They are refused where records are written (check_finite) and
# where runs are imported (the history refuses a run holding one).


def _is_non_finite(value: Any) -> bool:
    return (
        isinstance(value, numbers.Real)
        and not isinstance(value, numbers.Integral)
        and not math.isfinite(float(value))
    )


def _walk(obj: Any, keys: tuple = ()) -> list[tuple[tuple, Any]]:
    """(key path, value) of every NaN or infinite number under `obj`; a list counts as one field (its path, its
    first non-finite value), since the whole list is what gets nulled."""
    if isinstance(obj, dict):
        return [hit for k, v in obj.items() for hit in _walk(v, (*keys, k))]
    if isinstance(obj, list | tuple):
        hits = [hit for v in obj for hit in _walk(v, keys)]
        return [(keys, hits[0][1])] if hits else []
    return [(keys, obj)] if _is_non_finite(obj) else []


def non_finite(obj: Any) -> list[tuple[str, Any]]:
    """(dotted path, value) of every NaN or infinite number in a record or env dict (`latency_ms.p50`)."""
    return [(".".join(map(str, keys)), value) for keys, value in _walk(obj)]


def check_finite(rec: dict) -> list[str]:
    """Refuse NaN and infinite figures in a record about to be written (its JSON view, record_codec.record_to_dict);
    returns the fields that held one.

    Each such field becomes null with a reason. A cell that had not already failed becomes `run_failed` with the
    reason naming the fields (its figures cannot be trusted); a failed cell keeps its status, since the figure is
    a symptom of the failure it already records (an infinite parity error of a shape mismatch, say).
    """
    found = [(".".join(map(str, keys)), keys, value) for keys, value in _walk(rec)]
    for path, keys, value in found:
        holder = rec
        for key in keys[:-1]:
            holder = holder[key]
        holder[keys[-1]] = None
        rec["null_reasons"][path] = (
            f"the measured value was {float(value)!r} (not finite); refused when the record was written"
        )
    if found and rec.get("status") not in FAILED_STATUSES:
        names = ", ".join(f"{p} = {float(v)!r}" for p, _, v in found)
        reason = f"non-finite figures refused: {names}"
        rec.update(status="run_failed", reason=reason)
        rec["failure"] = {
            "class": "numerical_mismatch",
            "stage": "record",
            "message": reason,
            "ops": [],
            "guards": [],
            "suggested_fix": None,
            "exception_type": None,
            "log": rec.get("log"),
        }
    return [p for p, _, _ in found]
