"""Recommendations per use case, computed from the records.

Two kinds. The use cases a user deploys for (a camera, several cameras, a server, offline batches, the least
memory) are answered per machine from the scenario records (harness.report.usecases): what to ship on this
machine. The model-only use cases below compare backends across the rendered machines on the model-only p50 and
images/s, as the report always has; for a run from before the scenarios they are the answer, and the scenario use
cases say they were not measured.

Latency-type use cases compare backends on one workload (same model, task, head, shape, batch and precision) and
one timing scope (a `model` p50 is never ranked against a `model+h2d+d2h` one), the group where the most backends
qualify, so a winner is never a smaller model beating a larger one. Two backends timed together (interleaved) are
tied when the 95% interval of their paired p50 ratio holds 1 (harness.report.paired); backends not timed together
are tied when their p50 confidence intervals overlap. A tie is reported as one, never as a winner and a runner-up;
a record with too few rounds for an interval cannot be told apart either.
Unknown is unknown: a backend that does not report its operator fallback is not taken to have none.
Every use case applies the accuracy floor and the user's memory cap; a cell that fails one is named with its figure.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

from harness.core.record import CellRecord
from harness.measure.stats import Interval
from harness.report.deploy_cases import clean_state, dynamic_inputs, simplest
from harness.report.fmt import fmt_bytes, fmt_num
from harness.report.index import RunIndex, export_only_backends, row_sort, workload_key
from harness.report.load import finite, number, p50, run_shape, stat
from harness.report.paired import latency_interval
from harness.report.picks import (
    ACCURACY_FLOORS,
    Cand,
    Constraints,
    Recommendation,
    below_accuracy_floor,
    entrant,
    make_pick,
    pool_reason,
    rejected_text,
    split_ties,
    workload_label,
)
from harness.report.scenarios import CAMERA_FPS
from harness.report.shipping import Decision, recommendation
from harness.report.shipping import per_machine as ship_per_machine
from harness.report.usecase_figures import multi_check_at
from harness.report.usecases import SCENARIO_CASES, scenario_pick

log = logging.getLogger(__name__)

__all__ = [
    "ACCURACY_FLOORS",
    "USE_CASES",
    "below_accuracy_floor",
    "clean_state",
    "dynamic_inputs",
    "recommendations",
    "simplest",
    "split_ties",
]


def _is_gpu(rec: CellRecord) -> bool:
    return str(rec.device or "cpu") != "cpu"


def _ms(rec: CellRecord, name: str = "p50") -> str:
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


def _ranked(
    case: RankedUseCase,
    indexes: list[RunIndex],
    floors: dict[str, float] | None = None,
    memory_cap_mib: float | None = None,
) -> Recommendation:
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
        return Recommendation(key, title, criterion, none_reason=reason, **base)
    groups: dict[tuple, list[Cand]] = {}
    for i, r in cands:
        wk = workload_key(r)
        gk = wk if case.group_batch else (*wk[:3], *wk[4:])
        groups.setdefault((*gk, _scope(r) if case.scoped else None), []).append((i, r))

    def group_rank(item: tuple[tuple, list[Cand]]) -> tuple:
        rec = item[1][0][1]
        entrants = len({entrant(i, r) for i, r in item[1]})
        return (
            -entrants,
            run_shape(rec) != "640x640",
            row_sort(workload_key(rec)[:5]),
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
        workload += f" · timing scope {_scope(ranked[0][1])}"
    base |= {"workload": workload, "set_aside": _set_aside(groups, gkey, case) if case.scoped else None}
    picks = [make_pick(i, r, indexes, case.numbers(r), case.figure(r)) for i, r in ranked]
    tied, why = split_ties(ranked, case.interval)
    if len(tied) > 1:
        chosen = [n for n, c in enumerate(ranked) if any(c is t for t in tied)]
        return Recommendation(
            key,
            title,
            criterion,
            tied=tuple(picks[n] for n in chosen),
            tie_reason=why,
            others=tuple(p for n, p in enumerate(picks) if n not in chosen),
            **base,
        )
    runner = picks[1] if len(picks) > 1 else None
    return Recommendation(key, title, criterion, picks[0], runner, others=tuple(picks[1:]), **base)


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
    said = ", ".join(sorted({f"{r.backend} ({_scope(r)})" for _, r in others}))
    return f"not ranked with these, timed over another scope: {said}"


def _ci_text(rec: CellRecord) -> str:
    ci = latency_interval(rec)
    if ci is None:
        return " (no interval: too few rounds)"
    return f" (95% CI {fmt_num(ci.lo)}-{fmt_num(ci.hi)})"


def _latency_numbers(rec: CellRecord) -> str:
    rounds = stat(rec.latency_ms, "rounds")
    tail = f", {int(rounds)} rounds" if rounds is not None else ""
    p99 = stat(rec.latency_ms, "p99")
    if p99 is not None:
        tail += f", p99 {_ms(rec, 'p99')}"
    if rec.latency_ms and rec.latency_ms.unstable:
        tail += ", unstable (rounds scattered)"
    pr = rec.paired or {}
    if isinstance(pr.get("ratio"), int | float) and pr.get("reference") != rec.cell_id:
        ci = pr.get("ratio_ci")
        ci_text = f" [{fmt_num(ci[0])}-{fmt_num(ci[1])}]" if ci else ""
        tail += f", {fmt_num(pr['ratio'])}×{ci_text} the p50 of {pr.get('reference_backend')} (paired)"
    return f"p50 {_ms(rec)}{_ci_text(rec)}{tail}, timing scope {_scope(rec)}"


def _scope(rec: CellRecord) -> str:
    scope = rec.latency_ms.timing_scope if rec.latency_ms else None
    return str(scope or "n/a")


def _throughput_numbers(rec: CellRecord) -> str:
    ips = finite(rec.throughput_ips)
    return f"{fmt_num(ips) if ips is not None else 'n/a'} images/s at batch {rec.batch}, p50 {_ms(rec)}"


def _latency_figure(rec: CellRecord) -> str:
    scope = _scope(rec)
    return f"model-only p50 {_ms(rec)}" + (f" (timing scope {scope})" if scope != "model" else "")


def _throughput_figure(rec: CellRecord) -> str:
    ips = finite(rec.throughput_ips)
    return f"{fmt_num(ips) if ips is not None else 'n/a'} img/s at batch {rec.batch}, model only"


def _export_figure(rec: CellRecord) -> str:
    d, f = number(rec.ops, "delegated"), number(rec.ops, "fallback")
    return f"{int(d or 0)} of {int((d or 0) + (f or 0))} ops delegated, export only"


def _export_numbers(rec: CellRecord) -> str:
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


def _delegated_fraction(rec: CellRecord) -> float | None:
    """Share of operators delegated; None (not ranked: unknown is not "none delegated") without op counts."""
    d, f = number(rec.ops, "delegated"), number(rec.ops, "fallback")
    if d is None or f is None or d + f <= 0:
        return None
    return d / (d + f)


def _throughput(r: CellRecord) -> float | None:
    return finite(r.throughput_ips)


def _ok_b1(r: CellRecord) -> bool:
    return r.status == "ok" and r.batch == 1


def _runnable(r: CellRecord) -> bool:
    return r.backend not in export_only_backends()


USE_CASES = {
    "gpu-latency": RankedUseCase(
        "gpu-latency", "Lowest-latency batch-1 GPU server", "lowest model-only p50 at batch 1 on a GPU device",
        lambda r: _is_gpu(r) and _runnable(r), _ok_b1, p50, False, "GPU", "p50",
        _latency_numbers, scoped=True, interval=latency_interval, figure=_latency_figure,
    ),
    "gpu-throughput": RankedUseCase(
        "gpu-throughput", "Highest-throughput GPU", "highest model-only images/s on a GPU device, any batch",
        lambda r: _is_gpu(r) and _runnable(r), lambda r: r.status == "ok", _throughput, True,
        "GPU", "throughput", _throughput_numbers, group_batch=False, scoped=True, interval=throughput_interval,
        figure=_throughput_figure,
    ),
    "cpu-edge": RankedUseCase(
        "cpu-edge", "CPU-only edge", "lowest model-only p50 at batch 1 on the CPU",
        lambda r: not _is_gpu(r) and _runnable(r), _ok_b1, p50, False, "CPU", "p50",
        _latency_numbers, scoped=True, interval=latency_interval, figure=_latency_figure,
    ),
    "mobile-embedded": RankedUseCase(
        "mobile-embedded", "Mobile and embedded targets (export-only)",
        "exported artifact with the largest share of operators delegated to the target (no runtime here)",
        lambda r: r.status == "exported" or not _runnable(r), lambda r: r.status == "exported",
        _delegated_fraction, True, "export-only", "delegation count", _export_numbers, figure=_export_figure,
        capped=False,
    ),
}  # fmt: skip
#: the model-only use cases, answered across the rendered machines, in page order
MODEL_ONLY = ("cpu-edge", "gpu-latency", "gpu-throughput")


def _at_fps(case, fps: float):
    """Several cameras at --camera-fps: the frame time its multi-stream p99 is checked against."""
    if case.key != "multi-camera" or fps == CAMERA_FPS:
        return case
    frame = f"{fmt_num(1000.0 / fps)} ms"
    checks = (("frame time", multi_check_at(fps)), *case.checks[1:])
    return replace(
        case,
        title=f"Several cameras, {fps:g} FPS each",
        constraint=f"multi-stream p99 per query within the {frame} frame time",
        checks=checks,
    )


def recommendations(
    indexes: list[RunIndex],
    floors: dict[str, float] | None = None,
    memory_cap_mib: float | None = None,
    cons: Constraints | None = None,
    decisions: list[Decision] | None = None,
) -> list[Recommendation]:
    """Every use case, in page order: the deployment use cases per machine (camera, server and offline from every
    measured configuration, harness.report.shipping; several cameras and the least memory from the scenario
    records, harness.report.usecases), mobile targets, the model-only use cases, dynamic shapes and the simplest
    deployment. `floors`: the accuracy floor per precision (default ACCURACY_FLOORS); `memory_cap_mib`: the most
    memory a recommended cell may use; `cons` all the constraints at once (it wins over the two); `decisions`: the
    shipping decisions already made for these constraints (made here when None)."""
    cons = cons or Constraints(floors, memory_cap_mib)
    floors, memory_cap_mib = cons.floors, cons.memory_cap_mib
    decisions = decisions if decisions is not None else ship_per_machine(indexes, cons)
    shipped = {(d.key, d.idx.position): d for d in decisions}
    per_machine = [
        recommendation(shipped[(case.key, idx.position)])
        if (case.key, idx.position) in shipped
        else scenario_pick(_at_fps(case, cons.camera_fps), idx, indexes, cons)
        for case in SCENARIO_CASES
        for idx in indexes
    ]
    return [
        *per_machine,
        _ranked(USE_CASES["mobile-embedded"], indexes, floors, memory_cap_mib),
        *(_ranked(USE_CASES[k], indexes, floors, memory_cap_mib) for k in MODEL_ONLY),
        dynamic_inputs(indexes, memory_cap_mib),
        simplest(indexes, memory_cap_mib),
    ]
