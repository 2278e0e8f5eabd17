"""Inline SVG plots drawn with matplotlib from record values (no pyplot: no global backend state).

Each plot is a `PlotView`: the SVG markup, or the reason there is nothing to draw. Text stays text in the SVG
(`svg.fonttype: none`) which keeps the report small; ids are salted per plot so several SVGs share one page.
"""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from harness.core.record import CellRecord
from harness.decide.index import RunIndex, backend_order, order_key, row_key, row_sort
from harness.decide.load import finite, number, p50
from harness.decide.picks import ACCURACY_FLOORS
from harness.report.matrix import row_label
from harness.report.tables import MEMORY_READERS

log = logging.getLogger(__name__)

ROW_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")  # one per model row in the latency-shape plot
LEGEND_IN = 2.4  # inches right of the axes for the legend
RC = {
    "svg.fonttype": "none",
    "font.size": 8,
    "axes.titlesize": 9,
    "legend.fontsize": 7,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "path.simplify": True,
}
MARKERS = {"cpu": "o", "cuda": "s", "gpu": "D"}


@dataclass(frozen=True)
class PlotView:
    """One plot: its SVG markup, or the reason there is nothing to draw."""

    key: str
    title: str
    caption: str
    svg: str | None = None
    empty_reason: str | None = None


class Palette:
    """One colour per series (backend/device/run), the same in every plot, ordered by backend."""

    def __init__(self, labels: Iterable[str]) -> None:
        from matplotlib import colormaps

        order = backend_order()
        ordered = sorted(set(labels), key=lambda s: (order_key(s.split("/")[0], order), s))
        cmap = colormaps["tab10" if len(ordered) <= 10 else "tab20"]
        self._colors = {label: cmap(i % cmap.N) for i, label in enumerate(ordered)}

    def __call__(self, label: str):
        return self._colors.get(label, "#555555")


