"""The predicates of the claims check, registered by the name claims.yaml gives them.

Each takes the claim, the records its selection matched (with their runs) and all runs, and returns the verdict
(confirmed, refuted or not measurable), the evidence as text with the measured numbers, and the records behind it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from harness.core.results_dir import dig
from harness.report.fmt import fmt_num
from harness.report.index import RunIndex, workload_key
from harness.report.load import is_failed, number
from harness.report.matrix import machine_label, short

if TYPE_CHECKING:
    from harness.report.claims import Claim

log = logging.getLogger(__name__)

CONFIRMED, REFUTED, UNMEASURABLE = "confirmed", "refuted", "not measurable"
# Failures that say nothing about the claim: the run lacked a device or a package.
DEFAULT_INCONCLUSIVE = ("device_missing", "dependency_missing")
MAX_EVIDENCE = 4

Cand = tuple[RunIndex, dict]

Outcome = tuple[str, str, list[Cand]]
CHECKS: dict[str, Callable[[Claim, list[Cand], list[RunIndex]], Outcome]] = {}


def check(name: str):
    """Register a predicate under the name claims.yaml uses."""

    def register(fn):
        CHECKS[name] = fn
        return fn

    return register


def _say(idx: RunIndex, rec: dict, indexes: list[RunIndex]) -> str:
    """One record as evidence: the cell, where it ran (when several runs render), and its outcome."""
    where = str(rec.get("cell_id"))
    if len(indexes) > 1:
        where += f" on {machine_label(idx, indexes)}"
    status = rec.get("status")
    if status == "ok":
        p50 = number(rec, "latency_ms.p50")
        return f"{where}: ok" + (f", p50 {fmt_num(p50)} ms" if p50 is not None else "")
    if is_failed(rec):
        cls, msg = (
            dig(rec, "failure.class") or "unknown",
            dig(rec, "failure.message") or rec.get("reason") or "",
        )
        remedy = idx.working_remedy(rec)
        works = f"; works via {remedy.get('remedy')}" if remedy is not None else ""
        return f"{where}: {status} ({cls}: {short(msg, 140)}{works})"
    return f"{where}: {status}"


def _list(cands: list[Cand], indexes: list[RunIndex]) -> str:
    said = "; ".join(_say(i, r, indexes) for i, r in cands[:MAX_EVIDENCE])
    return said + (f"; and {len(cands) - MAX_EVIDENCE} more" if len(cands) > MAX_EVIDENCE else "")


def _absent(claim: Claim, matched: list[Cand], indexes: list[RunIndex] | None = None) -> Outcome:
    """Not measurable: say whether nothing matched, everything was skipped, or what ran gave no usable value."""
    skipped = [(i, r) for i, r in matched if r.get("status") == "skipped"]
    ran = _ran(matched)
    if ran and indexes is not None:
        why = f"the matching cells give no value to judge by: {_list(ran, indexes)}"
    elif skipped:
        reasons = sorted({str(r.get("reason") or "no reason recorded") for _, r in skipped})
        why = f"the {len(skipped)} matching cells were skipped ({'; '.join(short(x, 100) for x in reasons[:2])})"
    else:
        why = "no matching cell in this run"
    return UNMEASURABLE, f"{why}; {claim.unmeasurable}", ran or skipped


def _ran(matched: list[Cand]) -> list[Cand]:
    return [(i, r) for i, r in matched if r.get("status") != "skipped"]


def _mentions(rec: dict, words: list[str]) -> bool:
    failure = rec.get("failure") if isinstance(rec.get("failure"), dict) else {}
    hay = " ".join(
        str(x)
        for x in (failure.get("class"), failure.get("message"), failure.get("ops"), failure.get("guards"))
    )
    return any(str(w).lower() in hay.lower() for w in words)


@check("fails")
def _fails(claim: Claim, matched: list[Cand], indexes: list[RunIndex]) -> Outcome:
    ran = _ran(matched)
    if not ran:
        return _absent(claim, matched, indexes)
    refuting = [
        (i, r) for i, r in ran if r.get("status") in claim.params.get("refute_statuses", ["ok", "exported"])
    ]
    if refuting:
        return REFUTED, _list(refuting, indexes), refuting
    inconclusive = tuple(claim.params.get("inconclusive_classes", DEFAULT_INCONCLUSIVE))
    failed = [(i, r) for i, r in ran if is_failed(r) and dig(r, "failure.class") not in inconclusive]
    if not failed:
        return UNMEASURABLE, f"the cells did not get far enough to tell: {_list(ran, indexes)}", ran
    expect = claim.params.get("expect_any")
    if expect:
        hits = [(i, r) for i, r in failed if _mentions(r, expect)]
        if not hits:
            words = ", ".join(map(str, expect))
            return UNMEASURABLE, f"the cells failed, but not on {words}: {_list(failed, indexes)}", failed
        return CONFIRMED, _list(hits, indexes), hits
    return CONFIRMED, _list(failed, indexes), failed


@check("succeeds")
def _succeeds(claim: Claim, matched: list[Cand], indexes: list[RunIndex]) -> Outcome:
    ran = _ran(matched)
    if not ran:
        return _absent(claim, matched, indexes)
    allowed = claim.params.get("allow_statuses", ["ok"])
    bad = [(i, r) for i, r in ran if r.get("status") not in allowed]
    if bad:
        return REFUTED, f"{len(bad)} of {len(ran)} cells did not: {_list(bad, indexes)}", bad
    return CONFIRMED, f"all {len(ran)} matching cells {'/'.join(allowed)}: {_list(ran, indexes)}", ran


@check("any_succeeds")
def _any_succeeds(claim: Claim, matched: list[Cand], indexes: list[RunIndex]) -> Outcome:
    ran = _ran(matched)
    if not ran:
        return _absent(claim, matched, indexes)
    good = [(i, r) for i, r in ran if r.get("status") == "ok"]
    if good:
        return CONFIRMED, _list(good, indexes), good
    return REFUTED, f"every attempt failed: {_list(ran, indexes)}", ran


@check("latency_range")
def _latency_range(claim: Claim, matched: list[Cand], indexes: list[RunIndex]) -> Outcome:
    ok = [(i, r) for i, r in matched if r.get("status") == "ok" and number(r, "latency_ms.p50") is not None]
    if not ok:
        return _absent(claim, matched, indexes)
    tol = float(claim.params.get("tolerance_pct", 0)) / 100.0
    lo, hi = float(claim.params["lo_ms"]) * (1 - tol), float(claim.params["hi_ms"]) * (1 + tol)
    gpu = claim.params.get("gpu_contains")
    if gpu:
        on_it = [
            (i, r) for i, r in ok if any(gpu.lower() in str(g.get("name", "")).lower() for g in i.run.gpus)
        ]
        if not on_it:
            gpus = sorted({str(g.get("name")) for i, _ in ok for g in i.run.gpus}) or ["none"]
            return (
                UNMEASURABLE,
                f"the claim is about {claim.params.get('hardware', gpu)}; this run's GPUs: {', '.join(gpus)} "
                f"(measured there, for context only: {_list(ok, indexes)})",
                ok,
            )
        ok = on_it
    inside = [(i, r) for i, r in ok if lo <= (number(r, "latency_ms.p50") or 0) <= hi]
    cpus = sorted({str(i.run.env_value("host", "cpu_model")) for i, _ in ok})
    context = f"range {fmt_num(lo)}-{fmt_num(hi)} ms with the claim's margin"
    if not gpu and claim.params.get("hardware"):
        context += f"; the claim is for {claim.params['hardware']}, measured on {', '.join(cpus)}"
    if len(inside) == len(ok):
        return CONFIRMED, f"{_list(ok, indexes)} ({context})", ok
    outside = [c for c in ok if c not in inside]
    return REFUTED, f"{_list(outside, indexes)} ({context})", outside


@check("speedup_range")
def _speedup_range(claim: Claim, matched: list[Cand], indexes: list[RunIndex]) -> Outcome:
    baseline = claim.params.get("baseline", "torch-eager")
    lo, hi = float(claim.params.get("lo", 0)), claim.params.get("hi")
    pairs, seen = [], []
    for idx, rec in matched:
        p50 = number(rec, "latency_ms.p50")
        if rec.get("status") != "ok" or p50 is None or p50 <= 0:
            continue
        seen.append((idx, rec))
        base = next(
            (
                b
                for b in idx.cells
                if b.get("backend") == baseline
                and b.get("status") == "ok"
                and b.get("device") == rec.get("device")
                and workload_key(b) == workload_key(rec)
                and number(b, "latency_ms.p50")
            ),
            None,
        )
        if base is not None:
            pairs.append((idx, rec, (number(base, "latency_ms.p50") or 0.0) / p50))
    if not pairs:
        if not seen:
            return _absent(claim, matched, indexes)
        return UNMEASURABLE, f"no {baseline} cell ran ok for the same workload; {claim.unmeasurable}", seen
    said = "; ".join(
        f"{r.get('cell_id')}: {fmt_num(s)}× vs {baseline} (p50 {fmt_num(number(r, 'latency_ms.p50') or 0)} ms)"
        for _, r, s in pairs[:MAX_EVIDENCE]
    ) + (f"; and {len(pairs) - MAX_EVIDENCE} more" if len(pairs) > MAX_EVIDENCE else "")
    outside = [(i, r) for i, r, s in pairs if s < lo or (hi is not None and s > float(hi))]
    verdict = REFUTED if outside else CONFIRMED
    want = f"claimed {fmt_num(lo)}×" + (f"-{fmt_num(float(hi))}×" if hi is not None else " or more")
    return verdict, f"{said} ({want})", outside or [(i, r) for i, r, _ in pairs]


@check("message_absent")
def _message_absent(claim: Claim, matched: list[Cand], indexes: list[RunIndex]) -> Outcome:
    ran = [(i, r) for i, r in _ran(matched) if dig(r, "failure.class") not in DEFAULT_INCONCLUSIVE]
    if not ran:
        return _absent(claim, matched, indexes)
    hits = [(i, r) for i, r in ran if _mentions(r, claim.params["patterns"])]
    if hits:
        return REFUTED, _list(hits, indexes), hits
    return CONFIRMED, f"none of the {len(ran)} attempts failed that way: {_list(ran, indexes)}", ran


@check("runs_if_exported")
def _runs_if_exported(claim: Claim, matched: list[Cand], indexes: list[RunIndex]) -> Outcome:
    past = [(i, r) for i, r in _ran(matched) if r.get("status") not in ("export_failed", "exported")]
    if not past:
        why = "no matching artifact got past export" if _ran(matched) else "no matching cell in this run"
        return UNMEASURABLE, f"{why}; {claim.unmeasurable}", _ran(matched)
    good = [(i, r) for i, r in past if r.get("status") == "ok"]
    if good:
        return CONFIRMED, _list(good, indexes), good
    return REFUTED, _list(past, indexes), past


@check("fallback_present")
def _fallback_present(claim: Claim, matched: list[Cand], indexes: list[RunIndex]) -> Outcome:
    counted = [(i, r) for i, r in matched if number(r, "ops.fallback") is not None]
    if not counted:
        return _absent(claim, matched, indexes)
    said = "; ".join(
        f"{r.get('cell_id')}: {int(number(r, 'ops.fallback') or 0)} of "
        f"{int((number(r, 'ops.delegated') or 0) + (number(r, 'ops.fallback') or 0))} ops not delegated"
        for _, r in counted[:MAX_EVIDENCE]
    )
    some = [(i, r) for i, r in counted if (number(r, "ops.fallback") or 0) > 0]
    return (CONFIRMED, said, some) if some else (REFUTED, said, counted)


def _groups(matched: list[Cand], path: str, uncached: bool = False) -> dict[tuple, list[tuple[Cand, float]]]:
    groups: dict[tuple, list[tuple[Cand, float]]] = {}
    for i, r in matched:
        v = number(r, path)
        if v is None or (uncached and r.get("cache_hit")):
            continue
        # Artifacts for different targets of one workload compare with each other, whatever device they name.
        groups.setdefault((i.position, *workload_key(r)), []).append(((i, r), v))
    return {k: v for k, v in groups.items() if len({c[0][1].get("backend") for c in v}) >= 2}


@check("size_spread")
def _size_spread(claim: Claim, matched: list[Cand], indexes: list[RunIndex]) -> Outcome:
    groups = _groups(matched, "artifact_bytes")
    if not groups:
        return _absent(claim, matched, indexes)
    limit = float(claim.params.get("max_spread_pct", 10))
    worst, said, cells = 0.0, [], []
    for members in groups.values():
        lo, hi = min(v for _, v in members), max(v for _, v in members)
        spread = (hi / lo - 1) * 100 if lo > 0 else float("inf")
        worst = max(worst, spread)
        cells += [c for c, _ in members]
        said.append(
            ", ".join(f"{c[1].get('backend')} {fmt_num(v / 1e6)} MB" for c, v in members)
            + f" (spread {fmt_num(spread)}%)"
        )
    verdict = CONFIRMED if worst <= limit else REFUTED
    return verdict, "; ".join(said[:MAX_EVIDENCE]) + f" (claimed within {fmt_num(limit)}%)", cells


@check("fastest_export")
def _fastest_export(claim: Claim, matched: list[Cand], indexes: list[RunIndex]) -> Outcome:
    winner = claim.params["winner"]
    groups = {
        k: v
        for k, v in _groups(matched, "export_s", uncached=True).items()
        if any(c[1].get("backend") == winner for c, _ in v)
    }
    if not groups:
        return _absent(claim, matched, indexes)
    lost, said, cells = False, [], []
    for members in groups.values():
        members = sorted(members, key=lambda m: m[1])
        lost |= members[0][0][1].get("backend") != winner
        cells += [c for c, _ in members]
        said.append(", ".join(f"{c[1].get('backend')} {fmt_num(v)} s" for c, v in members))
    return (
        (REFUTED if lost else CONFIRMED),
        "export times (uncached): " + "; ".join(said[:MAX_EVIDENCE]),
        cells,
    )


@check("field_min")
def _field_min(claim: Claim, matched: list[Cand], indexes: list[RunIndex]) -> Outcome:
    path, least, unit = claim.params["field"], float(claim.params["min"]), claim.params.get("unit", "")
    have = [(i, r, number(r, path)) for i, r in matched if number(r, path) is not None]
    if not have:
        return _absent(claim, matched, indexes)
    said = "; ".join(
        f"{r.get('cell_id')}: {path} {fmt_num(v or 0)} {unit}" for _, r, v in have[:MAX_EVIDENCE]
    )
    below = [(i, r) for i, r, v in have if (v or 0) < least]
    if below:
        return REFUTED, f"{said} (claimed at least {fmt_num(least)} {unit})", below
    return CONFIRMED, f"{said} (claimed at least {fmt_num(least)} {unit})", [(i, r) for i, r, _ in have]


@check("runs_on_devices")
def _runs_on_devices(claim: Claim, matched: list[Cand], indexes: list[RunIndex]) -> Outcome:
    devices = list(claim.params["devices"])
    ran = _ran(matched)
    missing = [d for d in devices if not any(r.get("device") == d for _, r in ran)]
    failing = [(i, r) for i, r in ran if r.get("device") in devices and is_failed(r)]
    ok_on = {d: [(i, r) for i, r in ran if r.get("device") == d and r.get("status") == "ok"] for d in devices}
    if any(not ok_on[d] for d in devices if d not in missing) and failing:
        return REFUTED, _list(failing, indexes), failing
    if missing:
        return UNMEASURABLE, f"no cell ran on {', '.join(missing)}; {claim.unmeasurable}", ran
    cells = [c for d in devices for c in ok_on[d][:1]]
    return CONFIRMED, _list(cells, indexes), cells


@check("dynamic_works")
def _dynamic_works(claim: Claim, matched: list[Cand], indexes: list[RunIndex]) -> Outcome:
    """The plain dynamic artifact exported and ran at every swept size that is a multiple of `multiple_of`;
    other sizes are reported but judged by their own claim (YOLO needs multiples of 32)."""
    m = int(claim.params.get("multiple_of", 32))
    ran = [(i, r) for i, r in _ran(matched) if not r.get("remedy")]
    probes = [(i, r) for i, r in ran if not r.get("height")]
    sweeps = [(i, r) for i, r in ran if r.get("height")]
    if not probes and not sweeps:
        return _absent(claim, matched, indexes)
    failed_export = [(i, r) for i, r in probes if r.get("status") == "export_failed"]
    if failed_export:
        return REFUTED, f"the dynamic export failed: {_list(failed_export, indexes)}", failed_export
    judged = [(i, r) for i, r in sweeps if r["height"] % m == 0 and (r.get("width") or 0) % m == 0]
    aside = [(i, r) for i, r in sweeps if (i, r) not in judged]
    if not judged:
        return UNMEASURABLE, f"no size that is a multiple of {m} was swept; {claim.unmeasurable}", sweeps
    bad = [(i, r) for i, r in judged if r.get("status") != "ok"]
    extra = f" (not judged here, not a multiple of {m}: {_list(aside, indexes)})" if aside else ""
    if bad:
        return REFUTED, f"{_list(bad, indexes)}{extra}", bad
    return CONFIRMED, f"{_list(judged, indexes)}{extra}", judged
