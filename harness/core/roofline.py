"""A cell's roofline: the model's work per inference, the machine's measured peaks, and how close to them it ran.

Pure arithmetic on plain data (the standard library only), so that the run (harness.execute.roofline), the report
(harness.decide.roofline) and `yolo26-bench check` (harness.check.relations) compute it the same way.

- `work` (harness.measure.work.count on the reference model of the exported graph; for a record written before the
  count existed, the committed table harness/core/model_work.json): `flops` of one call, and the elements one call
  moves at least: `weight_elements` (every parameter and buffer, once), `input_elements`, `activation_elements`
  (every counted operator's output written once: an elementwise operator fused into the layer that feeds it moves
  nothing more), with `how` it was counted.
- `peaks` (env.json `peaks`, harness.measure.peaks): per device kind (`cpu`, `cuda`) its `compute` {precision:
  FLOP/s, int8 in OP/s} and `bandwidth` (bytes/s), each with how it was measured, a null with its reason.
- the cell's model-only p50, its device, the precision it executed.

The compute peak of a precision is the highest measured at that precision or a wider one (PEAK_LEVELS): hardware
does narrower math at least as fast, so a library whose int8 product is slower than its fp32 one has not found the
machine's int8 limit, and the fp32 figure is the tighter bound known. An fp32 cell may run TF32 tensor cores on a
GPU (TensorRT's and ONNX Runtime's default) unless its record says both TF32 switches were off. The bound is the
lower of the compute peak and intensity x bandwidth (the roofline); a share of it above 1 (beyond
harness.check.relations' ROOFLINE_TOL) is a measurement defect.
"""

from __future__ import annotations

import math
from typing import Any

#: bytes per element at each precision (a `mixed` cell at the narrowest it may run: the bytes are a lower bound)
ELEMENT_BYTES = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "int8": 1}
#: the measured peaks that may bound a cell of each precision: its own, then the wider ones
PEAK_LEVELS = {
    "fp32": ("fp32", "tf32"),
    "fp16": ("fp16", "bf16", "fp32", "tf32"),
    "bf16": ("bf16", "fp16", "fp32", "tf32"),
    "int8": ("int8", "fp16", "bf16", "fp32", "tf32"),
}
#: the record's device -> the kind of env.json `peaks` that describes it
PEAK_DEVICES = {"cpu": "cpu", "cuda": "cuda"}


#: the section's figures (harness.core.record.Roofline's keys but the two sources), in its order
FIGURES = (
    "flops",
    "bytes",
    "weight_bytes",
    "activation_bytes",
    "intensity",
    "achieved_flops_s",
    "precision",
    "peak_flops_s",
    "peak_of",
    "bandwidth_bytes_s",
    "bound_flops_s",
    "bound_by",
    "share_of_peak",
    "share_of_bound",
)


def precision_of(executed: str | None, requested: str | None) -> str | None:
    """The precision whose peaks bound a cell: the executed one; `mixed` (a quantised graph with some layers left
    wider) counts as the requested one, the narrowest it may run at; None when neither is known."""
    for p in (executed, requested):
        if p in PEAK_LEVELS:
            return p
        if p == "mixed" and requested in PEAK_LEVELS:
            return requested
    return None


def sub_dict(d: dict, key: str) -> dict:
    """`d[key]` when it is a dict (an object in env.json), else {}."""
    v = d.get(key)
    return v if isinstance(v, dict) else {}


def rate_unit(top: float) -> tuple[float, str]:
    """(divisor, prefix) for rates up to `top` operations/s: giga below 10 tera, tera from there (an H100's roofs
    read 750 TFLOP/s, not 750000 GFLOP/s)."""
    return (1e12, "T") if top >= 1e13 else (1e9, "G")


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
        return None
    return float(v)


#: why a run has no peaks when its env.json has none
NO_PEAKS = "the run measured no peaks (its env.json has no `peaks`: a run from before they were measured)"


def device_peaks(
    peaks: dict | None, device: str | None, why_none: str = NO_PEAKS
) -> tuple[dict | None, str | None]:
    """The measured peaks of `device`'s kind in env.json `peaks`, or (None, why not; `why_none` when `peaks` is
    None)."""
    if not isinstance(peaks, dict):
        return None, why_none
    kind = PEAK_DEVICES.get(str(device))
    if kind is None:
        return None, f"no peak is measured for {device} devices (CPU and CUDA only)"
    section = peaks.get(kind)
    if not isinstance(section, dict):
        why = (
            (peaks.get("null_reasons") or {}).get(kind)
            if isinstance(peaks.get("null_reasons"), dict)
            else None
        )
        return None, f"the run measured no {kind} peaks: {why or 'no reason recorded'}"
    return section, None


def _levels(precision: str, device: str | None, detail: dict | None) -> tuple[str, ...]:
    levels = PEAK_LEVELS[precision]
    tf32_off = (
        isinstance(detail, dict) and detail.get("tf32_matmul") is False and detail.get("tf32_cudnn") is False
    )
    if device != "cuda" or tf32_off:
        levels = tuple(p for p in levels if p != "tf32")
    return levels


