"""The size ladder of a machine: for each model size, its best configuration at 640 and at the run's smaller
inputs (the lowest end-to-end p99 at batch 1 among the configurations that meet the common constraints), with that
figure and its interval, and whether it keeps the camera's frame time and the server's bound (unloaded: the e2e
p99 of one request at a time). The largest size that fits is the first line a user reads under a pick.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from harness.core.axes import SIZES
from harness.decide.candidates import (
    Candidate,
    Figure,
    camera_figure,
    candidates,
    interval_text,
    screened_words,
)
from harness.decide.index import RunIndex
from harness.decide.picks import Constraints

log = logging.getLogger(__name__)

REFERENCE_SIDE = 640


@dataclass(frozen=True)
class Rung:
    """One size at one input: its best configuration, figure and what it meets."""

    size: str
    shape: str
    configuration: str  # `yolo26s 640 fp32 · openvino/cpu`
    cell_id: str
    figure: str  # `e2e p99 31.2 ms [28.0-33.1]`
    value: float
    interval: list[float | None] | None
    camera: bool  # keeps the camera's frame time (times --headroom)
    server: bool  # keeps the server's bound unloaded (times --headroom)
    accuracy: str
    accuracy_source: str

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def _figure_words(fig: Figure) -> str:
    return f"{fig.text} [{interval_text(fig.interval)}]" + screened_words(fig)


def _order(c: Candidate) -> tuple:
    size = SIZES.index(str(c.rec.size)) if str(c.rec.size) in SIZES else -1
    return (-size, -(int(c.rec.height or 0) * int(c.rec.width or 0)))


def rungs(idx: RunIndex, cons: Constraints, server_bound_ms: float) -> list[Rung]:
    """The machine's ladder, the largest size first and, within a size, 640 first, then the smaller inputs."""
    frame = 1000.0 / cons.camera_fps * cons.headroom
    best: dict[tuple[str, str], tuple[Candidate, Figure]] = {}
    for c in candidates(idx):
        if c.rec.batch != 1 or c.min_side > REFERENCE_SIDE or cons.failures(c.rec):
            continue
        fig = camera_figure(c.rec)
        if fig is None:
            continue
        key = (str(c.rec.size), c.shape)
        if key not in best or (fig.limit_value, str(c.rec.cell_id)) < (
            best[key][1].limit_value,
            str(best[key][0].rec.cell_id),
        ):
            best[key] = (c, fig)
    out = []
    for c, fig in sorted(best.values(), key=lambda p: _order(p[0])):
        iv = fig.interval
        out.append(
            Rung(
                str(c.rec.size), c.shape, c.label(), str(c.rec.cell_id), _figure_words(fig), fig.limit_value,
                None if iv is None else [iv.lo, iv.hi if iv.hi != float("inf") else None],
                fig.limit_value <= frame, fig.limit_value <= server_bound_ms, c.accuracy.short(), c.accuracy.source,
            )
        )  # fmt: skip
    return out


def largest(ladder: list[Rung], use: str) -> Rung | None:
    """The largest size (at its largest input that fits) that keeps the bound of `use` (camera or server)."""
    return next((r for r in ladder if getattr(r, use)), None)


def line(ladder: list[Rung], use: str, bound: str) -> str:
    """`largest model that fits the 33.3 ms frame time: yolo26s 640 fp32 · openvino/cpu, e2e p99 31.2 ms [...]`."""
    if not ladder:
        return ""
    top = largest(ladder, use)
    if top is None:
        return f"no model size keeps {bound} here (size ladder: {len(ladder)} configurations)"
    above = (
        [r.size for r in ladder if r.size in SIZES and SIZES.index(r.size) > SIZES.index(top.size)]
        if top.size in SIZES
        else []
    )
    said = f"largest model that keeps {bound}: {top.configuration}, {top.figure}"
    if above:
        said += f" (the larger sizes measured, up to yolo26{max(above, key=SIZES.index)}, do not)"
    return said
