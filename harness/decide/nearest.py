"""The nearest miss of a use case nothing meets: the closest candidate, what it misses by, and the cheapest
configuration not measured that could meet it, with the command line that would measure it.

"Cheapest" is in accuracy given away: int8 on the same backend first (the accuracy floor bounds what it may lose),
then the largest smaller input shape, then the largest smaller model; the first whose estimate meets the
constraint, else int8 with its speed-up not known. Whether a variant could meet the constraint is an estimate, said
as one: latency scaled by GFLOPs (pixels times the published model GFLOPs), int8 by the int8/fp32 end-to-end ratio
this machine measured on other cells.
"""

from __future__ import annotations

import logging
import math
import statistics
from typing import TYPE_CHECKING

from harness import backends
from harness.core.axes import FAMILY_GFLOPS_640, GFLOPS_640, SIZES
from harness.core.record import CellRecord
from harness.decide.candidates import e2e, fmt, interval_text

if TYPE_CHECKING:
    from harness.decide.candidate_types import CandidateDecision, Scored

log = logging.getLogger(__name__)

#: square input sides tried below a candidate's, largest first (multiples of 32, the models' stride)
SIDES = (576, 512, 480, 448, 416, 384, 352, 320, 288, 256, 224, 192, 160)
SAME = (
    "size",
    "task",
    "head",
    "backend",
    "device",
    "batch",
    "precision_requested",
    "height",
    "width",
    "family",
)


def command(cfg: dict) -> str:
    """The command line that measures one configuration, with its scenarios."""
    return (
        f"pytest suites/ --benchmark-only --sizes {cfg['size']} --tasks {cfg['task']} --heads {cfg['head']} "
        f"--shapes {cfg['shape']} --backends {cfg['backend']} --devices {cfg['device']} --batches {cfg['batch']} "
        f"--precisions {cfg['precision']} --scenarios all"
    )


def _latency_factor_needed(dec: CandidateDecision, s: Scored) -> float | None:
    """How much the closest candidate's latency must shrink (a factor below 1) to meet the use case's own
    constraint; None when it fails a constraint a faster configuration does not fix."""
    own = [m for m in dec.misses if m.scored is s and m.rejection.constraint in ("frame time", "p99 bound")]
    if not own:
        return None
    if own[0].rejection.constraint == "frame time":  # the camera's, or a use case's own frame rate
        return 1.0 / (1.0 + own[0].shortfall)
    # a rate use case with no passing rate: the e2e p99 (or slowest round) against the bound
    bound = dec.cons.server_bound_ms or 100.0
    worst = e2e(s.cand.rec, "p99") or e2e(s.cand.rec, "max")
    return bound / worst if worst else None


def _measured(idx_cells: list[CellRecord], cfg: dict) -> bool:
    """Whether the machine recorded this configuration (ok or not: a failed one is not worth suggesting)."""
    return any(all(getattr(r, k) == cfg[k] for k in SAME) for r in idx_cells if r.status != "skipped")


def _but_precision(r: CellRecord) -> tuple:
    return tuple(getattr(r, k) for k in SAME if k != "precision_requested")


def int8_ratio(cells: list[CellRecord]) -> tuple[float, str] | None:
    """The median int8/fp32 e2e p50 ratio over pairs of cells this machine ran (same everything but precision)."""
    by = {_but_precision(r): r for r in cells if r.status == "ok" and r.precision_requested == "fp32"}
    ratios, where = [], set()
    for r in cells:
        if r.status != "ok" or r.precision_requested != "int8":
            continue
        ref = by.get(_but_precision(r))
        a, b = e2e(r, "p50"), e2e(ref, "p50") if ref is not None else None
        if a and b:
            ratios.append(a / b)
            where.add(str(r.backend))
    if not ratios:
        return None
    return statistics.median(ratios), ", ".join(sorted(where))


