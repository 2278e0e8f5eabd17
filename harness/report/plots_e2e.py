"""Plots of the end-to-end records, drawn like harness.report.plots (matplotlib to inline SVG, no pyplot): where
the time of one image goes (the stages), and what latency each backend pays for its throughput on each machine.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

from harness.core.record import CellRecord
from harness.decide.index import RunIndex, backend_order, order_key, row_of, row_sort, workload_key
from harness.decide.load import number, p50, run_shape
from harness.report.matrix import machine_label, row_label
from harness.report.plots import Palette, PlotView, log_axes, new_figure, plot_rc, to_svg
from harness.report.scenarios import FRAME_MS, STAGES, ran_ips, result

log = logging.getLogger(__name__)

#: colour per stage (ColorBrewer Set2), the same in every workload's bars
STAGE_COLORS = {
    "preprocess": "#8da0cb",
    "h2d": "#fc8d62",
    "model": "#66c2a5",
    "d2h": "#e78ac3",
    "postprocess": "#a6d854",
}
MAX_WORKLOADS = 3  # workloads drawn; the end-to-end table below the plot has every cell


def _label(rec: CellRecord) -> str:
    return f"{rec.backend}/{rec.device}"


def _workload_groups(
    indexes: list[RunIndex], keep: Callable[[CellRecord], bool]
) -> list[tuple[RunIndex, list[CellRecord]]]:
    """(run, cells of one workload) with `keep`, the workloads with the most backends first, 640x640 first."""
    groups: dict[tuple, tuple[RunIndex, list[CellRecord]]] = {}
    for idx in indexes:
        for rec in idx.cells:
            if rec.status == "ok" and keep(rec):
                groups.setdefault((idx.position, workload_key(rec)), (idx, []))[1].append(rec)
    order = backend_order()
    for _, recs in groups.values():
        recs.sort(key=lambda r: (r.device, order_key(r.backend, order)))

    def rank(item: tuple[tuple, tuple[RunIndex, list[CellRecord]]]) -> tuple:
        (pos, wk), (_, recs) = item
        return (pos, -len(recs), run_shape(recs[0]) != "640x640", row_sort(row_of(wk)), run_shape(recs[0]))

    return [v for _, v in sorted(groups.items(), key=rank)]


def _has_stages(rec: CellRecord) -> bool:
    return isinstance(rec.stages_ms, dict) and any(number(rec.stages_ms, s) is not None for s in STAGES)


def stage_breakdown(indexes: list[RunIndex]) -> PlotView:
    """Per workload, each backend's model-only p50 beside its end-to-end stages (p50 of each, stacked)."""
    key, title = "stages", "Where the time of one image goes: model only against end to end"
    caption = (
        "Per workload, two bars per backend: the model-only p50 (latency_ms: the model's call alone) and the "
        "end-to-end p50 of each stage, stacked (stages_ms: preprocess, host-to-device copy, model, device-to-host "
        "copy, post-processing). A stage that does not exist on the device (no copies on a CPU) is absent, not "
        "zero. Stage p50s need not add up to the end-to-end p50; the table below gives both."
    )
    groups = _workload_groups(indexes, _has_stages)
    if not groups:
        return PlotView(key, title, caption, empty_reason="no cell that ran ok has a stage breakdown")
    # Each machine's best workload first, then each one's second, ...: every machine gets drawn.
    turns: list[int] = []
    seen: dict[int, int] = {}
    for idx, _ in groups:
        turns.append(seen.get(idx.position, 0))
        seen[idx.position] = turns[-1] + 1
    order = sorted(range(len(groups)), key=lambda n: (turns[n], groups[n][0].position))
    picked = order[: max(MAX_WORKLOADS, len(seen))]
    chosen = [groups[n] for n in sorted(picked)]  # groups are in machine order, each machine's best first
    if len(groups) > len(chosen):
        caption += f" The {len(chosen)} workloads with the most backends of {len(groups)} are drawn."
    rows = sum(2 * len(recs) for _, recs in chosen)
    many = len(indexes) > 1
    with plot_rc():
        fig = new_figure(7, 0.5 + 0.17 * rows + 0.55 * len(chosen), left=2.1, bottom=0.45, legend=False)
        fig.subplots_adjust(hspace=0.6)
        axes = fig.subplots(len(chosen), 1, squeeze=False, height_ratios=[len(r) for _, r in chosen])[:, 0]
        for ax, (idx, recs) in zip(axes, chosen, strict=True):
            labels: list[str] = []
            for n, rec in enumerate(recs):
                y_model, y_e2e = 2 * n, 2 * n + 1
                model = p50(rec)
                if model is not None:
                    ax.barh(y_model, model, height=0.7, color=STAGE_COLORS["model"], hatch="///", alpha=0.55)
                left = 0.0
                for stage in STAGES:
                    v = number(rec.stages_ms, stage)
                    if v is not None and v > 0:
                        ax.barh(y_e2e, v, left=left, height=0.7, color=STAGE_COLORS[stage])
                        left += v
                labels += [f"{_label(rec)} model only", f"{_label(rec)} end to end"]
            ax.set_yticks(range(len(labels)), labels)
            ax.invert_yaxis()
            ax.set_xlim(left=0)
            ax.set_xlabel("ms (p50)")
            where = f" [{idx.position + 1}]" if many else ""
            ax.set_title(
                f"{row_label(row_of(workload_key(recs[0])))} · {run_shape(recs[0])}{where}", loc="left"
            )
        from matplotlib.patches import Patch

        handles = [Patch(color=c, label=s) for s, c in STAGE_COLORS.items()]
        handles.append(Patch(facecolor=STAGE_COLORS["model"], hatch="///", alpha=0.55, label="model only"))
        fig.legend(handles=handles, loc="upper center", ncols=6, frameon=False, bbox_to_anchor=(0.5, 1.0))
        fig.subplots_adjust(top=1 - 0.45 / fig.get_figheight())
        return PlotView(key, title, caption, svg=to_svg(fig, key))


