"""Deployment-shape use cases: one artifact for dynamic input sizes, and the simplest deployment (the backend
that runs most of its cells with no remedy, no operator fallback and the precision asked for).

Both compare backends across the rendered machines. The user's memory cap applies to them as to every use case:
a cell over it (or without a memory figure) is not a deployment that fits, and is named as rejected.
"""

from __future__ import annotations

import logging

from harness.core.record import CellRecord
from harness.decide.index import RunIndex, row_label, row_of, row_sort, workload_key
from harness.decide.load import number, p50, run_shape
from harness.decide.paired import latency_interval
from harness.decide.picks import (
    Rejection,
    UseCaseAnswer,
    make_pick,
    over_memory_cap,
    pool_reason,
    rejected_text,
    rejection,
    split_ties,
    workload_label,
)
from harness.decide.words import fmt_num

log = logging.getLogger(__name__)


def _ms(rec: CellRecord) -> str:
    """The record's model-only p50 in words, or `n/a`."""
    v = p50(rec)
    return f"{fmt_num(v)} ms" if v is not None else "n/a"


def _dynamic_score(
    idx: RunIndex, recs: list[CellRecord]
) -> tuple[float, CellRecord, str, CellRecord, list[CellRecord]] | None:
    """Worst p50 over one backend's sweep of a dynamic artifact, or None when a swept shape failed unremedied:
    (p50, the sweep record, the text, the record timed there: the sweep record or its remedy, every record timed).

    A shape that failed but has a remedy that ran ok (letterbox padding for a size that is not a multiple of 32)
    counts with the remedy's p50; an artifact that needed a remedy (32*Dim) says so.
    """
    sweep = [r for r in recs if r.height and r.status != "skipped"]
    if not sweep:
        return None  # the probe never got to a shape: its export failed, or nothing was swept
    timed: list[tuple[float, CellRecord, str, CellRecord]] = []
    for r in sweep:
        used = r if r.status == "ok" else idx.working_remedy(r)
        ms = p50(used) if used else None
        if used is None or ms is None:
            return None
        via = f" via {used.remedy}" if used is not r else ""
        timed.append((ms, r, f"{run_shape(r)}{via}", used))
    worst = max(timed, key=lambda t: t[0])
    artifact = {str(r.remedy) for r in sweep if r.remedy}
    note = f"; artifact exported via {', '.join(sorted(artifact))}" if artifact else ""
    shapes = ", ".join(t[2] for t in sorted(timed, key=lambda t: t[1].height or 0))
    text = f"worst p50 {fmt_num(worst[0])} ms over {shapes}{note}"
    return worst[0], worst[1], text, worst[3], [t[3] for t in timed]


def dynamic_inputs(indexes: list[RunIndex], memory_cap_mib: float | None = None) -> UseCaseAnswer:
    """Backends whose dynamic artifact ran at every swept size, ranked by their worst p50 over those sizes."""
    key, title = "dynamic", "Dynamic input sizes needed"
    criterion = "one artifact ran at every swept size (remedies allowed, and named); lowest worst-case p50"
    pool = [(i, r) for i in indexes for r in i.cells if r.dynamic]
    entrants: dict[tuple, list[CellRecord]] = {}
    for i, r in pool:
        ekey = (i.position, *row_of(workload_key(r)), r.device, r.backend)
        entrants.setdefault(ekey, []).append(r)
    scored, rejections = [], []
    for ekey, recs in entrants.items():
        score = _dynamic_score(indexes[ekey[0]], recs)
        if score is None:
            continue
        over = next(((r, why) for r in score[4] if (why := over_memory_cap(r, memory_cap_mib))), None)
        if over:
            rejections.append(rejection(over[0], "memory cap", f"at {run_shape(over[0])}: {over[1]}"))
            continue
        scored.append((score[0], ekey, score[1], score[2], score[3]))
    rejected = rejected_text(rejections)
    if not scored:
        reason = pool_reason(pool, "dynamic-shape")
        return UseCaseAnswer(
            key, title, criterion, none_reason=reason, rejected=rejected, rejections=tuple(rejections)
        )
    scored.sort(key=lambda s: (s[0], str(s[1])))
    rows = {s[1][1:7] for s in scored}
    best_row = min(rows, key=lambda rk: (-sum(1 for s in scored if s[1][1:7] == rk), row_sort(rk)))
    ranked = [s for s in scored if s[1][1:7] == best_row]
    workload = row_label(best_row) + " · dynamic"
    # Ties on the worst shape's p50 interval: the record behind each entrant's score.
    timed = [(indexes[s[1][0]], s[4]) for s in ranked]
    tied, why = split_ties(timed, latency_interval)
    picks = [
        make_pick(indexes[s[1][0]], s[2], indexes, s[3], f"worst p50 {fmt_num(s[0])} ms") for s in ranked
    ]
    extra = {"rejected": rejected, "rejections": tuple(rejections)}
    if len(tied) > 1:
        chosen = [n for n, t in enumerate(timed) if any(t is c for c in tied)]
        rest = tuple(p for n, p in enumerate(picks) if n not in chosen)
        return UseCaseAnswer(
            key,
            title,
            criterion,
            workload=workload,
            tied=tuple(picks[n] for n in chosen),
            tie_reason=why,
            others=rest,
            **extra,
        )
    runner = picks[1] if len(picks) > 1 else None
    return UseCaseAnswer(key, title, criterion, picks[0], runner, workload, others=tuple(picks[1:]), **extra)


