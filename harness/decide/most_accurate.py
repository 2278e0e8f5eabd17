"""The latency-bound use cases' two answers: the most accurate configuration that meets the bound, among those
whose accuracy is known, and the fastest that meets it, with what it gives up.

Accuracy is compared on one scale per machine: measured on the user's data where any candidate meeting the bound
was, else the published COCO figures (harness.decide.accuracy); configurations on the other scale, and those whose
accuracy is not known, are not ranked by it. Candidates within ACCURACY_TIE of the most accurate are as accurate
(the fp32 floor's share: two runtimes of one model differ by about that much); among them the use case's figure
orders (lower latency, higher rate), then its tie rule and the least memory (harness.decide.tie_order).
"""

from __future__ import annotations

import logging

from harness.decide.accuracy import MEASURED, PUBLISHED, TO_MEASURE
from harness.decide.candidate_types import CandidateDecision, Miss, Scored
from harness.decide.candidates import SCREEN

log = logging.getLogger(__name__)

#: relative: candidates whose accuracy is within this share of the most accurate one's are as accurate
ACCURACY_TIE = 0.01


def scale(ranked: list[Scored]) -> str | None:
    """The accuracy scale candidates are compared on: measured where any has it, else published, else None."""
    sources = {s.cand.accuracy.source for s in ranked}
    return MEASURED if MEASURED in sources else PUBLISHED if PUBLISHED in sources else None


def by_accuracy(ranked: list[Scored], on: str | None) -> list[Scored]:
    """`ranked` (in the figure's order) by accuracy on scale `on`, most accurate first; candidates within
    ACCURACY_TIE of the one before the group's first keep the figure's order; the rest (another scale, not known)
    after, in the figure's order."""
    known = [s for s in ranked if on is not None and s.cand.accuracy.source == on and s.cand.accuracy.value]
    rest = [s for s in ranked if not any(s is k for k in known)]
    out: list[Scored] = []
    while known:
        best = max(s.cand.accuracy.value or 0.0 for s in known)
        group = [s for s in known if (s.cand.accuracy.value or 0.0) >= best * (1 - ACCURACY_TIE)]
        out.extend(group)
        known = [s for s in known if not any(s is g for g in group)]
    return out + rest


def most_accurate(ranked: list[Scored]) -> tuple[list[Scored], str | None]:
    """The candidates as accurate as the most accurate known one (in the figure's order), and the scale; ([], None)
    when no candidate's accuracy is known."""
    on = scale(ranked)
    if on is None:
        return [], None
    ordered = by_accuracy(ranked, on)
    best = ordered[0].cand.accuracy.value or 0.0
    return [
        s
        for s in ordered
        if s.cand.accuracy.source == on and (s.cand.accuracy.value or 0.0) >= best * (1 - ACCURACY_TIE)
    ], on


def measured_first(group: list[Scored]) -> tuple[list[Scored], list[Scored]]:
    """The most accurate group (in the figure's order) with its measured members first, and the screened members
    whose estimate ranked ahead of the first measured one. An estimate never outranks a measurement: a screened
    server rate is e2e timing times a ratio that moves 2x between machines, so where a member's scenario measured
    it, the pick is measured; the screened ones ahead of it are named so that the scenario phase measures them."""
    measured = [s for s in group if s.fig.source != SCREEN]
    if not measured:
        return group, []
    first = group.index(measured[0])
    ahead = [s for s in group[:first] if s.fig.source == SCREEN]
    return measured + [s for s in group if s.fig.source == SCREEN], ahead


def screened_out(
    misses: list[Miss], pick: Scored | None, own: str, on: str | None, limit: float
) -> Scored | None:
    """The most accurate candidate rejected by the use case's own constraint alone (`own`), on a figure screened
    from its end-to-end timing (a stand-in for the scenario's, which may pass: its floor, the e2e p90 under a
    screened p99, within `limit`), and more accurate than the most accurate candidate meeting the bound (`pick`, on
    scale `on`; any of known accuracy where none meets it or none of those has a known accuracy): the scenario phase
    measures it, since its scenario could change the answer."""
    by_cand: dict[int, list[Miss]] = {}
    for m in misses:
        by_cand.setdefault(id(m.scored), []).append(m)
    pool = [
        ms[0].scored
        for ms in by_cand.values()
        if ms[0].scored.fig.source == SCREEN
        and all(m.rejection.constraint == own for m in ms)
        and (ms[0].scored.fig.floor is None or ms[0].scored.fig.floor <= limit)
    ]
    on = on or scale(pool)
    floor = pick.cand.accuracy.value if pick is not None and pick.cand.accuracy.source == on else None
    better = [
        s
        for s in pool
        if on is not None
        and s.cand.accuracy.source == on
        and s.cand.accuracy.value
        and (floor is None or s.cand.accuracy.value > floor * (1 + ACCURACY_TIE))
    ]
    return min(better, key=lambda s: (-(s.cand.accuracy.value or 0.0), s.fig.limit_value, str(s.cand.rec.cell_id)),
               default=None)  # fmt: skip


def _config_words(s: Scored) -> dict[str, str]:
    r = s.cand.rec
    return {"size": f"{r.family}{r.size}", "shape": s.cand.shape, "precision": str(r.precision_requested)}


def differs(fast: Scored, best: Scored) -> str:
    """What the faster configuration changes against the most accurate one: `320 instead of 640`."""
    a, b = _config_words(fast), _config_words(best)
    parts = [f"{a[k]} instead of {b[k]}" for k in ("size", "shape", "precision") if a[k] != b[k]]
    return ", ".join(parts) or f"the same model, input and precision on {fast.cand.rec.backend}"


def gives_up(fast: Scored, best: Scored) -> str:
    """What the fastest configuration that meets the bound gives up against the most accurate: priced on the
    user's data where both were measured, on the published table where both are published, else not known."""
    change = differs(fast, best)
    fa, ba = fast.cand.accuracy, best.cand.accuracy
    if fa.source == ba.source == MEASURED and fa.value and ba.value:
        return (
            f"{change}: mAP50-95 {fa.value:.3f} against {ba.value:.3f} ({fa.value / ba.value:.3f}×, measured on "
            "your data)"
        )
    if fa.source == ba.source == PUBLISHED and fa.value and ba.value:
        return f"{change}: COCO mAP50-95 {fa.value:.1f} against {ba.value:.1f} (published, at 640)"
    return f"{change}: accuracy cost not known here; {TO_MEASURE}"


def two_answers(
    dec: CandidateDecision, ranked: list[Scored], chosen: list[Scored], scale: str | None, known: int
) -> None:
    """The most accurate pick's reason, and the fastest candidate meeting the bound with what it gives up."""
    dec.accuracy_scale = scale or ""
    if scale is None:
        dec.reason = (
            f"the fastest of {len(ranked)} candidates meeting the constraints: none of them has a known accuracy "
            "(measured on your data, or published)"
        )
        return
    on = "measured on your data" if scale == "measured" else "published COCO mAP at 640"
    dec.reason = (
        f"the most accurate ({on}) of the {sum(1 for s in ranked if s.cand.accuracy.source == scale)} candidates "
        f"meeting the constraints whose accuracy is known, of {len(ranked)} meeting them; {known} as accurate, "
        "ordered by the figure, then its tie rule and memory"
    )
    fastest = ranked[0]
    if not any(fastest is s for s in chosen):
        dec.fastest, dec.gives_up = fastest, gives_up(fastest, dec.pick)
