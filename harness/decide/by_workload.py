"""Backend comparisons on one workload, across the rendered machines: the model-only use cases (CPU edge, GPU
latency, GPU throughput) and the export-only targets, each a `RankedUseCase` registered by its module.

They compare backends on one workload (same model, task, head, shape, batch and precision) and one timing scope (a
`model` p50 is never ranked against a `model+h2d+d2h` one), the group where the most backends qualify, so a winner
is never a smaller model beating a larger one. Two backends timed together (interleaved) are tied when the 95%
interval of their paired p50 ratio holds 1 (harness.decide.paired); backends not timed together are tied when their
p50 confidence intervals overlap. A tie is reported as one, never as a winner and a runner-up; a record with too few
rounds for an interval cannot be told apart either. Unknown is unknown: a backend that does not report its operator
fallback is not taken to have none. Every use case applies the accuracy floor and the user's memory cap; a cell that
fails one is named with its figure. For a run from before the scenarios these are the answer, and the per-machine use
cases say they were not measured.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from harness.core.record import CellRecord
from harness.decide.index import RunIndex, export_only_backends, row_of, row_sort, workload_key
from harness.decide.load import finite, number, run_shape, stat
from harness.decide.paired import latency_interval
from harness.decide.picks import (
    Cand,
    Constraints,
    UseCaseAnswer,
    entrant,
    make_pick,
    pool_reason,
    rejected_text,
    split_ties,
    workload_label,
)
from harness.decide.registry import IF_ANSWERED, NOT_SHOWN, Outcome
from harness.decide.words import fmt_bytes, fmt_num
from harness.measure.stats import Interval

log = logging.getLogger(__name__)


def is_gpu(rec: CellRecord) -> bool:
    return str(rec.device or "cpu") != "cpu"


def ms(rec: CellRecord, name: str = "p50") -> str:
    v = stat(rec.latency_ms, name)
    return f"{fmt_num(v)} ms" if v is not None else "n/a"


def throughput_interval(rec: CellRecord) -> Interval | None:
    """images/s at the ends of the p50 interval (batch x 1000 / p50)."""
    ci, batch = latency_interval(rec), rec.batch
    if ci is None or not isinstance(batch, int) or ci.lo <= 0:
        return None
    return Interval(batch * 1000.0 / ci.hi, batch * 1000.0 / ci.lo, ci.level)


@dataclass(frozen=True)
class RankedUseCase:
    """A use case answered by ranking qualifying cells on one metric within one workload."""

    key: str
    title: str
    criterion: str
    # the cells that could have qualified (for the "none qualifies" reason)
    pool: Callable[[CellRecord], bool]
    qualifies: Callable[[CellRecord], bool]
    metric: Callable[[CellRecord], float | None]
    higher_is_better: bool
    what: str  # how the pool is named in the "none qualifies" reason
    metric_name: str
    numbers: Callable[[CellRecord], str]
    group_batch: bool = True  # False: cells of any batch compete (throughput)
    scoped: bool = False  # a timing figure: only cells of one timing scope compete
    interval: Callable[[CellRecord], Interval | None] | None = None  # the metric's confidence interval (ties)
    figure: Callable[[CellRecord], str] = lambda r: ""  # the short figure of a pick (the first screen)
    capped: bool = True  # False: the memory cap cannot be checked (export-only artifacts do not run here)


NO_CAP = "memory cap not checked: export-only artifacts do not run on this machine"


def ranked(
    case: RankedUseCase,
    indexes: list[RunIndex],
    floors: dict[str, float] | None = None,
    memory_cap_mib: float | None = None,
) -> UseCaseAnswer:
    """The use case over the cells of `indexes`: rejected cells named with the constraint they fail, the best of
    the compared workload and timing scope, its runner-ups, or the cells tied with it."""
    key, title, criterion, value = case.key, case.title, case.criterion, case.metric
    cons = Constraints(floors, memory_cap_mib if case.capped else None)
    constraint = None if case.capped or memory_cap_mib is None else NO_CAP
    pool = [(i, r) for i in indexes for r in i.cells if case.pool(r)]
    qualifying = [(i, r) for i, r in pool if case.qualifies(r)]
    failed = {id(r): fails for _, r in qualifying if (fails := cons.failures(r))}
    rejections = tuple(f for _, r in qualifying for f in failed.get(id(r), ()))
    qualifying = [(i, r) for i, r in qualifying if id(r) not in failed]
    base = {"constraint": constraint, "rejected": rejected_text(rejections), "rejections": rejections}
    cands = [(i, r) for i, r in qualifying if value(r) is not None]
    if not cands:
        reason = pool_reason(pool, case.what, len(qualifying), case.metric_name)
        return UseCaseAnswer(key, title, criterion, none_reason=reason, **base)
    groups: dict[tuple, list[Cand]] = {}
    for i, r in cands:
        wk = workload_key(r)
        gk = wk if case.group_batch else (*wk[:3], *wk[4:])
        groups.setdefault((*gk, scope(r) if case.scoped else None), []).append((i, r))

    def group_rank(item: tuple[tuple, list[Cand]]) -> tuple:
        rec = item[1][0][1]
        entrants = len({entrant(i, r) for i, r in item[1]})
        return (
            -entrants,
            run_shape(rec) != "640x640",
            row_sort(row_of(workload_key(rec))),
            run_shape(rec),
            str(item[0][-1]),
        )

    gkey, members = min(groups.items(), key=group_rank)
    sign = -1.0 if case.higher_is_better else 1.0
    best: dict[tuple, Cand] = {}
    for i, r in sorted(members, key=lambda c: (sign * (value(c[1]) or 0.0), str(c[1].cell_id))):
        best.setdefault(entrant(i, r), (i, r))
    ranked = list(best.values())
    workload = workload_label(ranked[0][1])
    if not case.group_batch:
        workload = workload.replace(f" · b{ranked[0][1].batch} ·", " · any batch ·")
    if case.scoped:
        workload += f" · timing scope {scope(ranked[0][1])}"
    base |= {"workload": workload, "set_aside": _set_aside(groups, gkey, case) if case.scoped else None}
    picks = [make_pick(i, r, indexes, case.numbers(r), case.figure(r)) for i, r in ranked]
    tied, why = split_ties(ranked, case.interval)
    if len(tied) > 1:
        chosen = [n for n, c in enumerate(ranked) if any(c is t for t in tied)]
        return UseCaseAnswer(
            key,
            title,
            criterion,
            tied=tuple(picks[n] for n in chosen),
            tie_reason=why,
            others=tuple(p for n, p in enumerate(picks) if n not in chosen),
            **base,
        )
    runner = picks[1] if len(picks) > 1 else None
    return UseCaseAnswer(key, title, criterion, picks[0], runner, others=tuple(picks[1:]), **base)


def _set_aside(groups: dict[tuple, list[Cand]], chosen: tuple, case: RankedUseCase) -> str | None:
    """Cells of the chosen workload timed over another scope: named, never ranked with the others."""
    others = [
        (i, r)
        for gk, members in groups.items()
        if gk[:-1] == chosen[:-1] and gk != chosen
        for i, r in members
    ]
    if not others:
        return None
    said = ", ".join(sorted({f"{r.backend} ({scope(r)})" for _, r in others}))
    return f"not ranked with these, timed over another scope: {said}"


def _ci_text(rec: CellRecord) -> str:
    ci = latency_interval(rec)
    if ci is None:
        return " (no interval: too few rounds)"
    return f" (95% CI {fmt_num(ci.lo)}-{fmt_num(ci.hi)})"


def latency_numbers(rec: CellRecord) -> str:
    rounds = stat(rec.latency_ms, "rounds")
    tail = f", {int(rounds)} rounds" if rounds is not None else ""
    p99 = stat(rec.latency_ms, "p99")
    if p99 is not None:
        tail += f", p99 {ms(rec, 'p99')}"
    if rec.latency_ms and rec.latency_ms.unstable:
        tail += ", unstable (rounds scattered)"
    pr = rec.paired or {}
    if isinstance(pr.get("ratio"), int | float) and pr.get("reference") != rec.cell_id:
        ci = pr.get("ratio_ci")
        ci_text = f" [{fmt_num(ci[0])}-{fmt_num(ci[1])}]" if ci else ""
        tail += f", {fmt_num(pr['ratio'])}×{ci_text} the p50 of {pr.get('reference_backend')} (paired)"
    return f"p50 {ms(rec)}{_ci_text(rec)}{tail}, timing scope {scope(rec)}"


def scope(rec: CellRecord) -> str:
    scope = rec.latency_ms.timing_scope if rec.latency_ms else None
    return str(scope or "n/a")


def throughput_numbers(rec: CellRecord) -> str:
    ips = finite(rec.throughput_ips)
    return f"{fmt_num(ips) if ips is not None else 'n/a'} images/s at batch {rec.batch}, p50 {ms(rec)}"


def latency_figure(rec: CellRecord) -> str:
    said = scope(rec)
    return f"model-only p50 {ms(rec)}" + (f" (timing scope {said})" if said != "model" else "")


def throughput_figure(rec: CellRecord) -> str:
    ips = finite(rec.throughput_ips)
    return f"{fmt_num(ips) if ips is not None else 'n/a'} img/s at batch {rec.batch}, model only"


def export_figure(rec: CellRecord) -> str:
    d, f = number(rec.ops, "delegated"), number(rec.ops, "fallback")
    return f"{int(d or 0)} of {int((d or 0) + (f or 0))} ops delegated, export only"


def export_numbers(rec: CellRecord) -> str:
    delegated, fallback = number(rec.ops, "delegated"), number(rec.ops, "fallback")
    parts = []
    if delegated is not None and fallback is not None:
        parts.append(f"{int(delegated)} of {int(delegated + fallback)} ops delegated")
    size = finite(rec.artifact_bytes)
    if size is not None:
        parts.append(f"artifact {fmt_bytes(size)}")
    export_s = finite(rec.export_s)
    if export_s is not None:
        parts.append(f"export {fmt_num(export_s)} s")
    return ", ".join(parts) or "exported (no op counts recorded)"


def delegated_fraction(rec: CellRecord) -> float | None:
    """Share of operators delegated; None (not ranked: unknown is not "none delegated") without op counts."""
    d, f = number(rec.ops, "delegated"), number(rec.ops, "fallback")
    if d is None or f is None or d + f <= 0:
        return None
    return d / (d + f)


def throughput(r: CellRecord) -> float | None:
    return finite(r.throughput_ips)


def ok_b1(r: CellRecord) -> bool:
    return r.status == "ok" and r.batch == 1


def runnable(r: CellRecord) -> bool:
    return r.backend not in export_only_backends()


@dataclass(frozen=True)
class ByWorkload:
    """A backend comparison on one workload, across the rendered machines (registered by its module)."""

    case: RankedUseCase
    order: int
    first_screen: str = IF_ANSWERED
    scenario: str | None = None

    @property
    def key(self) -> str:
        return self.case.key

    def decide(self, indexes: list[RunIndex], cons: Constraints) -> list[Outcome]:
        return [Outcome(ranked(self.case, indexes, cons.floors, cons.memory_cap_mib))]


@dataclass(frozen=True)
class Across:
    """A use case answered across the rendered machines by one function of the records and the memory cap
    (dynamic input sizes, the simplest deployment: harness.decide.deploy)."""

    key: str
    order: int
    answer: Callable[[list[RunIndex], float | None], UseCaseAnswer]
    first_screen: str = NOT_SHOWN
    scenario: str | None = None

    def decide(self, indexes: list[RunIndex], cons: Constraints) -> list[Outcome]:
        return [Outcome(self.answer(indexes, cons.memory_cap_mib))]
