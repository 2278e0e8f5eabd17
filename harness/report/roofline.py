"""The report's "How close to the machine" section: a roofline plot per machine (log-log: arithmetic intensity
against achieved FLOP/s, the cells as points by backend and precision, under the roofs of the machine's measured
peaks) and a table of every ok cell's counted work, achieved rate, peak, bound and shares.

The figures are harness.decide.roofline's: the record's own `roofline` section, or for an older record the
committed work table and its run's env.json `peaks` (null with the reason where the run did not measure them).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from harness.core.roofline import PEAK_DEVICES, rate_unit, share_text, sub_dict
from harness.decide import roofline
from harness.decide.index import RunIndex
from harness.report.fmt import Notes, Shown, derived, fmt_num
from harness.report.matrix import machine_label
from harness.report.plots import PlotView, log_axes, measured_cells, new_figure, plot_rc, to_svg

log = logging.getLogger(__name__)

PRECISION_MARKERS = {"fp32": "o", "tf32": "o", "fp16": "s", "bf16": "D", "int8": "^"}
#: a roof's line style per device kind
ROOF_STYLES = {"cpu": "-", "cuda": "--"}


@dataclass(frozen=True)
class RooflineRow:
    """One ok cell in the section's table."""

    machine: str
    cell_id: str
    backend: str
    device: str
    precision: str
    gflop: Shown  # counted GFLOP a call
    intensity: Shown  # FLOP per byte
    achieved: Shown  # GFLOP/s
    peak: Shown  # GFLOP/s of the compute peak it is read against
    peak_of: str
    bound: Shown  # GFLOP/s
    bound_by: str
    share_of_peak: Shown
    share_of_bound: Shown
    origin: str  # "record" or "derived"
    work_source: str


def _figure(v: roofline.View, name: str, notes: Notes, scale: float = 1.0, digits: int = 3) -> Shown:
    value = v.get(name)
    return derived(None if value is None else float(value) / scale, v.why(name), notes, digits)


def _share(v: roofline.View, name: str, notes: Notes) -> Shown:
    value = v.get(name)
    if value is None:
        return notes.na(v.why(name))
    return Shown(share_text(float(value)), float(value))


def rows(indexes: list[RunIndex], notes: Notes) -> list[RooflineRow]:
    out = []
    for idx, rec in measured_cells(indexes):
        v = roofline.of(rec, idx)
        if v is None:
            continue
        out.append(
            RooflineRow(
                machine=machine_label(idx, indexes),
                cell_id=str(rec.cell_id),
                backend=str(rec.backend),
                device=str(rec.device),
                precision=str(v.get("precision") or rec.precision_executed or rec.precision_requested),
                gflop=_figure(v, "flops", notes, 1e9),
                intensity=_figure(v, "intensity", notes),
                achieved=_figure(v, "achieved_flops_s", notes, 1e9),
                peak=_figure(v, "peak_flops_s", notes, 1e9),
                peak_of=str(v.get("peak_of") or ""),
                bound=_figure(v, "bound_flops_s", notes, 1e9),
                bound_by=str(v.get("bound_by") or ""),
                share_of_peak=_share(v, "share_of_peak", notes),
                share_of_bound=_share(v, "share_of_bound", notes),
                origin=v.origin,
                work_source=v.work_source,
            )
        )
    return out


def _roofs(env: dict, kinds: set[str]) -> list[tuple[str, str, float, float | None]]:
    """(device kind, precision, compute peak FLOP/s, bandwidth bytes/s) of each measured peak of `kinds`."""
    peaks = env.get("peaks") if isinstance(env, dict) else None
    out = []
    for kind in sorted(kinds):
        section = peaks.get(kind) if isinstance(peaks, dict) else None
        if not isinstance(section, dict):
            continue
        compute = sub_dict(section, "compute")
        bw = section.get("bandwidth")
        bw = float(bw) if isinstance(bw, int | float) and not isinstance(bw, bool) and bw > 0 else None
        for prec, value in compute.items():
            if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
                out.append((kind, str(prec), float(value), bw))
    return out