def _scenario_group(idx: RunIndex) -> list[CellRecord]:
    """The machine's cells of the workload with the most backends that ran more than single-stream."""
    groups = _workload_groups([idx], lambda r: isinstance(r.scenarios, dict) and bool(r.scenarios))
    return groups[0][1] if groups else []


def _points(rec: CellRecord) -> dict[str, list[tuple[float, float, bool]]]:
    """(images/s, p99 ms, passed) per scenario of one cell; offline has no latency (its p99 is NaN)."""
    out: dict[str, list[tuple[float, float, bool]]] = {}
    single, multi = result(rec, "single-stream") or {}, result(rec, "multi-stream") or {}
    for name, res in (("single-stream", single), ("multi-stream", multi)):
        x, y = ran_ips(res), number(res, "p99")
        if x and y:
            out[name] = [(x, y, res.get("valid") is not False)]
    tried = (result(rec, "server") or {}).get("tried") or []
    pts = [
        (number(t, "rate"), number(t, "p99_ms"), t.get("ok") is True) for t in tried if isinstance(t, dict)
    ]
    out["server"] = sorted((x, y, ok) for x, y, ok in pts if x and y)
    ips = number(result(rec, "offline") or {}, "value")
    if ips:
        out["offline"] = [(ips, math.nan, True)]
    return out


MARKER = {"single-stream": "o", "multi-stream": "s", "server": "."}


def latency_throughput(indexes: list[RunIndex], idx: RunIndex, color: Palette) -> PlotView:
    """One machine: p99 latency against images/s, from its single-stream, multi-stream, server and offline runs."""
    machine = machine_label(idx, indexes)
    key = f"latency-throughput-{idx.position}"
    title = f"Latency against throughput [{idx.position + 1}] {machine}"
    caption = (
        "Per backend (colour): single-stream (circle) and multi-stream (square) p99 at the images/s they ran; the "
        "server scenario's tried rates (line; hollow where LoadGen called the rate INVALID); offline images/s (dotted vertical "
        f"line: no latency bound). Dashed: the {FRAME_MS:.1f} ms frame time at 30 FPS. Down and right is better."
    )
    recs = _scenario_group(idx)
    if not recs:
        return PlotView(key, title, caption, empty_reason="no cell of this machine ran the scenarios")
    title += f" · {row_label(row_of(workload_key(recs[0])))} · {run_shape(recs[0])}"
    many = len(indexes) > 1
    bounds = {b for r in recs if (b := number(result(r, "server") or {}, "bound_ms")) is not None}
    with plot_rc():
        fig = new_figure(7, 3.8)
        ax = fig.add_subplot()
        from matplotlib.lines import Line2D

        handles = []
        for rec in recs:
            label = _label(rec) + (f" [{idx.position + 1}]" if many else "")
            c = color(label)
            pts = _points(rec)
            server = pts.get("server") or []
            if server:
                ax.plot([p[0] for p in server], [p[1] for p in server], color=c, linewidth=0.9, alpha=0.7)
                for x, y, ok in server:
                    ax.scatter([x], [y], s=10, facecolors=c if ok else "none", edgecolors=c, linewidths=0.8)
            for name in ("single-stream", "multi-stream"):
                for x, y, _ in pts.get(name, []):
                    ax.scatter(
                        [x], [y], s=34, marker=MARKER[name], color=c, edgecolors="black", linewidths=0.4
                    )
            for x, _, _ in pts.get("offline", []):
                ax.axvline(x, color=c, linestyle=":", linewidth=1.2)
            handles.append(Line2D([], [], color=c, label=label))
        ax.axhline(FRAME_MS, color="0.4", linestyle="--", linewidth=0.8)
        for b in sorted(bounds):
            ax.axhline(b, color="0.6", linestyle="-.", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        log_axes(ax)
        ax.set_xlabel("throughput (images/s)")
        ax.set_ylabel("p99 latency (ms)")
        handles += [
            Line2D([], [], color="0.3", marker="o", linestyle="none", label="single-stream"),
            Line2D([], [], color="0.3", marker="s", linestyle="none", label="multi-stream"),
            Line2D([], [], color="0.3", marker=".", label="server (tried rates)"),
            Line2D([], [], color="0.3", linestyle=":", label="offline images/s"),
            Line2D([], [], color="0.4", linestyle="--", label=f"frame time {FRAME_MS:.1f} ms"),
        ]
        if bounds:
            handles.append(Line2D([], [], color="0.6", linestyle="-.", label="server latency bound"))
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
        return PlotView(key, title, caption, svg=to_svg(fig, key))


def e2e_plots(indexes: list[RunIndex], color: Palette) -> dict[str, list[PlotView]]:
    """The end-to-end plots by the section they sit in: `stages` beside the end-to-end table, `scenarios` (one
    latency-throughput plot per machine that ran the scenarios) beside the scenario table."""
    per_machine = [latency_throughput(indexes, idx, color) for idx in indexes]
    drawn = [p for p in per_machine if p.svg] or per_machine[:1]
    return {"stages": [stage_breakdown(indexes)], "scenarios": drawn}
