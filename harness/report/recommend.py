"""Recommendations per use case, computed from the records.

Latency-type use cases compare backends on one workload (same model, task, head, shape, batch and precision) and
one timing scope (a `model` p50 is never ranked against a `model+h2d+d2h` one), the group where the most backends
qualify, so a winner is never a smaller model beating a larger one. Two backends timed together (interleaved) are
tied when the 95% interval of their paired p50 ratio holds 1 (harness.report.paired); backends not timed together
are tied when their p50 confidence intervals overlap. A tie is reported as one, never as a winner and a runner-up;
a record with too few rounds for an interval cannot be told apart either.
Unknown is unknown: a backend that does not report its operator fallback is not taken to have none.
Each recommendation names the winning cell, the runner-up and the numbers behind the choice, the tied cells, or
says why no measured cell qualifies.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from harness.history.stats import Interval
from harness.report import paired
from harness.report.fmt import fmt_bytes, fmt_num
from harness.report.index import RunIndex, export_only_backends, row_sort, workload_key
from harness.report.load import number, run_shape
from harness.report.matrix import machine_label, row_label
from harness.report.paired import latency_interval

log = logging.getLogger(__name__)

Cand = tuple[RunIndex, dict]


@dataclass(frozen=True)
class Pick:
    """A recommended cell and the measured numbers behind the choice."""

    backend: str
    device: str
    machine: str
    cell_id: str
    numbers: str


@dataclass(frozen=True)
class Recommendation:
    """One use case: winner and runner-up on the compared workload, or why no cell qualifies."""

    key: str
    title: str
    criterion: str
    winner: Pick | None = None
    runner_up: Pick | None = None
    workload: str | None = None
    none_reason: str | None = None
    tied: tuple[Pick, ...] = ()  # no winner: these cannot be told apart (the best first)
    tie_reason: str | None = None
    set_aside: str | None = (
        None  # qualifying cells left out of the comparison, and why (another timing scope)
    )
    rejected: str | None = (
        None  # cells that ran ok but failed a constraint (the accuracy floor), and by how much
    )

    def as_dict(self) -> dict:
        def pick(p: Pick | None) -> dict | None:
            return None if p is None else dict(p.__dict__)

        return {
            "key": self.key,
            "title": self.title,
            "criterion": self.criterion,
            "workload": self.workload,
            "winner": pick(self.winner),
            "runner_up": pick(self.runner_up),
            "none_reason": self.none_reason,
            "tied": [pick(p) for p in self.tied],
            "tie_reason": self.tie_reason,
            "set_aside": self.set_aside,
            "rejected": self.rejected,
        }


def _is_gpu(rec: dict) -> bool:
    return str(rec.get("device") or "cpu") != "cpu"


def _ms(rec: dict, path: str = "latency_ms.p50") -> str:
    v = number(rec, path)
    return f"{fmt_num(v)} ms" if v is not None else "n/a"


def _entrant(idx: RunIndex, rec: dict) -> tuple:
    return (idx.position, rec.get("device"), rec.get("backend"))


def _pick(idx: RunIndex, rec: dict, indexes: list[RunIndex], numbers: str) -> Pick:
    return Pick(
        str(rec.get("backend")),
        str(rec.get("device")),
        machine_label(idx, indexes),
        str(rec.get("cell_id")),
        numbers,
    )


def _workload_label(rec: dict) -> str:
    key = workload_key(rec)
    return f"{row_label(key[:5])} · {run_shape(rec)}" + (" (dynamic artifact)" if rec.get("dynamic") else "")


def _pool_reason(pool: list[Cand], what: str, lacking: int = 0, metric_name: str = "") -> str:
    """Why no cell qualifies: none of the kind ran, or what those that ran lacked."""
    if not pool:
        return f"no {what} cell was in this run"
    statuses: dict[str, int] = {}
    for _, rec in pool:
        statuses[str(rec.get("status"))] = statuses.get(str(rec.get("status")), 0) + 1
    counts = ", ".join(f"{n} {s}" for s, n in sorted(statuses.items()))
    why = f"; {lacking} otherwise qualifying cells have no {metric_name} recorded" if lacking else ""
    return f"no measured {what} cell qualifies on this machine ({len(pool)} ran: {counts}{why})"


def throughput_interval(rec: dict) -> Interval | None:
    """images/s at the ends of the p50 interval (batch x 1000 / p50)."""
    ci, batch = latency_interval(rec), rec.get("batch")
    if ci is None or not isinstance(batch, int) or ci.lo <= 0:
        return None
    return Interval(batch * 1000.0 / ci.hi, batch * 1000.0 / ci.lo, ci.level)


def split_ties(
    ranked: list[Cand], interval: Callable[[dict], Interval | None] | None
) -> tuple[list[Cand], str | None]:
    """The entrants that cannot be told apart from the first of `ranked` (itself included), and why.

    Two cells timed together (one workload, interleaved) are tied when the 95% interval of their paired p50 ratio
    holds 1 (harness.report.paired); cells that were not timed together are tied when their p50 intervals overlap,
    or either has too few rounds for an interval (unknown, so not separable). One entrant alone is never a tie.
    """
    if interval is None or len(ranked) < 2:
        return ranked[:1], None
    first = interval(ranked[0][1])
    tied, unknown, by_pair, by_overlap = [ranked[0]], False, False, False
    for cand in ranked[1:]:
        r = paired.ratio(cand[1], ranked[0][1])
        if r is not None and r.paired and r.ci is not None:
            if r.relation() == "tied":
                tied.append(cand)
                by_pair = True
            continue
        ci = interval(cand[1])
        if first is None or ci is None or ci.overlaps(first):
            tied.append(cand)
            unknown |= first is None or ci is None
            by_overlap = True
    if len(tied) < 2:
        return tied, None
    reasons = []
    if by_pair:
        reasons.append("the 95% interval of their paired p50 ratio (timed interleaved) holds 1")
    if by_overlap and unknown:
        reasons.append(
            "their p50s cannot be told apart: an interval needs at least 6 timed rounds, and some have fewer"
        )
    elif by_overlap:
        reasons.append("their p50 95% confidence intervals overlap (not timed together)")
    return tied, "; ".join(reasons)


@dataclass(frozen=True)
class RankedUseCase:
    """A use case answered by ranking qualifying cells on one metric within one workload."""

    key: str
    title: str
    criterion: str
    pool: Callable[[dict], bool]  # the cells that could have qualified (for the "none qualifies" reason)
    qualifies: Callable[[dict], bool]
    metric: Callable[[dict], float | None]
    higher_is_better: bool
    what: str  # how the pool is named in the "none qualifies" reason
    metric_name: str
    numbers: Callable[[dict], str]
    group_batch: bool = True  # False: cells of any batch compete (throughput)
    scoped: bool = False  # a timing figure: only cells of one timing scope compete
    interval: Callable[[dict], Interval | None] | None = None  # the metric's confidence interval (ties)


#: the share of the PyTorch fp32 reference's mAP50-95 a cell must keep to be recommended (where accuracy was scored)
ACCURACY_FLOORS = {"fp32": 0.99, "fp16": 0.99, "int8": 0.95}


def below_accuracy_floor(rec: dict, floors: dict[str, float] | None = None) -> str | None:
    """Why `rec` fails the accuracy floor of its precision, or None (also when its accuracy was not scored)."""
    ratio = number(rec, "accuracy.ratio")
    floor = (floors or ACCURACY_FLOORS).get(str(rec.get("precision_requested")))
    if ratio is None or floor is None or ratio >= floor:
        return None
    return f"{rec.get('backend')} {rec.get('precision_requested')} keeps {ratio:.3f} of the reference mAP50-95 (floor {floor:g})"


def _ranked(
    case: RankedUseCase, indexes: list[RunIndex], floors: dict[str, float] | None = None
) -> Recommendation:
    key, title, criterion, value = case.key, case.title, case.criterion, case.metric
    pool = [(i, r) for i in indexes for r in i.cells if case.pool(r)]
    qualifying = [(i, r) for i, r in pool if case.qualifies(r)]
    below = {id(r): why for _, r in qualifying if (why := below_accuracy_floor(r, floors))}
    qualifying = [(i, r) for i, r in qualifying if id(r) not in below]
    rejected = ("below the accuracy floor: " + "; ".join(sorted(set(below.values())))) if below else None
    cands = [(i, r) for i, r in qualifying if value(r) is not None]
    if not cands:
        reason = _pool_reason(pool, case.what, len(qualifying), case.metric_name)
        return Recommendation(key, title, criterion, none_reason=reason, rejected=rejected)
    groups: dict[tuple, list[Cand]] = {}
    for i, r in cands:
        wk = workload_key(r)
        gk = wk if case.group_batch else (*wk[:3], *wk[4:])
        groups.setdefault((*gk, _scope(r) if case.scoped else None), []).append((i, r))

    def group_rank(item: tuple[tuple, list[Cand]]) -> tuple:
        rec = item[1][0][1]
        entrants = len({_entrant(i, r) for i, r in item[1]})
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
    for i, r in sorted(members, key=lambda c: (sign * (value(c[1]) or 0.0), str(c[1].get("cell_id")))):
        best.setdefault(_entrant(i, r), (i, r))
    ranked = list(best.values())
    workload = _workload_label(ranked[0][1])
    if not case.group_batch:
        workload = workload.replace(f" · b{ranked[0][1].get('batch')} ·", " · any batch ·")
    if case.scoped:
        workload += f" · timing scope {_scope(ranked[0][1])}"
    aside = _set_aside(groups, gkey, case) if case.scoped else None
    tied, why = split_ties(ranked, case.interval)
    if len(tied) > 1:
        picks = tuple(_pick(i, r, indexes, case.numbers(r)) for i, r in tied)
        return Recommendation(
            key,
            title,
            criterion,
            workload=workload,
            tied=picks,
            tie_reason=why,
            set_aside=aside,
            rejected=rejected,
        )
    winner = _pick(*ranked[0], indexes, case.numbers(ranked[0][1]))
    runner = _pick(*ranked[1], indexes, case.numbers(ranked[1][1])) if len(ranked) > 1 else None
    return Recommendation(key, title, criterion, winner, runner, workload, set_aside=aside, rejected=rejected)


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
    said = ", ".join(sorted({f"{r.get('backend')} ({_scope(r)})" for _, r in others}))
    return f"not ranked with these, timed over another scope: {said}"


def _ci_text(rec: dict) -> str:
    ci = latency_interval(rec)
    if ci is None:
        return " (no interval: too few rounds)"
    return f" (95% CI {fmt_num(ci.lo)}-{fmt_num(ci.hi)})"


def _latency_numbers(rec: dict) -> str:
    rounds = number(rec, "latency_ms.rounds")
    tail = f", {int(rounds)} rounds" if rounds is not None else ""
    p99 = number(rec, "latency_ms.p99")
    if p99 is not None:
        tail += f", p99 {_ms(rec, 'latency_ms.p99')}"
    if (rec.get("latency_ms") or {}).get("unstable"):
        tail += ", unstable (rounds scattered)"
    pr = rec.get("paired") or {}
    if isinstance(pr.get("ratio"), int | float) and pr.get("reference") != rec.get("cell_id"):
        ci = pr.get("ratio_ci")
        ci_text = f" [{fmt_num(ci[0])}-{fmt_num(ci[1])}]" if ci else ""
        tail += f", {fmt_num(pr['ratio'])}×{ci_text} the p50 of {pr.get('reference_backend')} (paired)"
    return f"p50 {_ms(rec)}{_ci_text(rec)}{tail}, timing scope {_scope(rec)}"


def _scope(rec: dict) -> str:
    scope = (
        (rec.get("latency_ms") or {}).get("timing_scope") if isinstance(rec.get("latency_ms"), dict) else None
    )
    return str(scope or "n/a")


def _throughput_numbers(rec: dict) -> str:
    ips = number(rec, "throughput_ips")
    return (
        f"{fmt_num(ips) if ips is not None else 'n/a'} images/s at batch {rec.get('batch')}, p50 {_ms(rec)}"
    )


def _memory_numbers(rec: dict) -> str:
    host, dev = number(rec, "memory.host_peak_rss_mib"), number(rec, "memory.device_peak_process_mib")
    out = f"host peak RSS {fmt_num(host)} MiB" if host is not None else "host peak n/a"
    if dev is not None:
        out += f", device peak {fmt_num(dev)} MiB"
    return out + f", p50 {_ms(rec)}"


def _export_numbers(rec: dict) -> str:
    delegated, fallback = number(rec, "ops.delegated"), number(rec, "ops.fallback")
    parts = []
    if delegated is not None and fallback is not None:
        parts.append(f"{int(delegated)} of {int(delegated + fallback)} ops delegated")
    size = number(rec, "artifact_bytes")
    if size is not None:
        parts.append(f"artifact {fmt_bytes(size)}")
    export_s = number(rec, "export_s")
    if export_s is not None:
        parts.append(f"export {fmt_num(export_s)} s")
    return ", ".join(parts) or "exported (no op counts recorded)"


def _delegated_fraction(rec: dict) -> float | None:
    """Share of operators delegated; None (not ranked: unknown is not "none delegated") without op counts."""
    d, f = number(rec, "ops.delegated"), number(rec, "ops.fallback")
    if d is None or f is None or d + f <= 0:
        return None
    return d / (d + f)


def _dynamic_score(idx: RunIndex, recs: list[dict]) -> tuple[float, dict, str, dict] | None:
    """Worst p50 over one backend's sweep of a dynamic artifact, or None when a swept shape failed unremedied:
    (p50, the sweep record, the text, the record timed there: the sweep record or its remedy).

    A shape that failed but has a remedy that ran ok (letterbox padding for a size that is not a multiple of 32)
    counts with the remedy's p50; an artifact that needed a remedy (32*Dim) says so.
    """
    sweep = [r for r in recs if r.get("height") and r.get("status") != "skipped"]
    if not sweep:
        return None  # the probe never got to a shape: its export failed, or nothing was swept
    timed: list[tuple[float, dict, str, dict]] = []
    for r in sweep:
        used = r if r.get("status") == "ok" else idx.working_remedy(r)
        p50 = number(used, "latency_ms.p50") if used else None
        if p50 is None:
            return None
        via = f" via {used.get('remedy')}" if used is not r else ""
        timed.append((p50, r, f"{run_shape(r)}{via}", used))
    worst = max(timed, key=lambda t: t[0])
    artifact = {str(r.get("remedy")) for r in sweep if r.get("remedy")}
    note = f"; artifact exported via {', '.join(sorted(artifact))}" if artifact else ""
    shapes = ", ".join(t[2] for t in sorted(timed, key=lambda t: t[1].get("height") or 0))
    return worst[0], worst[1], f"worst p50 {fmt_num(worst[0])} ms over {shapes}{note}", worst[3]


def dynamic_inputs(indexes: list[RunIndex]) -> Recommendation:
    """Backends whose dynamic artifact ran at every swept size, ranked by their worst p50 over those sizes."""
    key, title = "dynamic", "Dynamic input sizes needed"
    criterion = "one artifact ran at every swept size (remedies allowed, and named); lowest worst-case p50"
    pool = [(i, r) for i in indexes for r in i.cells if r.get("dynamic")]
    entrants: dict[tuple, list[dict]] = {}
    for i, r in pool:
        ekey = (i.position, *workload_key(r)[:5], r.get("device"), r.get("backend"))
        entrants.setdefault(ekey, []).append(r)
    scored = []
    for ekey, recs in entrants.items():
        score = _dynamic_score(indexes[ekey[0]], recs)
        if score is not None:
            scored.append((score[0], ekey, score[1], score[2], score[3]))
    if not scored:
        return Recommendation(key, title, criterion, none_reason=_pool_reason(pool, "dynamic-shape"))
    scored.sort(key=lambda s: (s[0], str(s[1])))
    rows = {s[1][1:6] for s in scored}
    best_row = min(rows, key=lambda rk: (-sum(1 for s in scored if s[1][1:6] == rk), row_sort(rk)))
    ranked = [s for s in scored if s[1][1:6] == best_row]
    workload = row_label(best_row) + " · dynamic"
    # Ties on the worst shape's p50 interval: the record behind each entrant's score.
    timed = [(indexes[s[1][0]], s[4]) for s in ranked]
    tied, why = split_ties(timed, latency_interval)
    picks = [_pick(indexes[s[1][0]], s[2], indexes, s[3]) for s in ranked]
    if len(tied) > 1:
        chosen = tuple(picks[n] for n, t in enumerate(timed) if any(t is c for c in tied))
        return Recommendation(key, title, criterion, workload=workload, tied=chosen, tie_reason=why)
    runner = picks[1] if len(picks) > 1 else None
    return Recommendation(key, title, criterion, picks[0], runner, workload)


def clean_state(rec: dict) -> bool | None:
    """Whether a cell ran the simplest way: ok, no remedy, no fallback operator, the requested precision executed.

    None when that cannot be told (the backend does not report its fallback operators or the precision it ran):
    unknown is not clean, and not unclean either.
    """
    if rec.get("status") != "ok" or rec.get("remedy"):
        return False
    fallback, executed = number(rec, "ops.fallback"), rec.get("precision_executed")
    if (fallback is not None and fallback > 0) or (executed and executed != rec.get("precision_requested")):
        return False
    if fallback is None or not executed:
        return None
    return True


def _unknowns(recs: list[dict]) -> str:
    what = set()
    for r in recs:
        if clean_state(r) is None:
            if number(r, "ops.fallback") is None:
                what.add("operator fallback")
            if not r.get("precision_executed"):
                what.add("executed precision")
    return " and ".join(sorted(what))


def simplest(indexes: list[RunIndex]) -> Recommendation:
    """The backend that ran ok in most of its cells with no remedy, no operator fallback, precision as requested.

    A backend's share of clean cells is a range while some of its cells cannot be told (no fallback count, no
    executed precision): from the cells known clean to those that might be. A winner is named only when its
    lowest share beats every other backend's highest; otherwise the backends that could be first are tied.
    """
    key, title = "simplest", "Simplest deployment (no remedy needed)"
    criterion = (
        "share of the backend's cells that ran ok with no remedy, no operator fallback and the requested "
        "precision (a cell that does not report these is unknown, not clean); ties by best p50"
    )
    stats: dict[tuple, list[dict]] = {}
    for i in indexes:
        for r in i.cells:
            if r.get("status") not in ("skipped", "exported"):
                stats.setdefault((i.position, r.get("device"), r.get("backend")), []).append(r)

    scored = []
    for ekey, recs in stats.items():
        states = [clean_state(r) for r in recs]
        known, unknown = states.count(True), states.count(None)
        if known + unknown == 0:
            continue
        maybe = [r for r, st in zip(recs, states, strict=True) if st is not False]
        best = min(maybe, key=lambda r: number(r, "latency_ms.p50") or float("inf"))
        numbers = f"clean in {known} of {len(recs)} cells run"
        if unknown:
            numbers += f", unknown in {unknown} ({_unknowns(recs)} not reported)"
        if number(best, "latency_ms.p50") is not None:
            numbers += f"; best p50 {_ms(best)} ({_workload_label(best)})"
        lo, hi = known / len(recs), (known + unknown) / len(recs)
        scored.append((lo, hi, number(best, "latency_ms.p50") or float("inf"), ekey, best, numbers, recs))
    if not scored:
        pool = [(i, r) for i in indexes for r in i.cells if r.get("status") != "skipped"]
        return Recommendation(key, title, criterion, none_reason=_pool_reason(pool, "measured"))
    scored.sort(key=lambda s: (-s[0], -s[1], s[2], str(s[3])))
    top = scored[0]
    exact = top[0] == top[1]
    # Could another backend be first once its unknowns are known? (Equal known shares fall to the p50, as ever.)
    rivals = [s for s in scored[1:] if s[1] > top[0] or (s[1] == top[0] and not (exact and s[0] == s[1]))]
    picks = [_pick(indexes[s[3][0]], s[4], indexes, s[5]) for s in scored]
    if rivals:
        tied = [top, *rivals]
        why = "which is simplest depends on what is not recorded: " + "; ".join(
            f"{s[3][2]}: {_unknowns(s[6]) or 'nothing unknown'}" for s in tied if _unknowns(s[6])
        )
        order = [scored.index(s) for s in tied]
        return Recommendation(
            key,
            title,
            criterion,
            workload="all cells run",
            tied=tuple(picks[n] for n in order),
            tie_reason=why,
        )
    if top[0] == 0:  # the only backend left might be clean, but no cell of it is known to be
        why = f"no cell is known to have run clean: {top[3][2]}: {top[5]}"
        return Recommendation(key, title, criterion, none_reason=why)
    return Recommendation(
        key, title, criterion, picks[0], picks[1] if len(picks) > 1 else None, "all cells run"
    )


def _metric(path: str) -> Callable[[dict], float | None]:
    return lambda r: number(r, path)


def _ok_b1(r: dict) -> bool:
    return r.get("status") == "ok" and r.get("batch") == 1


def _runnable(r: dict) -> bool:
    return r.get("backend") not in export_only_backends()


USE_CASES = {
    "gpu-latency": RankedUseCase(
        "gpu-latency", "Lowest-latency batch-1 GPU server", "lowest p50 at batch 1 on a GPU device",
        lambda r: _is_gpu(r) and _runnable(r), _ok_b1, _metric("latency_ms.p50"), False, "GPU", "p50",
        _latency_numbers, scoped=True, interval=latency_interval,
    ),
    "gpu-throughput": RankedUseCase(
        "gpu-throughput", "Highest-throughput GPU", "highest images/s on a GPU device, any batch",
        lambda r: _is_gpu(r) and _runnable(r), lambda r: r.get("status") == "ok", _metric("throughput_ips"), True,
        "GPU", "throughput", _throughput_numbers, group_batch=False, scoped=True, interval=throughput_interval,
    ),
    "cpu-edge": RankedUseCase(
        "cpu-edge", "CPU-only edge", "lowest p50 at batch 1 on the CPU",
        lambda r: not _is_gpu(r) and _runnable(r), _ok_b1, _metric("latency_ms.p50"), False, "CPU", "p50",
        _latency_numbers, scoped=True, interval=latency_interval,
    ),
    "mobile-embedded": RankedUseCase(
        "mobile-embedded", "Mobile and embedded targets (export-only)",
        "exported artifact with the largest share of operators delegated to the target (no runtime here)",
        lambda r: r.get("status") == "exported" or not _runnable(r), lambda r: r.get("status") == "exported",
        _delegated_fraction, True, "export-only", "delegation count", _export_numbers,
    ),
    "lowest-memory": RankedUseCase(
        "lowest-memory", "Lowest memory", "lowest host peak RSS at batch 1 among cells that ran ok",
        _runnable, _ok_b1, _metric("memory.host_peak_rss_mib"), False, "measured",
        "host peak RSS", _memory_numbers,
    ),
}  # fmt: skip


def recommendations(indexes: list[RunIndex], floors: dict[str, float] | None = None) -> list[Recommendation]:
    """Every use case, in page order; `floors`: the accuracy floor per precision (default ACCURACY_FLOORS)."""
    return [
        _ranked(USE_CASES["gpu-latency"], indexes, floors),
        _ranked(USE_CASES["gpu-throughput"], indexes, floors),
        _ranked(USE_CASES["cpu-edge"], indexes, floors),
        dynamic_inputs(indexes),
        _ranked(USE_CASES["mobile-embedded"], indexes, floors),
        _ranked(USE_CASES["lowest-memory"], indexes, floors),
        simplest(indexes),
    ]