def plot(idx: RunIndex, indexes: list[RunIndex]) -> PlotView:
    """The roofline of one machine: its cells as points, its measured roofs as lines."""
    machine = machine_label(idx, indexes)
    key = f"roofline-{idx.position}"
    title = f"Roofline: [{idx.position + 1}] {machine}"
    points: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    kinds: set[str] = set()
    for rec in idx.cells:
        v = roofline.of(rec, idx)
        if v is None or v.get("intensity") is None or v.get("achieved_flops_s") is None:
            continue
        prec = str(v.get("precision") or "?")
        points.setdefault((str(rec.backend), str(rec.device), prec), []).append(
            (float(v.get("intensity")), float(v.get("achieved_flops_s")))
        )
        if rec.device in PEAK_DEVICES:
            kinds.add(PEAK_DEVICES[rec.device])
    roofs = _roofs(idx.run.env, kinds)
    caption = (
        "One point per cell that ran ok (colour: backend, marker: precision): the model's counted FLOPs over the "
        "bytes a call moves at least (x), and over the model-only p50 (y). Lines: the machine's measured roofs, "
        "each compute peak capped by intensity x the measured memory bandwidth (solid: CPU, dashed: CUDA; hollow "
        "points: CPU cells of a machine that also ran CUDA ones)."
    )
    if not points:
        return PlotView(
            key, title, caption, empty_reason="no cell of this machine has a counted work and a p50"
        )
    if not roofs:
        caption += f" No roof: {_no_roof_reason(idx, kinds)}."
    import numpy as np
    from matplotlib import colormaps

    xs = [x for pts in points.values() for x, _ in pts]
    ridge = [p / bw for _, _, p, bw in roofs if bw]
    lo, hi = min(xs + ridge) / 4, max(xs + ridge) * 4
    grid = np.geomspace(lo, hi, 200)
    scale, prefix = rate_unit(
        max([y for pts in points.values() for _, y in pts] + [p for _, _, p, _ in roofs])
    )
    backends = sorted({b for b, _, _ in points})
    devices = {d for _, d, _ in points}
    cmap = colormaps["tab10" if len(backends) <= 10 else "tab20"]
    color = {b: cmap(i % cmap.N) for i, b in enumerate(backends)}
    with plot_rc():
        fig = new_figure(7, 4.4)
        ax = fig.add_subplot()
        # one line and one label for the precisions of a kind whose measured peaks round alike (fp16/bf16)
        same: dict[tuple[str, str, float | None], list[str]] = {}
        for kind, prec, peak, bw in roofs:
            same.setdefault((kind, fmt_num(peak / scale, 3), bw), []).append(prec)
        for kind, prec, peak, bw in roofs:
            precs = same[(kind, fmt_num(peak / scale, 3), bw)]
            if precs[0] != prec:
                continue
            y = np.minimum(peak, bw * grid) if bw else np.full_like(grid, peak)
            ax.plot(grid, y / scale, color="0.35", linestyle=ROOF_STYLES.get(kind, ":"), linewidth=0.9)
            unit = f"{prefix}OP/s" if precs == ["int8"] else f"{prefix}FLOP/s"
            ax.annotate(
                f"{kind} {'/'.join(precs)} {fmt_num(peak / scale, 3)} {unit}",
                (hi, peak / scale),
                ha="right",
                va="bottom",
                fontsize=6,
                color="0.3",
            )
        for (backend, device, prec), pts in sorted(points.items()):
            # the device only where the machine's cells ran on more than one: then CPU points are hollow
            hollow = len(devices) > 1 and device == "cpu"
            ax.scatter(
                [p[0] for p in pts],
                [p[1] / scale for p in pts],
                label=f"{backend} {device} {prec}" if len(devices) > 1 else f"{backend} {prec}",
                color=color[backend],
                facecolors="none" if hollow else color[backend],
                marker=PRECISION_MARKERS.get(prec, "x"),
                s=24,
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        log_axes(ax)
        ax.set_xlim(lo, hi)
        ax.set_xlabel("arithmetic intensity (FLOP per byte moved at least)")
        ax.set_ylabel(f"achieved {prefix}FLOP/s (counted FLOPs / p50)")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
        return PlotView(key, title, caption, svg=to_svg(fig, key))


def _no_roof_reason(idx: RunIndex, kinds: set[str]) -> str:
    peaks = idx.run.env.get("peaks") if isinstance(idx.run.env, dict) else None
    if not isinstance(peaks, dict):
        return "this run measured no peaks (a run from before they were measured)"
    reasons = sub_dict(peaks, "null_reasons")
    return "; ".join(f"{k}: {reasons.get(k, 'not measured')}" for k in sorted(kinds)) or "no CPU or CUDA cell"


def _how(how: Any) -> str:
    return f" ({how})" if how else ""


def _peaks_line(idx: RunIndex, indexes: list[RunIndex]) -> dict[str, Any]:
    """What the machine's peaks are and how each was measured (for the section's list)."""
    peaks = idx.run.env.get("peaks") if isinstance(idx.run.env, dict) else None
    out: dict[str, Any] = {
        "machine": machine_label(idx, indexes),
        "number": idx.position + 1,
        "kinds": [],
        "none": None,
        "seconds": None,
    }
    if not isinstance(peaks, dict):
        out["none"] = _no_roof_reason(idx, set())
        return out
    out["seconds"] = peaks.get("measured_in_s")
    reasons = sub_dict(peaks, "null_reasons")
    for kind in ("cpu", "cuda"):
        section = peaks.get(kind)
        if not isinstance(section, dict):
            out["kinds"].append({"kind": kind, "none": reasons.get(kind, "not measured"), "figures": []})
            continue
        how = sub_dict(section, "how")
        why = sub_dict(section, "null_reasons")
        compute = sub_dict(section, "compute")
        figures = []
        for prec, value in compute.items():
            scale, prefix = rate_unit(float(value))
            unit = f"{prefix}OP/s" if prec == "int8" else f"{prefix}FLOP/s"
            figures.append(f"{prec} {fmt_num(float(value) / scale, 3)} {unit}" + _how(how.get(prec)))
        for prec in sorted(k for k in why if "." not in k and k not in compute and k != "bandwidth"):
            figures.append(f"{prec} n/a ({why[prec]})")
        bw = section.get("bandwidth")
        if isinstance(bw, int | float) and not isinstance(bw, bool):
            figures.append(f"bandwidth {fmt_num(float(bw) / 1e9, 3)} GB/s" + _how(how.get("bandwidth")))
        else:
            figures.append(f"bandwidth n/a ({why.get('bandwidth', 'not measured')})")
        threads = section.get("threads")
        label = (
            f"{kind}"
            + (f" at {threads} thread(s)" if threads else "")
            + (f" ({section['device']})" if section.get("device") else "")
        )
        out["kinds"].append({"kind": label, "none": None, "figures": figures})
    return out


def roofline_section(indexes: list[RunIndex], notes: Notes) -> dict[str, Any]:
    """The section's content: per machine its peaks and its plot, then the table of every ok cell."""
    table = rows(indexes, notes)
    return {
        "machines": [_peaks_line(idx, indexes) for idx in indexes],
        "plots": [plot(idx, indexes) for idx in indexes if any(r.status == "ok" for r in idx.cells)],
        "rows": table,
        "derived": sum(r.origin == "derived" for r in table),
        "far": roofline.FAR,
        "near": roofline.NEAR,
    }