def log_axes(ax, x: bool = True) -> None:
    """Log axes labelled 0.5, 1, 2, 5, 10 ... in plain numbers (no overlapping minor labels)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    axes = (ax.xaxis, ax.yaxis) if x else (ax.yaxis,)
    for axis in axes:
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        axis.set_minor_locator(NullLocator())  # unlabelled minor ticks cost draw time and add nothing here


def to_svg(fig, salt: str) -> str:
    from matplotlib import rc_context
    from matplotlib.backends.backend_svg import FigureCanvasSVG

    FigureCanvasSVG(fig)
    buf = io.StringIO()
    with rc_context({**RC, "svg.hashsalt": f"yolo26-{salt}"}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    text = re.sub(r"<metadata>.*?</metadata>", "", text, count=1, flags=re.S)
    # Scale with the page: keep the viewBox, drop the fixed size in points.
    return re.sub(
        r'<svg([^>]*?) width="[^"]*" height="[^"]*"', r'<svg\1 class="plot" role="img"', text, count=1
    )


def new_figure(width: float, height: float, left: float = 0.75, bottom: float = 0.55, legend: bool = True):
    """A figure with fixed margins in inches (a layout engine costs more than the drawing at 200 cells);
    with `legend`, room on the right for a legend outside the axes."""
    from matplotlib import rc_context
    from matplotlib.figure import Figure

    with rc_context(RC):
        fig = Figure(figsize=(width, height))
    right = LEGEND_IN if legend else 0.2
    fig.subplots_adjust(
        left=left / width, right=1 - right / width, bottom=bottom / height, top=1 - 0.3 / height
    )
    return fig


def series_label(idx: RunIndex, rec: CellRecord, many_runs: bool) -> str:
    label = f"{rec.backend}/{rec.device}"
    return f"{label} [{idx.position + 1}]" if many_runs else label


def measured_cells(indexes: list[RunIndex]) -> Iterable[tuple[RunIndex, CellRecord]]:
    """Cells that ran ok (remedy attempts run a different graph and are left out of the plots)."""
    for idx in indexes:
        for rec in idx.cells:
            if rec.status == "ok":
                yield idx, rec


def latency_vs_gflops(indexes: list[RunIndex], color: Palette) -> PlotView:
    """p50 against published model GFLOPs, log-log, one series per backend/device/run."""
    key, title = "latency-gflops", "p50 latency against model GFLOPs (log-log)"
    caption = (
        "One point per cell that ran ok; GFLOPs are the published model cost scaled to the shape and batch."
    )
    return _gflops_scatter(indexes, color, key, title, caption, lambda g, p50: p50, "p50 latency (ms)")


def latency_vs_shape(indexes: list[RunIndex], color: Palette) -> PlotView:
    """p50 against input shape: one line per backend/device/run and model row measured at two or more shapes.

    One axes for all model rows (a marker per row) keeps the plot cheap to draw at a few hundred cells.
    """
    key, title = "latency-shape", "p50 latency against input shape"
    caption = (
        "One line per backend (colour) and model row (marker) measured ok at two or more shapes; "
        "dashed lines run one dynamic-shape artifact."
    )
    many = len(indexes) > 1
    lines: dict[tuple, dict[tuple[str, bool], list[tuple[int, float, str]]]] = {}
    for idx, rec in measured_cells(indexes):
        h, w, rec_p50 = rec.height, rec.width, p50(rec)
        if not (isinstance(h, int) and isinstance(w, int) and rec_p50):
            continue
        skey = (series_label(idx, rec, many), bool(rec.dynamic))
        lines.setdefault(row_key(rec), {}).setdefault(skey, []).append((h * w, rec_p50, f"{h}x{w}"))
    usable = {
        rk: {sk: pts for sk, pts in series.items() if len({p[0] for p in pts}) >= 2}
        for rk, series in lines.items()
    }
    usable = {rk: series for rk, series in usable.items() if series}
    if not usable:
        return PlotView(
            key, title, caption, empty_reason="no backend ran a model ok at two or more input shapes"
        )
    from matplotlib.lines import Line2D
    from matplotlib.ticker import NullLocator

    chosen = sorted(usable, key=row_sort)[: len(ROW_MARKERS)]
    if len(usable) > len(chosen):
        caption += f" The first {len(chosen)} of {len(usable)} model rows are drawn."
    with plot_rc():
        fig = new_figure(7, 4.6, bottom=0.7)
        ax = fig.add_subplot()
        ticks: dict[int, str] = {}
        seen: set[str] = set()
        for rkey, marker in zip(chosen, ROW_MARKERS, strict=False):
            for (label, dynamic), pts in sorted(usable[rkey].items()):
                pts = sorted(pts)
                ticks.update({p[0]: p[2] for p in pts})
                seen.add(label)
                ax.plot(
                    [p[0] for p in pts],
                    [p[1] for p in pts],
                    marker=marker,
                    ms=3.5,
                    linestyle="--" if dynamic else "-",
                    color=color(label),
                )
        ax.set_xscale("log")
        ax.set_yscale("log")
        log_axes(ax, x=False)
        ax.set_xticks(list(ticks), list(ticks.values()), rotation=30)
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("input shape (height x width, by pixel count)")
        ax.set_ylabel("p50 (ms)")
        handles = [Line2D([], [], color=color(label), label=label) for label in sorted(seen)]
        handles += [
            Line2D([], [], color="#444444", marker=m, linestyle="none", label=row_label(rk))
            for rk, m in zip(chosen, ROW_MARKERS, strict=False)
        ]
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
        return PlotView(key, title, caption, svg=to_svg(fig, key))


def memory_per_backend(indexes: list[RunIndex], color: Palette) -> PlotView:
    """Host and device peak memory, one dot per cell, grouped by backend/device/run."""
    key, title = "memory", "Peak memory per backend"
    caption = (
        "One dot per cell that ran ok: host peak RSS, and the process's peak device memory where measured."
    )
    many = len(indexes) > 1
    fields = tuple(
        (path, label, MEMORY_READERS[path])
        for path, label in (
            ("memory.host_peak_rss_mib", "host peak RSS (MiB)"),
            ("memory.device_peak_process_mib", "device peak (MiB)"),
        )
    )
    data: dict[str, dict[str, list[float]]] = {f: {} for f, _, _ in fields}
    for idx, rec in measured_cells(indexes):
        for f, _, read in fields:
            v = finite(read(rec))
            if v is not None:
                data[f].setdefault(series_label(idx, rec, many), []).append(v)
    present = [(f, label) for f, label, _ in fields if data[f]]
    if not present:
        return PlotView(key, title, caption, empty_reason="no cell that ran ok has a memory measurement")
    with plot_rc():
        fig = new_figure(7, 0.3 + 3.0 * len(present), bottom=1.3, legend=False)
        fig.subplots_adjust(hspace=0.6 if len(present) > 1 else 0.2)
        axes = fig.subplots(len(present), 1, squeeze=False)[:, 0]
        order = backend_order()
        for ax, (f, label) in zip(axes, present, strict=True):
            names = sorted(data[f], key=lambda s: (order_key(s.split("/")[0], order), s))
            for i, name in enumerate(names):
                vals = data[f][name]
                jitter = [i + (j % 7 - 3) * 0.04 for j in range(len(vals))]
                ax.scatter(jitter, vals, s=14, color=color(name), alpha=0.8)
            ax.set_xticks(range(len(names)), names, rotation=25, ha="right")
            ax.set_ylabel(label)
        return PlotView(key, title, caption, svg=to_svg(fig, key))


def canary_drift(indexes: list[RunIndex], color: Palette) -> PlotView:
    """The drift canary's readings over each run: how the machine's speed moved while cells were timed."""
    key, title = "canary", "Machine speed through the run (drift canary)"
    caption = (
        "The same small fixed workload (harness/measure/canary.py), timed before and after each workload; a "
        "reading twice as high means the machine ran at half speed then. Backends of one workload were timed "
        "interleaved, so their paired ratios cancel this drift; absolute p50s do not."
    )
    runs = []
    for idx in indexes:
        c = idx.run.env.get("canary") if isinstance(idx.run.env.get("canary"), dict) else {}
        readings = c.get("readings") if isinstance(c.get("readings"), list) else []
        pts = [
            (t, m)
            for r in readings
            if isinstance(r, dict)
            and (t := finite(r.get("t_s"))) is not None
            and (m := finite(r.get("ms"))) is not None
        ]
        if pts:
            runs.append((idx, pts))
    if not runs:
        return PlotView(key, title, caption, empty_reason="no run of this report recorded canary readings")
    with plot_rc():
        fig = new_figure(7, 2.4, bottom=0.6, legend=False)
        ax = fig.subplots()
        for idx, pts in runs:
            ax.plot([t for t, _ in pts], [m for _, m in pts], marker=".", label=f"[{idx.position + 1}]")
        ax.set_xlabel("seconds since the first reading")
        ax.set_ylabel("canary median (ms)")
        ax.set_ylim(bottom=0)
        if len(runs) > 1:
            ax.legend(frameon=False)
        return PlotView(key, title, caption, svg=to_svg(fig, key))


def speed_vs_accuracy(indexes: list[RunIndex], color: Palette) -> PlotView:
    """p50 against the share of the reference's mAP50-95 kept, one point per cell whose accuracy was scored."""
    key, title = "speed-accuracy", "Speed against accuracy (p50 vs mAP50-95 ratio to PyTorch fp32)"
    caption = (
        "One point per cell that ran ok and was scored (harness/accuracy): its p50 against its mAP50-95 over the "
        "PyTorch fp32 reference's on the same val images; filled fp32/fp16, hollow int8. The dashed lines are the "
        "use cases' accuracy floors (0.99 fp32/fp16, 0.95 int8). Up and right is worse on both."
    )
    many = len(indexes) > 1
    series: dict[str, list[tuple[float, float, str]]] = {}
    for idx, rec in measured_cells(indexes):
        ratio, rec_p50 = number(rec.accuracy, "ratio"), p50(rec)
        if ratio is not None and rec_p50:
            series.setdefault(series_label(idx, rec, many), []).append(
                (ratio, rec_p50, rec.precision_requested)
            )
    if not series:
        return PlotView(key, title, caption, empty_reason="no cell that ran ok has an accuracy ratio")
    with plot_rc():
        fig = new_figure(7, 3.6)
        ax = fig.add_subplot()
        for label, pts in sorted(series.items()):
            for prec in sorted({p[2] for p in pts}):
                sel = [p for p in pts if p[2] == prec]
                int8 = prec == "int8"
                ax.scatter(
                    [p[0] for p in sel],
                    [p[1] for p in sel],
                    label=f"{label} {prec}",
                    facecolors="none" if int8 else color(label),
                    edgecolors=color(label),
                    s=26,
                )
        for floor in sorted(set(ACCURACY_FLOORS.values())):
            ax.axvline(floor, color="0.5", linestyle="--", linewidth=0.8)
        ax.set_yscale("log")
        log_axes(ax, x=False)
        ax.set_xlabel("mAP50-95 / PyTorch fp32 reference's (same images)")
        ax.set_ylabel("p50 latency (ms)")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
        return PlotView(key, title, caption, svg=to_svg(fig, key))


