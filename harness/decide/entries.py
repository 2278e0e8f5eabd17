"""decision.json's entries: one use case on one machine as data (`entry` for the use cases decided from every
candidate, `other_entry` for those decided on one workload's scenario results).

Each entry: `{"use_case", "machine", "objective", "constraints", "pick": {configuration, figure, interval,
accuracy, accuracy_source, ...} or null, "tied_with": [...], "nearest_miss": {configuration, figure, misses_by,
command, ...} or null, "reason", "screened": [...]}`; the latency-bound use cases (camera, server) add
`accuracy_scale`, `fastest` with `fastest_gives_up`, `at_limit` with `with_margin`, `largest_fitting` and the
machine's size `ladder`.
"""

from __future__ import annotations

import logging
import math

from harness.core.record import CellRecord
from harness.decide import host_bound
from harness.decide.accuracy import NOT_KNOWN, accuracy_of
from harness.decide.candidate_types import CandidateDecision, Scored
from harness.decide.index import RunIndex
from harness.decide.picks import Constraints, Pick, UseCaseAnswer
from harness.decide.tie_order import SECOND_OBJECTIVE

log = logging.getLogger(__name__)


def _iv(s: Scored) -> list[float | None] | None:
    iv = s.fig.interval
    if iv is None:
        return None
    return [iv.lo, None if math.isinf(iv.hi) else iv.hi]  # null: open upper end (no rate tried failed)


def _scored(s: Scored) -> dict:
    acc = s.cand.accuracy
    return {
        "configuration": s.cand.config(),
        "figure": s.fig.text,
        "value": s.fig.value,
        "interval": _iv(s),
        "interval_how": s.fig.interval_how,
        "figure_source": s.fig.source,
        "figure_note": s.fig.note,
        # which statistic decided, where the figure is not the use case's own (the p90 where the p99 is unbounded)
        "figure_decided_by": s.fig.said or None,
        "judged_value": s.fig.judged,
        "accuracy": acc.value,
        "accuracy_source": acc.source,
        "accuracy_words": acc.text(),
        "accuracy_cost": acc.cost or None,
        "standin_accuracy": acc.standin or None,
        "accuracy_detail": acc.as_dict(),
        "memory_mib": s.cand.memory_mib(),
        "host_bound": host_bound.of(s.cand.rec, s.cand.idx),
    }


def constraints_dict(cons: Constraints, own: str) -> dict:
    return {
        "own": own,
        "camera_fps": cons.camera_fps,
        "server_bound_ms": cons.server_bound_ms,
        "accuracy_floors": cons.floors,
        "memory_cap_mib": cons.memory_cap_mib,
        "min_shape": cons.min_shape,
        "headroom": cons.headroom,
        "in_words": cons.text(),
    }


def entry(dec: CandidateDecision) -> dict:
    """One shipping decision as data."""
    return {
        "use_case": dec.key,
        "title": dec.title,
        "machine": dec.machine,
        "objective": dec.case.objective,
        "constraints": constraints_dict(dec.cons, dec.constraint),
        "pick": _scored(dec.pick) if dec.pick else None,
        "tied_with": [_scored(s) for s in dec.tied],
        "tie_reason": dec.tie_reason or None,
        "tie_advice": dec.tie_advice or None,
        "tie_order": SECOND_OBJECTIVE if dec.tied else None,
        "nearest_miss": dec.nearest,
        "reason": dec.reason,
        "screened": [
            {"cell_id": s.cand.rec.cell_id, "figure": s.fig.text, "note": s.fig.note} for s in dec.screened
        ],
        **_two_answers(dec),
    }


def _two_answers(dec: CandidateDecision) -> dict:
    """The latency-bound use cases' second answer, the headroom and the machine's size ladder."""
    if not dec.case.accuracy_first:
        return {}
    return {
        "accuracy_scale": dec.accuracy_scale or None,
        "fastest": _scored(dec.fastest) if dec.fastest else None,
        "fastest_gives_up": dec.gives_up or None,
        "at_limit": dec.at_limit or None,
        "with_margin": _scored(dec.with_margin) if dec.with_margin else None,
        "largest_fitting": dec.ladder_line or None,
        "screened_out": _scored(dec.screened_out) if dec.screened_out else None,
        "estimated_better": [_scored(s) for s in dec.estimated_better] or None,
        "ladder": [r.as_dict() for r in dec.ladder],
    }


def _field(rec: CellRecord | None, name: str) -> object:
    """A field of the record, None when there is no record."""
    return None if rec is None else getattr(rec, name)


def _pick_from_rec(p: Pick, idx: RunIndex) -> dict:
    rec = idx.by_id.get(p.cell_id)
    acc = accuracy_of(rec, idx.cells) if rec is not None else None
    h, w = _field(rec, "height"), _field(rec, "width")
    return {
        "configuration": {
            "model": f"{_field(rec, 'family') or 'yolo26'}{_field(rec, 'size')}",
            "size": _field(rec, "size"),
            "task": _field(rec, "task"),
            "head": _field(rec, "head"),
            "shape": str(h) if h == w else f"{h}x{w}",
            "precision": _field(rec, "precision_requested"),
            "backend": p.backend,
            "device": p.device,
            "batch": _field(rec, "batch"),
            "cell_id": p.cell_id,
        },
        "figure": p.figure or p.numbers,
        "interval": None,
        "interval_how": "see figure (this use case compares one workload's scenario results)",
        "accuracy": acc.value if acc else None,
        "accuracy_source": acc.source if acc else NOT_KNOWN,
        "accuracy_words": acc.text() if acc else None,
        "host_bound": host_bound.of(rec, idx),
    }


def other_entry(rec: UseCaseAnswer, idx: RunIndex, cons: Constraints) -> dict:
    """A per-machine use case answered from one workload's scenario results (several cameras, least memory)."""
    picks = [rec.winner] if rec.winner else list(rec.tied[:1])
    return {
        "use_case": rec.key,
        "title": rec.title,
        "machine": rec.machine,
        "objective": rec.criterion,
        "constraints": constraints_dict(cons, rec.constraint or ""),
        "pick": _pick_from_rec(picks[0], idx) if picks else None,
        "tied_with": [_pick_from_rec(p, idx) for p in rec.tied[1:]],
        "tie_reason": rec.tie_reason,
        "nearest_miss": None,
        "reason": rec.none_reason or (f"compared on {rec.workload}" if rec.workload else ""),
        "screened": [],
    }
