"""What to ship on each machine for a camera, a server and an offline batch job, chosen from every configuration
the machine measured (harness.decide.candidates): size, shape, precision, backend, head and batch compete.

A pick is the best candidate that meets the use case's own constraint (the frame time at --camera-fps, the p99
bound at --server-bound-ms) and the common ones (the accuracy floor per precision, --memory-cap, --min-shape), by
the objective in words. It is tied with the candidates it cannot be told apart from: two cells timed interleaved
(one workload) by their paired p50 ratio's 95% interval; any others by the overlap of their figures' intervals.
When nothing qualifies, the nearest miss says by how much, and which configuration not measured could meet it
(harness.decide.nearest).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from harness.core.record import CellRecord
from harness.decide import headroom, host_bound, ladder, most_accurate, paired, tie_order
from harness.decide.candidate_types import CandidateCase, Miss
from harness.decide.candidate_types import CandidateDecision as CandidateDecision
from harness.decide.candidate_types import Scored as Scored
from harness.decide.candidates import (
    SCREEN,
    Figure,
    candidates,
    fmt,
    interval_text,
    screen_factor,
    screened_words,
    server_figure,
)
from harness.decide.entries import entry
from harness.decide.index import RunIndex, machine_label, workload_key
from harness.decide.nearest import nearest_miss
from harness.decide.picks import Constraints, Pick, Rejection, UseCaseAnswer, rejected_text, rejection
from harness.decide.registry import ALWAYS, Outcome
from harness.measure.stats import Interval

log = logging.getLogger(__name__)


def frame_ms(cons: Constraints) -> float:
    return 1000.0 / cons.camera_fps


def camera_own(fig: Figure, cons: Constraints) -> tuple[str, float] | None:
    """The frame time, judged on the e2e p99 (`Figure.limit_value`: the p99 also where the p90 ranks)."""
    return within_frame(cons.camera_fps)(fig, cons)


def within_frame(fps: float) -> Callable[[Figure, Constraints], tuple[str, float] | None]:
    """A use case's own constraint: its figure (the e2e p99, where the p90 ranks: `Figure.limit_value`) within the
    frame time at `fps` (0: the run's --camera-fps)."""

    def own(fig: Figure, cons: Constraints) -> tuple[str, float] | None:
        rate = fps or cons.camera_fps
        frame = 1000.0 / rate
        limit, value = frame * cons.headroom, fig.limit_value
        if value <= limit:
            return None
        text = fig.text if fig.judged is None else f"e2e p99 {fmt(value)} ms"
        what = f"{fmt(frame)} ms frame time at {fmt(rate)} FPS"
        if cons.headroom < 1.0:
            what = f"{fmt(limit)} ms limit ({cons.headroom:.0%} of the {what}, --headroom)"
        return (
            f"{text} over the {what} (by {fmt(value - limit)} ms, {100 * (value / limit - 1):.0f}%)",
            value / limit - 1,
        )

    return own


def rate_own(fig: Figure, cons: Constraints) -> tuple[str, float] | None:
    if fig.value > 0:
        return None
    return (fig.text if fig.source == SCREEN else "no rate tried kept the p99 within the bound", 1.0)


def server_case_figure(rec: CellRecord, cons: Constraints, ctx: dict) -> Figure | None:
    return server_figure(rec, server_bound(cons, ctx), ctx["server"])


def server_bound(cons: Constraints, ctx: dict) -> float:
    """The server's latency bound a figure must keep: --server-bound-ms (else the one the run measured under)
    times --headroom."""
    bound = cons.server_bound_ms or _recorded_bound(ctx)
    return bound * cons.headroom if cons.headroom < 1.0 else bound


def machine_server_bound(idx: RunIndex, cons: Constraints) -> float:
    """The server bound a machine's figures are held against (the ladder, the front)."""
    return server_bound(cons, _context(idx))


def _recorded_bound(ctx: dict) -> float:
    return ctx.get("bound") or 100.0


def _context(idx: RunIndex) -> dict:
    bounds = sorted({b for r in idx.cells if (b := (result_bound(r))) is not None})
    return {
        "server": screen_factor(idx.cells, "server"),
        "offline": screen_factor(idx.cells, "offline"),
        "bound": bounds[0] if len(bounds) == 1 else None,
    }


def result_bound(rec: CellRecord) -> float | None:
    from harness.decide.load import number
    from harness.decide.scenario_results import result

    return number(result(rec, "server") or {}, "bound_ms")


def _invalid(rec: CellRecord, scenario: str, fig: Figure) -> str | None:
    from harness.decide.scenario_results import result

    res = result(rec, scenario) or {}
    if fig.source == SCREEN or res.get("valid") is not False:
        return None
    return (
        f"{scenario} result not valid under its rule ({res.get('rule') or 'no rule recorded'}): to decide, measure "
        "it again with more queries or a longer run"
    )


def decide(
    case: CandidateCase, idx: RunIndex, indexes: list[RunIndex], cons: Constraints
) -> CandidateDecision:
    """The use case on one machine, from every candidate it measured."""
    ctx = _context(idx)
    if cons.server_bound_ms is None and ctx["bound"] is not None:
        cons = replace(cons, server_bound_ms=ctx["bound"])  # the bound the run measured under, said as such
    dec = CandidateDecision(case, cons, idx, machine_label(idx, indexes))
    if case.accuracy_first:
        _ladder(dec, ctx)
    passing: list[Scored] = []
    for cand in candidates(idx):
        if case.batch1 and cand.rec.batch != 1:
            continue
        fig = case.figure(cand.rec, cons, ctx)
        if fig is None:
            dec.unscored += 1
            continue
        s = Scored(cand, fig)
        if fig.source == SCREEN:
            dec.screened.append(s)
        misses = _misses(case, s, cons)
        if misses:
            dec.misses.extend(misses)
        else:
            passing.append(s)
    sign = -1.0 if case.higher_is_better else 1.0
    ranked = sorted(passing, key=lambda s: (sign * s.fig.value, str(s.cand.rec.cell_id)))
    n = len(ranked) + len({id(m.scored) for m in dec.misses})
    if case.accuracy_first:
        scale_now = most_accurate.scale(ranked) if ranked else None
        best = most_accurate.most_accurate(ranked)[0][:1] if ranked else []
        limit = case.limit_ms(cons) if case.limit_ms is not None else server_bound(cons, ctx)
        dec.screened_out = most_accurate.screened_out(
            dec.misses, best[0] if best else None, own_name(case), scale_now, limit
        )
    if not ranked:
        dec.nearest = nearest_miss(dec)
        if n:
            dec.reason = f"none of {n} candidates meets the constraints"
            if dec.unscored:
                dec.reason += f" ({dec.unscored} more had no figure for this use case)"
        else:
            dec.reason = (
                f"not measured: none of the {dec.unscored} candidates of this machine has a {case.scenario} result "
                "or an end-to-end timing to screen it with (recorded before them, or run with --no-e2e)"
            )
        return dec
    group, scale = most_accurate.most_accurate(ranked) if case.accuracy_first else ([], None)
    group, dec.estimated_better = most_accurate.measured_first(group)
    pool = group or ranked
    dec.pick = pool[0]
    dec.tied, dec.tie_reason = _ties(case, pool)
    if dec.tied and case.second_objective:
        members = tie_order.order([dec.pick, *dec.tied])
        dec.pick, dec.tied, dec.tie_advice = members[0], members[1:], tie_order.advice(members)
    chosen = [dec.pick, *dec.tied]
    order = most_accurate.by_accuracy(ranked, scale) if case.accuracy_first else ranked
    dec.others = [s for s in order if not any(s is t for t in chosen)]
    dec.reason = f"the best of {len(ranked)} candidates meeting the constraints ({n} with a figure)"
    if case.accuracy_first:
        most_accurate.two_answers(dec, ranked, chosen, scale, len(group))
    if case.limit_ms is not None:
        limit = case.limit_ms(cons)
        dec.at_limit = headroom.at_limit(dec.pick, limit)
        if dec.at_limit:
            dec.with_margin = headroom.with_margin([*chosen, *dec.others], limit, dec.pick)
    return dec


def _ladder(dec: CandidateDecision, ctx: dict) -> None:
    """The machine's size ladder, and its line for this use case (the largest size keeping its bound)."""
    cons, bound = dec.cons, server_bound(dec.cons, ctx)
    dec.ladder = ladder.rungs(dec.idx, cons, bound)
    if dec.case.limit_ms is not None:
        said = f"the {fmt(dec.case.limit_ms(cons))} ms frame time"
        dec.ladder_line = ladder.line(dec.ladder, "camera", said)
    else:
        dec.ladder_line = ladder.line(dec.ladder, "server", f"the {fmt(bound)} ms bound unloaded")


def own_name(case: CandidateCase) -> str:
    """The name a rejection by the use case's own constraint carries."""
    return case.own_name or ("frame time" if case.key == "camera" else "p99 bound")


def _misses(case: CandidateCase, s: Scored, cons: Constraints) -> list[Miss]:
    rec, out = s.cand.rec, []
    for r in cons.failures(rec):
        out.append(Miss(s, r, _shortfall(r, rec, cons)))
    own = case.own(s.fig, cons)
    if own:
        name = own_name(case)
        out.append(Miss(s, rejection(rec, name, own[0]), own[1]))
    got = case.check(rec, cons) if case.check is not None else None
    if got:
        why, short = (got, 1.0) if isinstance(got, str) else got
        out.append(Miss(s, rejection(rec, case.check_name, why), short))
    why = _invalid(rec, case.scenario, s.fig)
    if why:
        out.append(Miss(s, rejection(rec, "validity", why), 0.5))
    return out


def _shortfall(r: Rejection, rec: CellRecord, cons: Constraints) -> float:
    from harness.decide.load import finite, number

    if r.constraint == "accuracy floor":
        floor = (cons.floors or {}).get(str(rec.precision_requested))
        ratio = number(rec.accuracy, "ratio")
        return (floor - ratio) / floor if floor and ratio is not None else 1.0
    if r.constraint == "memory cap" and cons.memory_cap_mib:
        mem = finite(rec.memory.host_peak_rss_mib) if rec.memory else None
        return (mem - cons.memory_cap_mib) / cons.memory_cap_mib if mem is not None else 1.0
    return 10.0  # excluded by the user's own choice (--min-shape): never the nearest miss if another is near


def _overlap(a: Interval, b: Interval, strict: bool) -> bool:
    return a.lo < b.hi and b.lo < a.hi if strict else a.overlaps(b)


def _ties(case: CandidateCase, ranked: list[Scored]) -> tuple[list[Scored], str]:
    """The candidates that cannot be told apart from the best (the best not included), and why."""
    best, tied, how = ranked[0], [], set()
    for s in ranked[1:]:
        if workload_key(s.cand.rec) == workload_key(best.cand.rec):
            r = paired.ratio(s.cand.rec, best.cand.rec)
            if r is not None and r.paired and r.ci is not None:
                if r.relation() == "tied":
                    tied.append(s)
                    how.add("the 95% interval of their paired p50 ratio (timed interleaved) holds 1")
                elif r.relation() == "faster":  # the paired p50 contradicts the figure's order: not separable
                    tied.append(s)
                    how.add("their paired p50 ratio (timed interleaved) puts them in the other order")
                continue
        a, b = best.fig.interval, s.fig.interval
        if a is None or b is None:
            tied.append(s)
            how.add("some have no interval, so they cannot be told apart")
        elif _overlap(a, b, case.strict_overlap):
            tied.append(s)
            how.add("their figures' intervals overlap")
    return tied, "; ".join(sorted(how))


@dataclass(frozen=True)
class ByCandidates:
    """A use case decided on each machine from every configuration it measured (registered by its module)."""

    case: CandidateCase
    order: int
    first_screen: str = ALWAYS

    @property
    def key(self) -> str:
        return self.case.key

    @property
    def scenario(self) -> str | None:
        return self.case.scenario

    def decide(self, indexes: list[RunIndex], cons: Constraints) -> list[Outcome]:
        out = []
        for idx in indexes:
            dec = decide(self.case, idx, indexes, cons)
            out.append(Outcome(answer_of(dec), entry(dec)))
        return out


# -- the page's form -----------------------------------------------------------------------------------------------
def figure_words(s: Scored) -> str:
    """The figure beside its own interval, and which statistic decided where it is not the use case's own:
    `e2e p90 14.6 ms [14.1-15.4] (the p90 decided: the p99, 15.6 ms, has no upper bound at 190 queries)`."""
    of = f"{s.fig.interval_of} " if s.fig.interval_of else ""
    said = f" ({s.fig.said})" if s.fig.said else ""
    shown = f" [{of}{interval_text(s.fig.interval)}]" if s.fig.interval_shown else ""
    return f"{s.fig.text}{shown}{said}" + screened_words(s.fig)


def _numbers(s: Scored) -> str:
    acc = s.cand.accuracy
    parts = [
        f"{s.fig.text}, interval {interval_text(s.fig.interval)} ({s.fig.interval_how})",
        s.fig.note,
        acc.text(),
    ]
    if acc.cost:
        parts.append(acc.cost)
    if acc.standin:
        parts.append(acc.standin)
    mem = s.cand.memory_mib()
    parts.append(f"host peak RSS {fmt(mem, 4)} MiB" if mem is not None else "memory not measured")
    return "; ".join(p for p in parts if p)


def _pick(s: Scored, machine: str) -> Pick:
    rec = s.cand.rec
    acc = s.cand.accuracy
    note = acc.text() + (f"; {acc.cost}" if acc.cost else "")
    return Pick(
        str(rec.backend),
        str(rec.device),
        machine,
        str(rec.cell_id),
        _numbers(s),
        f"{s.cand.short()} · {figure_words(s)}",
        note,
        host_bound.words(rec, s.cand.idx),
        measured=s.fig.source != SCREEN,
    )


def _two_answer_fields(dec: CandidateDecision) -> dict:
    """The latency-bound use cases' second answer, headroom and ladder, as the answer's fields."""
    if not dec.case.accuracy_first:
        return {}
    return {
        "faster": _pick(dec.fastest, dec.machine) if dec.fastest else None,
        "gives_up": dec.gives_up or None,
        "at_limit": dec.at_limit or None,
        "with_margin": _pick(dec.with_margin, dec.machine) if dec.with_margin else None,
        "ladder_line": dec.ladder_line or None,
        "ladder": tuple(r.as_dict() for r in dec.ladder),
    }


def _tie_words(dec: CandidateDecision) -> str:
    """What to do within the tie first (the second objective), then why they are tied."""
    if not dec.tie_advice:
        return dec.tie_reason
    return f"{dec.tie_advice}. Tied: {dec.tie_reason}" if dec.tie_reason else dec.tie_advice


def answer_of(dec: CandidateDecision) -> UseCaseAnswer:
    """The decision in the form the page's first screen and evidence section show."""
    rejections = tuple(m.rejection for m in dec.misses)
    screened = None
    if dec.screened:
        screened = (
            f"{len(dec.screened)} candidates have no {dec.case.scenario} result and were screened with their "
            "end-to-end timing: " + "; ".join(sorted({re.sub(r"\d+", "N", s.fig.note) for s in dec.screened}))
        )
    base = {
        "constraint": dec.constraint,
        "machine": dec.machine,
        "machine_pos": dec.idx.position,
        "rejected": rejected_text(rejections),
        "rejections": rejections,
        "nearest_miss": dec.nearest,
        "screened": screened,
        **_two_answer_fields(dec),
    }
    title, objective = dec.title, dec.case.objective
    if dec.pick is None:
        # False: no candidate of this machine has a figure for the use case at all
        measured = bool(dec.misses)
        return UseCaseAnswer(dec.key, title, objective, none_reason=dec.reason, measured=measured, **base)
    picks = [_pick(s, dec.machine) for s in [dec.pick, *dec.tied, *dec.others]]
    if dec.tied:
        k = 1 + len(dec.tied)
        return UseCaseAnswer(
            dec.key, title, objective, tied=tuple(picks[:k]), tie_reason=_tie_words(dec),
            others=tuple(picks[k:]), **base,
        )  # fmt: skip
    runner = picks[1] if len(picks) > 1 else None
    return UseCaseAnswer(dec.key, title, objective, picks[0], runner, others=tuple(picks[1:]), **base)
