"""Recommendations per use case, computed from the records.

Latency-type use cases compare backends on one workload (same model, task, head, shape, batch and precision),
the workload where the most backends qualify, so a winner is never a smaller model beating a larger one.
Each recommendation names the winning cell, the runner-up and the numbers behind the choice, or says why no
measured cell qualifies.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from harness.report.fmt import fmt_bytes, fmt_num
from harness.report.index import RunIndex, export_only_backends, row_sort, workload_key
from harness.report.load import number, run_shape
from harness.report.matrix import machine_label, row_label

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


def _ranked(case: RankedUseCase, indexes: list[RunIndex]) -> Recommendation:
    key, title, criterion, value = case.key, case.title, case.criterion, case.metric
    pool = [(i, r) for i in indexes for r in i.cells if case.pool(r)]
    qualifying = [(i, r) for i, r in pool if case.qualifies(r)]
    cands = [(i, r) for i, r in qualifying if value(r) is not None]
    if not cands:
        reason = _pool_reason(pool, case.what, len(qualifying), case.metric_name)
        return Recommendation(key, title, criterion, none_reason=reason)
    groups: dict[tuple, list[Cand]] = {}
    for i, r in cands:
        wk = workload_key(r)
        groups.setdefault(wk if case.group_batch else (*wk[:3], *wk[4:]), []).append((i, r))

    def group_rank(item: tuple[tuple, list[Cand]]) -> tuple:
        rec = item[1][0][1]
        entrants = len({_entrant(i, r) for i, r in item[1]})
        return (-entrants, run_shape(rec) != "640x640", row_sort(workload_key(rec)[:5]), run_shape(rec))

    _, members = min(groups.items(), key=group_rank)
    sign = -1.0 if case.higher_is_better else 1.0
    best: dict[tuple, Cand] = {}
    for i, r in sorted(members, key=lambda c: (sign * (value(c[1]) or 0.0), str(c[1].get("cell_id")))):
        best.setdefault(_entrant(i, r), (i, r))
    ranked = list(best.values())
    winner = _pick(*ranked[0], indexes, case.numbers(ranked[0][1]))
    runner = _pick(*ranked[1], indexes, case.numbers(ranked[1][1])) if len(ranked) > 1 else None
    workload = _workload_label(ranked[0][1])
    if not case.group_batch:
        workload = workload.replace(f" · b{ranked[0][1].get('batch')} ·", " · any batch ·")
    return Recommendation(key, title, criterion, winner, runner, workload)


def _latency_numbers(rec: dict) -> str:
    return f"p50 {_ms(rec)}, p99 {_ms(rec, 'latency_ms.p99')}, timing scope {_scope(rec)}"


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


def _delegated_fraction(rec: dict) -> float:
    """Share of operators delegated; -1 (ranked last) when the record has no op counts."""
    d, f = number(rec, "ops.delegated"), number(rec, "ops.fallback")
    if d is None or f is None or d + f <= 0:
        return -1.0
    return d / (d + f)


def _dynamic_score(idx: RunIndex, recs: list[dict]) -> tuple[float, dict, str] | None:
    """Worst p50 over one backend's sweep of a dynamic artifact, or None when a swept shape failed unremedied.

    A shape that failed but has a remedy that ran ok (letterbox padding for a size that is not a multiple of 32)
    counts with the remedy's p50; an artifact that needed a remedy (32*Dim) says so.
    """
    sweep = [r for r in recs if r.get("height") and r.get("status") != "skipped"]
    if not sweep:
        return None  # the probe never got to a shape: its export failed, or nothing was swept
    timed: list[tuple[float, dict, str]] = []
    for r in sweep:
        used = r if r.get("status") == "ok" else idx.working_remedy(r)
        p50 = number(used, "latency_ms.p50") if used else None
        if p50 is None:
            return None
        via = f" via {used.get('remedy')}" if used is not r else ""
        timed.append((p50, r, f"{run_shape(r)}{via}"))
    worst = max(timed, key=lambda t: t[0])
    artifact = {str(r.get("remedy")) for r in sweep if r.get("remedy")}
    note = f"; artifact exported via {', '.join(sorted(artifact))}" if artifact else ""
    shapes = ", ".join(t[2] for t in sorted(timed, key=lambda t: t[1].get("height") or 0))
    return worst[0], worst[1], f"worst p50 {fmt_num(worst[0])} ms over {shapes}{note}"


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
            scored.append((score[0], ekey, score[1], score[2]))
    if not scored:
        return Recommendation(key, title, criterion, none_reason=_pool_reason(pool, "dynamic-shape"))
    scored.sort(key=lambda s: (s[0], str(s[1])))
    rows = {s[1][1:6] for s in scored}
    best_row = min(rows, key=lambda rk: (-sum(1 for s in scored if s[1][1:6] == rk), row_sort(rk)))
    ranked = [s for s in scored if s[1][1:6] == best_row]
    picks = [_pick(indexes[s[1][0]], s[2], indexes, s[3]) for s in ranked[:2]]
    runner = picks[1] if len(picks) > 1 else None
    return Recommendation(key, title, criterion, picks[0], runner, row_label(best_row) + " · dynamic")


def simplest(indexes: list[RunIndex]) -> Recommendation:
    """The backend that ran ok in most of its cells with no remedy, no operator fallback, precision as requested."""
    key, title = "simplest", "Simplest deployment (no remedy needed)"
    criterion = (
        "share of the backend's cells that ran ok with no remedy, no operator fallback and the requested "
        "precision; ties by best p50"
    )
    stats: dict[tuple, list[dict]] = {}
    for i in indexes:
        for r in i.cells:
            if r.get("status") not in ("skipped", "exported"):
                stats.setdefault((i.position, r.get("device"), r.get("backend")), []).append(r)

    def clean(r: dict) -> bool:
        executed = r.get("precision_executed")
        return (
            r.get("status") == "ok"
            and not r.get("remedy")
            and not number(r, "ops.fallback")
            and (not executed or executed == r.get("precision_requested"))
        )

    scored = []
    for ekey, recs in stats.items():
        good = [r for r in recs if clean(r)]
        if not good:
            continue
        best = min(good, key=lambda r: number(r, "latency_ms.p50") or float("inf"))
        numbers = f"clean in {len(good)} of {len(recs)} cells run" + (
            f"; best p50 {_ms(best)} ({_workload_label(best)})"
            if number(best, "latency_ms.p50") is not None
            else ""
        )
        scored.append(
            (
                -len(good) / len(recs),
                -len(good),
                number(best, "latency_ms.p50") or float("inf"),
                ekey,
                best,
                numbers,
            )
        )
    if not scored:
        pool = [(i, r) for i in indexes for r in i.cells if r.get("status") != "skipped"]
        return Recommendation(key, title, criterion, none_reason=_pool_reason(pool, "measured"))
    scored.sort(key=lambda s: (*s[:3], str(s[3])))
    picks = [_pick(indexes[s[3][0]], s[4], indexes, s[5]) for s in scored[:2]]
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
        _latency_numbers,
    ),
    "gpu-throughput": RankedUseCase(
        "gpu-throughput", "Highest-throughput GPU", "highest images/s on a GPU device, any batch",
        lambda r: _is_gpu(r) and _runnable(r), lambda r: r.get("status") == "ok", _metric("throughput_ips"), True,
        "GPU", "throughput", _throughput_numbers, group_batch=False,
    ),
    "cpu-edge": RankedUseCase(
        "cpu-edge", "CPU-only edge", "lowest p50 at batch 1 on the CPU",
        lambda r: not _is_gpu(r) and _runnable(r), _ok_b1, _metric("latency_ms.p50"), False, "CPU", "p50",
        _latency_numbers,
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


def recommendations(indexes: list[RunIndex]) -> list[Recommendation]:
    """Every use case, in page order."""
    return [
        _ranked(USE_CASES["gpu-latency"], indexes),
        _ranked(USE_CASES["gpu-throughput"], indexes),
        _ranked(USE_CASES["cpu-edge"], indexes),
        dynamic_inputs(indexes),
        _ranked(USE_CASES["mobile-embedded"], indexes),
        _ranked(USE_CASES["lowest-memory"], indexes),
        simplest(indexes),
    ]