def gflops_per_cell(indexes: list[RunIndex], color: Palette) -> PlotView:
    """Achieved GFLOP/s of each cell against its model GFLOPs."""
    key, title = "gflops-per-cell", "Achieved GFLOP/s per cell"
    caption = (
        "One point per cell that ran ok: published model GFLOPs (scaled to shape and batch) divided by the measured "
        "p50, an estimate rather than a counter reading. Each cell's value is in the latency table's GFLOP/s column."
    )
    return _gflops_scatter(
        indexes,
        color,
        key,
        title,
        caption,
        lambda g, p50: g / (p50 / 1000.0),
        "achieved GFLOP/s (GFLOPs / p50)",
    )


def _gflops_scatter(
    indexes: list[RunIndex],
    color: Palette,
    key: str,
    title: str,
    caption: str,
    y_of: Callable[[float, float], float],
    ylabel: str,
) -> PlotView:
    """Log-log scatter of y_of(gflops, p50) against model GFLOPs, one series per backend/device/run."""
    many = len(indexes) > 1
    series: dict[str, list[tuple[float, float, str]]] = {}
    for idx, rec in measured_cells(indexes):
        g, rec_p50 = finite(rec.gflops), p50(rec)
        if g and rec_p50 and g > 0 and rec_p50 > 0:
            series.setdefault(series_label(idx, rec, many), []).append((g, y_of(g, rec_p50), rec.device))
    if not series:
        return PlotView(key, title, caption, empty_reason="no cell that ran ok has both GFLOPs and a p50")
    with plot_rc():
        fig = new_figure(7, 4.2)
        ax = fig.add_subplot()
        for label, pts in sorted(series.items()):
            ax.scatter(
                [p[0] for p in pts],
                [p[1] for p in pts],
                label=label,
                color=color(label),
                marker=MARKERS.get(pts[0][2], "^"),
                s=22,
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        log_axes(ax)
        ax.set_xlabel("model GFLOPs (published, scaled to shape × batch)")
        ax.set_ylabel(ylabel)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
        return PlotView(key, title, caption, svg=to_svg(fig, key))


def plot_rc():
    from matplotlib import rc_context

    return rc_context(RC)


def palette(indexes: list[RunIndex]) -> Palette:
    """The colour of each backend/device(/run) series, shared by every plot of the report."""
    many = len(indexes) > 1
    return Palette(series_label(idx, rec, many) for idx, rec in measured_cells(indexes))


def all_plots(indexes: list[RunIndex], color: Palette | None = None) -> list[PlotView]:
    """The report's plots, in page order."""
    color = color or palette(indexes)
    return [
        latency_vs_gflops(indexes, color),
        latency_vs_shape(indexes, color),
        memory_per_backend(indexes, color),
        gflops_per_cell(indexes, color),
        speed_vs_accuracy(indexes, color),
        canary_drift(indexes, color),
    ]
