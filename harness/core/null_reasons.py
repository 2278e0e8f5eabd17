"""Every null in a record says why: `null_reasons` maps each null field (dotted for section fields) to a reason.

Stages and trackers set the specific reasons as they go (`set_null`); `fill_null_reasons` runs last and gives every
null that is still unexplained the reason that follows from the record itself (its status, its backend, its
device). `unexplained_nulls` is the check: it lists what still has no reason, and must list nothing.
"""

from __future__ import annotations

from harness.core.record import RECORD_FIELDS, TRACED_STATUSES, CellRecord
from harness.core.record_codec import section_items

#: what every fake-device record says (harness.backends._shared.fake_cuda.FAKE_LABEL; the core imports no backend)
FAKE_LABEL = (
    "export traced on a CPU machine (fake CUDA device); compiling kernels, loading and timing need a GPU"
)

# Sections whose fields are checked one by one once the section itself exists.
SECTIONS = ("memory", "energy", "latency_ms", "latency_e2e_ms", "stages_ms", "parity", "accuracy", "roofline")
RAN = ("ok", "parity_failed")


def _not_run(status: str) -> str:
    if status == "exported":
        return "export-only target: nothing runs here"
    if status in TRACED_STATUSES:
        return f"{FAKE_LABEL}: nothing runs"
    return f"cell did not run ({status})"


def _fixed_reason(rec: CellRecord, field: str) -> str | None:
    """The reason for a null `field` that follows from what the field means, or None when it depends on status."""
    status = rec.status
    return {
        "reason": "ok: nothing to explain" if status == "ok" else "no reason was given",
        "failure": "nothing failed" if status in ("ok", "skipped", "exported", "traced") else None,
        "remedy": "not a remedy attempt",
        "remedy_of": "not a remedy attempt",
        "ops": f"{rec.backend} does not report delegated and fallback operators",
        "gflops": "published GFLOPs exist for detect models at static shapes only",
        "height": "dynamic probe: one artifact over a range of shapes (see the sweep records)",
        "width": "dynamic probe: one artifact over a range of shapes (see the sweep records)",
        "device_latency_ms": f"not measured: {rec.device} cell (CUDA events time CUDA devices)",
        "device_samples_ms": f"not measured: {rec.device} cell (CUDA events time CUDA devices)",
        "gpu_snapshot": f"no NVIDIA GPU snapshot for a {rec.device} cell",
        "precision_detail": "the runtime gives no per-type breakdown",
        "energy": f"not measured: {rec.device} cell, energy is read from NVML for CUDA cells only",
        "compile_s": "no JIT compile step in this backend" if status in RAN else None,
        "calibration": None
        if rec.precision_requested == "int8"
        else f"{rec.precision_requested} cell: nothing is calibrated",
    }.get(field)


def _export_reason(rec: CellRecord) -> str:
    if rec.status == "skipped":
        return "cell skipped before export"
    if rec.cache_hit is None and rec.artifact:
        return "no export step (the backend runs the checkpoint)"
    return "export did not finish"


def fill_null_reasons(rec: CellRecord) -> None:
    """Give every null field of `rec` (and of its sections) a reason, keeping the reasons already set."""
    nr = rec.null_reasons
    status = rec.status
    for field in RECORD_FIELDS:
        if getattr(rec, field) is not None or field in nr or field == "null_reasons":
            continue
        if field in ("export_s", "export_origin", "cache_hit", "artifact", "artifact_bytes"):
            why = _export_reason(rec)
        elif field == "log":
            why = "nothing was logged for this attempt (no export step, nothing failed)"
        else:
            why = _fixed_reason(rec, field)
        nr[field] = why or (
            _not_run(status) if status not in RAN else f"not recorded by this {status} attempt"
        )
    for name in SECTIONS:
        for key, value in section_items(getattr(rec, name)):
            dotted = f"{name}.{key}"
            if value is None and dotted not in nr:
                nr[dotted] = _section_reason(rec, name, key)


def _section_reason(rec: CellRecord, name: str, key: str) -> str:
    device = rec.device
    if name == "memory" and key.startswith(("device_", "torch_")):
        return (
            f"not measured: {device} cell, device memory is read for CUDA cells only (NVML, torch allocator)"
        )
    if name == "energy":
        return f"not measured: {device} cell, energy is read from NVML for CUDA cells only"
    if name in ("latency_ms", "latency_e2e_ms") and key in ("p90", "p99"):
        return "too few timed rounds for this percentile"
    return f"not measured by this {rec.status} attempt"


def unexplained_nulls(rec: CellRecord) -> list[str]:
    """Null fields (dotted for section fields) that have no reason in `null_reasons`: must be empty."""
    nr = rec.null_reasons
    out = [f for f in RECORD_FIELDS if getattr(rec, f) is None and f not in nr and f != "null_reasons"]
    for name in SECTIONS:
        out += [
            f"{name}.{k}"
            for k, v in section_items(getattr(rec, name))
            if v is None and f"{name}.{k}" not in nr
        ]
    return out
