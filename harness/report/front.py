"""The latency-accuracy front of each machine: the measured configurations no other beats on both end-to-end
latency and accuracy, as a table and a plot with each use case's constraint drawn; and the machine's size ladder.

Latency is the camera use case's figure (the e2e p99 at batch 1, from the single-stream scenario or screened from
the record's end-to-end timing). Accuracy is on one scale per machine, never a mix: measured on the user's data
(`--weights-dir`, `--data`) where any configuration was, else the published COCO mAP50-95 of the size at 640 (fp32
at 640 only; never scaled by a ratio measured elsewhere, harness.decide.accuracy); a configuration whose accuracy
is not known on that scale is left off the front, and counted.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace

from harness.decide import ladder, tasks
from harness.decide.accuracy import MEASURED, PUBLISHED
from harness.decide.by_candidates import machine_server_bound
from harness.decide.candidates import (
    Candidate,
    Figure,
    camera_figure,
    candidates,
    fmt,
    interval_text,
    screened_words,
)
from harness.decide.index import RunIndex
from harness.decide.picks import Constraints
from harness.report.matrix import machine_label

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FrontRow:
    label: str
    cell_id: str
    latency: str
    accuracy: str
    meets: str  # the use-case constraints it meets, in words
    x: float
    y: float


@dataclass(frozen=True)
class Front:
    """One machine's front: its rows (fastest first), how many candidates were left off and why, and the plot."""

    machine: str
    position: int
    rows: list[FrontRow]
    left_off: str
    svg: str | None
    empty_reason: str | None = None
    scale: str = ""  # the accuracy scale, in words
    ladder: list[ladder.Rung] = field(default_factory=list)


def _scale(idx: RunIndex) -> str | None:
    sources = {c.accuracy.source for c in candidates(idx)}
    return MEASURED if MEASURED in sources else PUBLISHED if PUBLISHED in sources else None


def _points(idx: RunIndex, scale: str | None) -> tuple[list[tuple[Candidate, Figure]], int]:
    pts, unknown = [], 0
    for c in candidates(idx):
        if c.rec.batch != 1:
            continue
        fig = camera_figure(c.rec)
        if fig is None:
            continue
        if c.accuracy.source != scale or c.accuracy.value is None:
            unknown += 1
            continue
        pts.append((c, fig))
    return pts, unknown


SCALE_WORDS = {
    MEASURED: "mAP50-95 measured on your data",
    PUBLISHED: "COCO mAP50-95, published at 640 (fp32; not measured here)",
}


def non_dominated(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the points no other beats on both (lower x, higher y; at least as good on both, better on one)."""
    out = []
    for i, (x, y) in enumerate(points):
        beaten = any(
            (ox <= x and oy >= y) and (ox < x or oy > y) for j, (ox, oy) in enumerate(points) if j != i
        )
        if not beaten:
            out.append(i)
    return out


def _meets(fig: Figure, cons: Constraints) -> str:
    frame = 1000.0 / cons.camera_fps * cons.headroom
    bound = (cons.server_bound_ms or 100.0) * cons.headroom
    said = [f"camera {fmt(cons.camera_fps)} FPS" if fig.limit_value <= frame else ""]
    said.append(f"server bound {fmt(bound)} ms unloaded" if fig.limit_value <= bound else "")
    return ", ".join(s for s in said if s) or "neither"


def machine_front(idx: RunIndex, indexes: list[RunIndex], cons: Constraints) -> Front:
    scale = _scale(idx)
    pts, unknown = _points(idx, scale)
    machine = machine_label(idx, indexes)
    rungs = ladder.rungs(idx, cons, machine_server_bound(idx, cons))
    left = (
        f"{unknown} configurations whose accuracy is not known on this scale are left off" if unknown else ""
    )
    words = SCALE_WORDS.get(scale or "", "")
    if not pts:
        return Front(machine, idx.position, [], left, None, "no configuration has both an e2e latency and a known "
                     "accuracy", words, rungs)  # fmt: skip
    # the e2e p99 (`limit_value`: also where the p90 with its interval is the figure shown, said so)
    keep = non_dominated([(f.limit_value, c.accuracy.value or 0.0) for c, f in pts])
    rows = sorted(
        (
            FrontRow(
                c.label(), str(c.rec.cell_id), f"{f.text} [{interval_text(f.interval)}]"
                + (f" ({f.said})" if f.said else "") + screened_words(f),
                c.accuracy.short(), _meets(f, cons), f.limit_value, c.accuracy.value or 0.0,
            )
            for n, (c, f) in enumerate(pts)
            if n in keep
        ),
        key=lambda r: r.x,
    )  # fmt: skip
    return Front(machine, idx.position, rows, left, _plot(idx, pts, keep, cons, words), None, words, rungs)


def _plot(
    idx: RunIndex, pts: list[tuple[Candidate, Figure]], keep: list[int], cons: Constraints, words: str
) -> str | None:
    from matplotlib.ticker import FuncFormatter

    from harness.report.plots import new_figure, plot_rc, to_svg

    with plot_rc():
        fig = new_figure(7, 3.6)
        ax = fig.add_subplot()
        others = [p for n, p in enumerate(pts) if n not in keep]
        if others:
            ax.scatter([f.limit_value for _, f in others], [c.accuracy.value for c, _ in others], s=14, color="0.7",
                       label="measured, beaten on both")  # fmt: skip
        front = sorted((pts[n] for n in keep), key=lambda p: p[1].limit_value)
        ax.plot([f.limit_value for _, f in front], [c.accuracy.value for c, _ in front], "o-", color="tab:blue", ms=4,
                label="front (no other beats it on both)")  # fmt: skip
        for c, f in front:
            ax.annotate(f"{c.rec.size} {c.shape} {c.rec.precision_requested} {c.rec.backend}",
                        (f.limit_value, c.accuracy.value), fontsize=6, xytext=(3, 3), textcoords="offset points")  # fmt: skip
        frame = 1000.0 / cons.camera_fps
        bound = cons.server_bound_ms or 100.0
        ax.axvline(
            frame, color="tab:red", linestyle="--", linewidth=0.8, label=f"camera {fmt(cons.camera_fps)} FPS"
        )
        ax.axvline(
            bound, color="tab:green", linestyle=":", linewidth=0.8, label=f"server p99 bound {fmt(bound)} ms"
        )
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xlabel("e2e p99 at batch 1 (ms; screened where no single-stream result)")
        ax.set_ylabel(words)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
        return to_svg(fig, f"front-{idx.position}")


def fronts(indexes: list[RunIndex], cons: Constraints) -> list[Front]:
    """The front of every rendered machine, per task where the runs hold several (harness.decide.tasks: accuracy
    and latency of a classifier never share a front with a detector's)."""
    groups = tasks.split(indexes)
    out = []
    for task, idxs in groups:
        for idx in idxs:
            f = machine_front(idx, indexes, cons)
            out.append(replace(f, machine=f"{f.machine} · {task}") if len(groups) > 1 and task else f)
    return out