def compute_peak(
    section: dict, precision: str, device: str | None, detail: dict | None = None
) -> tuple[float | None, str]:
    """(FLOP/s, which measured figure) of the compute peak bounding `precision`, or (None, why not): the highest
    of the measured figures at that precision or a wider one."""
    compute = sub_dict(section, "compute")
    levels = _levels(precision, device, detail)
    known = [(v, p) for p in levels if (v := _number(compute.get(p))) is not None]
    if not known:
        reasons = sub_dict(section, "null_reasons")
        why = "; ".join(f"{p}: {reasons[p]}" for p in levels if reasons.get(p)) or "not measured"
        return None, f"no {'/'.join(levels)} compute peak was measured ({why})"
    value, level = max(known)
    if level == precision:
        return value, precision
    return value, f"{level} (the highest measured at {precision} or wider)"


def bandwidth(section: dict) -> tuple[float | None, str]:
    """(bytes/s, "") of the measured memory bandwidth, or (None, why not)."""
    value = _number(section.get("bandwidth"))
    if value is not None:
        return value, ""
    reasons = sub_dict(section, "null_reasons")
    return None, f"the memory bandwidth was not measured ({reasons.get('bandwidth') or 'no reason recorded'})"


def moved_bytes(work: dict, precision: str) -> tuple[float, float, float] | None:
    """(total, weights, activations with the input) bytes one call moves at least at `precision`, or None when
    the work has no element counts."""
    size = ELEMENT_BYTES[precision]
    counts = [_count(work.get(k)) for k in ("weight_elements", "activation_elements", "input_elements")]
    if any(c is None for c in counts):
        return None
    weights, acts, inp = (float(c or 0) * size for c in counts)
    return weights + acts + inp, weights, acts + inp


def _count(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
        return None
    return float(v)


def figures(
    work: dict | None,
    p50_ms: float | None,
    device: str | None,
    executed: str | None,
    requested: str | None,
    peaks: dict | None,
    detail: dict | None = None,
    work_why: str = "the model's work was not counted",
    peaks_why: str = NO_PEAKS,
) -> tuple[dict[str, Any], dict[str, str]]:
    """The `roofline` section's figures (harness.core.record.Roofline's keys but the two sources) and the reason
    for each that is null. `work_why`, `peaks_why`: why there is no work, no peaks, when `work`, `peaks` is None."""
    out: dict[str, Any] = dict.fromkeys(FIGURES)
    why: dict[str, str] = {}
    flops = _number(work.get("flops")) if isinstance(work, dict) else None
    precision = precision_of(executed, requested)
    p50 = _number(p50_ms)
    if flops is None:
        for k in ("flops", "intensity", "achieved_flops_s", "share_of_peak", "share_of_bound"):
            why[k] = (
                work_why if not isinstance(work, dict) else "the count found no floating-point operations"
            )
    out["flops"] = flops
    if precision is None:
        why["precision"] = "neither the executed nor the requested precision is known"
    out["precision"] = precision
    moved = moved_bytes(work, precision or "fp32") if isinstance(work, dict) and precision else None
    if moved is None:
        for k in ("bytes", "weight_bytes", "activation_bytes", "intensity"):
            why.setdefault(
                k, work_why if not isinstance(work, dict) else "no precision, or no element counts"
            )
    else:
        out["bytes"], out["weight_bytes"], out["activation_bytes"] = moved
        if flops is not None and moved[0] > 0:
            out["intensity"] = flops / moved[0]
    if flops is not None:
        if p50 is None:
            for k in ("achieved_flops_s", "share_of_peak", "share_of_bound"):
                why[k] = "no model-only p50"
        else:
            out["achieved_flops_s"] = flops / (p50 / 1000.0)
    section, no_peaks = device_peaks(peaks, device, peaks_why)
    peak = bw = None
    if section is None:
        for k in ("peak_flops_s", "peak_of", "bandwidth_bytes_s", "bound_flops_s", "bound_by"):
            why[k] = str(no_peaks)
    else:
        if precision is not None:
            peak, which = compute_peak(section, precision, device, detail)
            if peak is None:
                why["peak_flops_s"] = why["peak_of"] = which
            else:
                out["peak_flops_s"], out["peak_of"] = peak, which
        else:
            why["peak_flops_s"] = why["peak_of"] = "the cell's precision is not known"
        bw, bw_why = bandwidth(section)
        out["bandwidth_bytes_s"] = bw
        if bw is None:
            why["bandwidth_bytes_s"] = bw_why
    if peak is not None and bw is not None and out["intensity"] is not None:
        memory = out["intensity"] * bw
        out["bound_flops_s"] = min(peak, memory)
        out["bound_by"] = "compute" if peak <= memory else "memory"
    else:
        for k in ("bound_flops_s", "bound_by"):
            why.setdefault(
                k,
                why.get("peak_flops_s") or why.get("bandwidth_bytes_s") or why.get("intensity") or "unknown",
            )
    achieved = out["achieved_flops_s"]
    if achieved is not None:
        if peak is not None:
            out["share_of_peak"] = achieved / peak
        else:
            why.setdefault("share_of_peak", why.get("peak_flops_s", "no compute peak"))
        if out["bound_flops_s"] is not None:
            out["share_of_bound"] = achieved / out["bound_flops_s"]
        else:
            why.setdefault("share_of_bound", why["bound_flops_s"])
    return out, {k: v for k, v in why.items() if out.get(k) is None}


def share_text(share: float | None) -> str:
    """A share of a peak in words: `4.1%`, `0.52%`, `n/a`."""
    if share is None:
        return "n/a"
    pct = 100.0 * share
    return f"{pct:.2g}%" if pct < 10 else f"{pct:.0f}%"