def clean_state(rec: CellRecord) -> bool | None:
    """Whether a cell ran the simplest way: ok, no remedy, no fallback operator, the requested precision executed.

    None when that cannot be told (the backend does not report its fallback operators or the precision it ran):
    unknown is not clean, and not unclean either.
    """
    if rec.status != "ok" or rec.remedy:
        return False
    fallback, executed = number(rec.ops, "fallback"), rec.precision_executed
    if (fallback is not None and fallback > 0) or (executed and executed != rec.precision_requested):
        return False
    if fallback is None or not executed:
        return None
    return True


def _unknowns(recs: list[CellRecord]) -> str:
    what = set()
    for r in recs:
        if clean_state(r) is None:
            if number(r.ops, "fallback") is None:
                what.add("operator fallback")
            if not r.precision_executed:
                what.add("executed precision")
    return " and ".join(sorted(what))


def simplest(indexes: list[RunIndex], memory_cap_mib: float | None = None) -> UseCaseAnswer:
    """The backend that ran ok in most of its cells with no remedy, no operator fallback, precision as requested.

    A backend's share of clean cells is a range while some of its cells cannot be told (no fallback count, no
    executed precision): from the cells known clean to those that might be. A winner is named only when its
    lowest share beats every other backend's highest; otherwise the backends that could be first are tied.
    Under a memory cap, a cell that ran ok over the cap does not count for its backend (it is named as rejected).
    """
    key, title = "simplest", "Simplest deployment (no remedy needed)"
    criterion = (
        "share of the backend's cells that ran ok with no remedy, no operator fallback and the requested "
        "precision (a cell that does not report these is unknown, not clean); ties by best p50"
    )
    stats: dict[tuple, list[CellRecord]] = {}
    rejections: list[Rejection] = []
    for i in indexes:
        for r in i.cells:
            if r.status in ("skipped", "exported"):
                continue
            why = over_memory_cap(r, memory_cap_mib) if r.status == "ok" else None
            if why:
                rejections.append(rejection(r, "memory cap", f"{workload_label(r)}: {why}"))
                continue
            stats.setdefault((i.position, r.device, r.backend), []).append(r)
    extra = {"rejected": rejected_text(rejections), "rejections": tuple(rejections)}

    scored = []
    for ekey, recs in stats.items():
        states = [clean_state(r) for r in recs]
        known, unknown = states.count(True), states.count(None)
        if known + unknown == 0:
            continue
        maybe = [r for r, st in zip(recs, states, strict=True) if st is not False]
        best = min(maybe, key=lambda r: p50(r) or float("inf"))
        numbers = f"clean in {known} of {len(recs)} cells run"
        if unknown:
            numbers += f", unknown in {unknown} ({_unknowns(recs)} not reported)"
        if p50(best) is not None:
            numbers += f"; best p50 {_ms(best)} ({workload_label(best)})"
        lo, hi = known / len(recs), (known + unknown) / len(recs)
        scored.append((lo, hi, p50(best) or float("inf"), ekey, best, numbers, recs))
    if not scored:
        pool = [(i, r) for i in indexes for r in i.cells if r.status != "skipped"]
        return UseCaseAnswer(key, title, criterion, none_reason=pool_reason(pool, "measured"), **extra)
    scored.sort(key=lambda s: (-s[0], -s[1], s[2], str(s[3])))
    top = scored[0]
    exact = top[0] == top[1]
    # Could another backend be first once its unknowns are known? (Equal known shares fall to the p50, as ever.)
    rivals = [s for s in scored[1:] if s[1] > top[0] or (s[1] == top[0] and not (exact and s[0] == s[1]))]
    picks = [
        make_pick(indexes[s[3][0]], s[4], indexes, s[5], f"clean in {s[0] * len(s[6]):.0f} of {len(s[6])}")
        for s in scored
    ]
    if rivals:
        tied = [top, *rivals]
        why = "which is simplest depends on what is not recorded: " + "; ".join(
            f"{s[3][2]}: {_unknowns(s[6]) or 'nothing unknown'}" for s in tied if _unknowns(s[6])
        )
        order = [scored.index(s) for s in tied]
        return UseCaseAnswer(
            key,
            title,
            criterion,
            workload="all cells run",
            tied=tuple(picks[n] for n in order),
            tie_reason=why,
            others=tuple(p for n, p in enumerate(picks) if n not in order),
            **extra,
        )
    if top[0] == 0:  # the only backend left might be clean, but no cell of it is known to be
        why = f"no cell is known to have run clean: {top[3][2]}: {top[5]}"
        return UseCaseAnswer(key, title, criterion, none_reason=why, **extra)
    return UseCaseAnswer(
        key,
        title,
        criterion,
        picks[0],
        picks[1] if len(picks) > 1 else None,
        "all cells run",
        others=tuple(picks[1:]),
        **extra,
    )