def _variants(
    s: Scored, cells: list[CellRecord], min_shape: int | None
) -> list[tuple[dict, float | None, str]]:
    """Unmeasured configurations near the candidate, cheapest first: (the configuration's axes as a dict, latency
    factor, how)."""
    rec = s.cand.rec
    base = {k: getattr(rec, k) for k in SAME}
    out: list[tuple[dict, float | None, str]] = []
    prec = rec.precision_requested
    supported = backends.get(str(rec.backend)).precisions.get(str(rec.device), ())
    if prec != "int8" and "int8" in supported:
        known = int8_ratio(cells)
        factor, how = (
            (known[0], f"int8 ran at {known[0]:.2f}× the fp32 e2e p50 on this machine ({known[1]})")
            if known
            else (None, "int8 speed-up on this machine not known (no int8 cell measured)")
        )
        out.append(({**base, "precision_requested": "int8"}, factor, how))
    h, w = int(rec.height or 0), int(rec.width or 0)
    for side in SIDES:
        if side >= min(h, w) or (min_shape is not None and side < min_shape):
            continue
        factor = side * side / (h * w)
        how = f"latency scaled by pixels: {side}x{side} is {factor:.2f}× the {h}x{w} pixels"
        out.append(({**base, "height": side, "width": side}, factor, how))
    size = str(rec.size)
    if size in SIZES:
        for smaller in reversed(SIZES[: SIZES.index(size)]):
            gflops = FAMILY_GFLOPS_640.get(str(rec.family), GFLOPS_640)
            factor = gflops[smaller] / gflops[size]
            how = (
                f"latency scaled by the published GFLOPs: {rec.family}{smaller} has {factor:.2f}× "
                f"{rec.family}{size}'s"
            )
            out.append(({**base, "size": smaller}, factor, how))
    return [v for v in out if not _measured(cells, v[0])]


def _cfg(rec_like: dict) -> dict:
    h, w = rec_like["height"], rec_like["width"]
    return {
        "model": f"{rec_like.get('family', 'yolo26')}{rec_like['size']}",
        "size": rec_like["size"],
        "task": rec_like["task"],
        "head": rec_like["head"],
        "shape": str(h) if h == w else f"{h}x{w}",
        "precision": rec_like["precision_requested"],
        "backend": rec_like["backend"],
        "device": rec_like["device"],
        "batch": rec_like["batch"],
    }


def nearest_miss(dec: CandidateDecision) -> dict | None:
    """The nearest miss of a decision without a pick, or None when no candidate had a figure."""
    if not dec.misses:
        return None
    total: dict[int, float] = {}
    by_id: dict[int, Scored] = {}
    for m in dec.misses:
        total[id(m.scored)] = total.get(id(m.scored), 0.0) + m.shortfall
        by_id[id(m.scored)] = m.scored
    closest = by_id[min(total, key=lambda k: (total[k], str(by_id[k].cand.rec.cell_id)))]
    misses = "; ".join(m.rejection.why for m in dec.misses if m.scored is closest)
    out = {
        "configuration": closest.cand.config(),
        "figure": closest.fig.text,
        "interval": _iv(closest),
        "figure_source": closest.fig.source,
        "misses_by": misses,
        "command": None,
        "measure": None,
        "why_no_command": None,
    }
    need = _latency_factor_needed(dec, closest)
    if need is None:
        out["why_no_command"] = (
            "the closest candidate fails a constraint (accuracy floor, memory cap, --min-shape, validity) that a "
            "faster configuration does not fix"
        )
        return out
    variants = _variants(closest, dec.idx.cells, dec.cons.min_shape)
    meets = [v for v in variants if v[1] is not None and v[1] <= need]
    unknown = [v for v in variants if v[1] is None]
    chosen = meets[0] if meets else (unknown[0] if unknown else None)
    if chosen is None:
        out["why_no_command"] = (
            f"no configuration left to measure is estimated to be {need:.2f}× as fast or faster"
            + (f" above the {dec.cons.min_shape} px --min-shape" if dec.cons.min_shape else "")
        )
        return out
    cfg = _cfg(chosen[0])
    est = (
        f"estimated {fmt(closest.fig.limit_value * chosen[1]) if dec.case.key == 'camera' else fmt(chosen[1], 2) + '×'}"
        f" ({chosen[2]}; needs {need:.2f}×)"
        if chosen[1] is not None
        else f"could meet it: {chosen[2]}"
    )
    out["command"] = command(cfg)
    out["measure"] = {"configuration": cfg, "estimate": est}
    return out


def _iv(s: Scored) -> list[float | None] | None:
    iv = s.fig.interval
    return None if iv is None else [iv.lo, None if math.isinf(iv.hi) else iv.hi]  # null: open upper end


def text(nearest: dict) -> str:
    """The nearest miss in one line (the first screen)."""
    c = nearest["configuration"]
    said = (
        f"nearest miss: {c.get('model') or 'yolo26' + str(c['size'])} {c['shape']} {c['precision']} {c['backend']}/{c['device']}, "
        f"{nearest['figure']} [{interval_text(None) if nearest['interval'] is None else _pair(nearest['interval'])}]"
        f": {nearest['misses_by']}"
    )
    if nearest.get("measure"):
        m = nearest["measure"]["configuration"]
        said += f". Not measured, could meet it: {m.get('model') or 'yolo26' + str(m['size'])} {m['shape']} {m['precision']} {m['backend']}"
    return said


def _pair(iv: list) -> str:
    return f"{fmt(iv[0])}–{'∞' if iv[1] is None else fmt(iv[1])}"
