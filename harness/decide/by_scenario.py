"""Use cases answered per machine from the scenario records: what to ship on this machine for a camera, several
cameras, a server, an offline batch job, or the least memory.

Each use case is an objective under constraints. Its own constraint (the frame time, the server's p99 bound, the
scenario's validity rule) comes first, then the constraints every use case applies (the accuracy floor, the
user's memory cap). Cells are compared on one workload of the machine (the one where the most backends have the
scenario), every rejected cell is named with the figure that failed, and the best cell is tied with those whose
confidence intervals overlap its own: the e2e p99 interval for latency, the rate interval (last passing to first
failing rate) for a server, the images/s interval offline. A cell without an interval cannot be told apart.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from harness.core.record import CellRecord
from harness.decide import figures as fig
from harness.decide.entries import other_entry
from harness.decide.index import (
    RunIndex,
    export_only_backends,
    machine_label,
    row_of,
    row_sort,
    workload_key,
)
from harness.decide.load import run_shape
from harness.decide.picks import (
    Constraints,
    Rejection,
    UseCaseAnswer,
    make_pick,
    rejected_text,
    rejection,
    workload_label,
)
from harness.decide.registry import ALWAYS, Outcome
from harness.decide.scenario_results import (
    FRAME_MS,
    any_scenarios,
    result,
)
from harness.decide.words import fmt_num
from harness.measure.stats import Interval

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ScenarioCase:
    """A use case ranked on one figure of one scenario (or of the record, `scenario` None) on each machine."""

    key: str
    title: str
    objective: str
    constraint: str  # the use case's own constraint, in words
    scenario: str | None
    value: Callable[[CellRecord], float | None]
    higher_is_better: bool
    # the use case's own constraints: (name, why a cell fails it with its figure, or None)
    checks: tuple[tuple[str, Callable[[CellRecord], str | None]], ...]
    # the figure's confidence interval; None: no ties
    interval: Callable[[CellRecord], Interval | None] | None
    figure: Callable[[CellRecord], str]  # the short figure of a pick (first screen)
    numbers: Callable[[CellRecord], str]  # the figures behind a pick (the evidence section)
    tie_words: str = ""  # `their e2e p99 95% intervals overlap`
    batch1: bool = False
    secondary: Callable[[CellRecord], float | None] | None = None  # ranks cells equal on the first figure
    # a tie also needs this (equal stream counts)
    same_level: Callable[[CellRecord, CellRecord], bool] | None = None
    # intervals touching at one end are apart (rate steps: one passed there, the other failed)
    strict_overlap: bool = False
    # the constraint in words, from the compared cells' records (the server's p99 bound)
    describe: Callable[[list[CellRecord]], str] | None = None


def _runnable(rec: CellRecord) -> bool:
    return rec.status == "ok" and rec.backend not in export_only_backends()


FRAME = f"{fmt_num(FRAME_MS)} ms"


def validity(name: str) -> tuple[str, Callable[[CellRecord], str | None]]:
    return ("validity", fig.invalid(name))


def _group_rank(members: list[CellRecord]) -> tuple:
    rec = members[0]
    return (
        -len({(r.device, r.backend) for r in members}),
        run_shape(rec) != "640x640",
        row_sort(row_of(workload_key(rec))),
        run_shape(rec),
    )


def _overlap(a: Interval, b: Interval, strict: bool) -> bool:
    return a.lo < b.hi and b.lo < a.hi if strict else a.overlaps(b)


def _ties(case: ScenarioCase, ranked: list[CellRecord]) -> tuple[list[CellRecord], str | None]:
    """The cells that cannot be told apart from the best (itself first), and why."""
    if case.interval is None or len(ranked) < 2:
        return ranked[:1], None
    best = ranked[0]
    first, tied, unknown = case.interval(best), [best], False
    for rec in ranked[1:]:
        if case.same_level and not case.same_level(rec, best):
            continue
        ci = case.interval(rec)
        if first is None or ci is None or _overlap(ci, first, case.strict_overlap):
            tied.append(rec)
            unknown |= first is None or ci is None
    if len(tied) < 2:
        return tied, None
    if unknown:
        return tied, "they cannot be told apart: some have no confidence interval recorded"
    return tied, case.tie_words


def not_measured(
    case: ScenarioCase, idx: RunIndex, indexes: list[RunIndex], cons: Constraints
) -> UseCaseAnswer:
    """The use case on a machine none of whose cells ran its scenario: said so, never a pick."""
    if not any_scenarios([idx]):
        why = (
            f"not measured: no record of this run has scenario results (recorded before the {case.scenario} "
            "scenario existed); the model-only comparisons stand in"
        )
    else:
        why = f"not measured: no cell of this machine that ran ok has a {case.scenario} result"
    return UseCaseAnswer(
        case.key,
        case.title,
        case.objective,
        none_reason=why,
        constraint=case.constraint,
        machine=machine_label(idx, indexes),
        machine_pos=idx.position,
        measured=False,
    )


def scenario_pick(
    case: ScenarioCase, idx: RunIndex, indexes: list[RunIndex], cons: Constraints
) -> UseCaseAnswer:
    """The use case on one machine: the best cell of the compared workload that meets every constraint."""
    measured = [
        r
        for r in idx.cells
        if _runnable(r)
        and (case.scenario is None or result(r, case.scenario) is not None)
        and (not case.batch1 or r.batch == 1)
        and (case.scenario is not None or case.value(r) is not None)
    ]
    if not measured:
        if case.scenario is None:
            return UseCaseAnswer(
                case.key,
                case.title,
                case.objective,
                none_reason="no cell that ran ok at batch 1 has the figure measured",
                constraint=case.constraint,
                machine=machine_label(idx, indexes),
                machine_pos=idx.position,
            )
        return not_measured(case, idx, indexes, cons)
    groups: dict[tuple, list[CellRecord]] = {}
    for r in measured:
        groups.setdefault(workload_key(r), []).append(r)
    members = min(groups.values(), key=_group_rank)
    passing, rejections = [], []
    for r in members:
        own = next(((name, why) for name, check in case.checks if (why := check(r))), None)
        fails: list[Rejection] = cons.failures(r)
        if own:  # after the accuracy floor, before the memory cap
            at = 1 if fails and fails[0].constraint == "accuracy floor" else 0
            fails.insert(at, rejection(r, own[0], own[1]))
        if fails:
            rejections.extend(fails)
        else:
            passing.append(r)
    sign = -1.0 if case.higher_is_better else 1.0

    def rank(r: CellRecord) -> tuple:
        second = case.secondary(r) if case.secondary else None
        return (sign * (case.value(r) or 0.0), sign * (second or 0.0), str(r.cell_id))

    ranked = sorted(passing, key=rank)
    said = case.describe(members) if case.describe else case.constraint
    base = {
        "workload": workload_label(members[0]),
        "constraint": said,
        "machine": machine_label(idx, indexes),
        "machine_pos": idx.position,
        "rejected": rejected_text(rejections),
        "rejections": tuple(rejections),
    }
    if not ranked:
        why = f"no cell meets the constraints ({len(members)} measured, each rejected below)"
        return UseCaseAnswer(case.key, case.title, case.objective, none_reason=why, **base)
    picks = [make_pick(idx, r, indexes, case.numbers(r), case.figure(r)) for r in ranked]
    tied, why = _ties(case, ranked)
    if len(tied) > 1:
        return UseCaseAnswer(
            case.key,
            case.title,
            case.objective,
            tied=_in_order(picks, ranked, tied),
            tie_reason=why,
            others=tuple(p for p, r in zip(picks, ranked, strict=True) if not any(r is t for t in tied)),
            **base,
        )
    runner = picks[1] if len(picks) > 1 else None
    return UseCaseAnswer(
        case.key, case.title, case.objective, picks[0], runner, others=tuple(picks[1:]), **base
    )


def _in_order(picks: list, ranked: list[CellRecord], tied: list[CellRecord]) -> tuple:
    return tuple(p for p, r in zip(picks, ranked, strict=True) if any(r is t for t in tied))


@dataclass(frozen=True)
class ByScenario:
    """A use case decided on each machine from one workload's scenario results (registered by its module).
    `at`: the case as the constraints make it (a constraint that follows --camera-fps, say), when they change it."""

    case: ScenarioCase
    order: int
    first_screen: str = ALWAYS
    at: Callable[[ScenarioCase, Constraints], ScenarioCase] | None = None

    @property
    def key(self) -> str:
        return self.case.key

    @property
    def scenario(self) -> str | None:
        return self.case.scenario

    def decide(self, indexes: list[RunIndex], cons: Constraints) -> list[Outcome]:
        case = self.at(self.case, cons) if self.at else self.case
        out = []
        for idx in indexes:
            answer = scenario_pick(case, idx, indexes, cons)
            out.append(Outcome(answer, other_entry(answer, idx, cons)))
        return out
