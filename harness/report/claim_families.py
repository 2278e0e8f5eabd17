"""The claims predicates that pair the model families: the vendor's YOLO26-against-YOLO11 speed claims, judged on
the machine that ran them (registered into harness.report.claim_checks.CHECKS, as the others are).

ultralytics says YOLO26n runs "up to 43% faster" on a CPU than YOLO11n: its tables' ONNX figures at 640 (38.9
against 56.1 ms) measured by its ProfileModels (the model alone, ONNX Runtime with 8 intra-op threads, the mean
after 2-sigma clipping) on an Intel Xeon CPU @ 2.00 GHz (ultralytics PR #26025). Here each pair of a run that held
both families (harness.decide.migration: the YOLO26 and YOLO11 cells of one backend, size and shape, timed
interleaved) is one point, per CPU backend: the speedup YOLO11's p50 over YOLO26's, model-only as published or end
to end as deployed (YOLO11 with its NMS), with its 95% interval, at the threads the records ran with. Every point
says the published conditions beside what this machine is.
"""

from __future__ import annotations

import logging

from harness.accuracy.published_families import CPU_SPEEDS, PROFILE_CONDITIONS
from harness.decide import migration
from harness.decide.index import RunIndex
from harness.report import hardware
from harness.report.claim_checks import UNMEASURABLE, Cand, Claim, Outcome, Point, absent, check
from harness.report.fmt import fmt_num

log = logging.getLogger(__name__)

#: the thread count of ultralytics' ProfileModels (ONNX Runtime's intra_op_num_threads)
PROFILE_THREADS = 8


def _pairs(claim: Claim, matched: list[Cand]) -> list[tuple[RunIndex, migration.Pair]]:
    """The pairs whose YOLO26 record the claim selected: (its run, the pair) with the family `from`."""
    family = str(claim.params.get("versus", "yolo11"))
    chosen = {(idx.position, rec.cell_id) for idx, rec in matched}
    runs = {idx.position: idx for idx, _ in matched}
    out = []
    for idx in runs.values():
        for p in migration.pairs(idx, family):
            if (idx.position, p.yolo26.cell_id) in chosen:
                out.append((idx, p))
    return out


def _threads(rec) -> int | None:
    """The threads a record's runtime ran with (read back from it), else the run's budget."""
    for value in (rec.threads, rec.threads_requested):
        if isinstance(value, int) and value > 0:
            return value
    return None


def _cores(idx: RunIndex) -> int | None:
    threads = idx.run.env.get("threads") if isinstance(idx.run.env, dict) else None
    cores = threads.get("physical_cores") if isinstance(threads, dict) else None
    if not isinstance(cores, int):
        cores = idx.run.env_value("host", "cpu_cores_physical")
    return cores if isinstance(cores, int) else None


def _speedup(r) -> tuple[float, tuple[float, float] | None]:
    """YOLO11's p50 over YOLO26's (the published claim's direction) from YOLO26's ratio over YOLO11's."""
    ci = (1.0 / r.ci[1], 1.0 / r.ci[0]) if r.ci else None
    return 1.0 / r.value, ci


@check("family_speedup")
def _family_speedup(claim: Claim, matched: list[Cand], indexes: list[RunIndex]) -> Outcome:
    """Each pair (a CPU backend): YOLO26's speedup over the other family, model-only (`scope: model`) or end to
    end (`scope: e2e`), from the paired ratio measured interleaved. It agrees where the measured speedup reaches
    the claimed one (`speedup`, less `tolerance_pct`) and YOLO26 is faster for certain (its interval above 1),
    disagrees where the whole interval stays below the claimed speedup, and says nothing otherwise: the interval
    reaches the claim but the measured speedup does not, or it holds 1 too (a loaded machine's few trials).
    `threads: 8` judges only
    records that ran with 8 threads (ultralytics' ProfileModels' count), and says why none did where the machine
    has fewer cores; otherwise the records' own threads, said in each point."""
    scope = str(claim.params.get("scope", "model"))
    claimed = float(claim.params["speedup"])
    tol = float(claim.params.get("tolerance_pct", 0)) / 100.0
    want_threads = claim.params.get("threads")
    pairs = _pairs(claim, matched)
    if want_threads is not None:
        at = [(i, p) for i, p in pairs if _threads(p.yolo26) == int(want_threads)]
        if not at:
            return _no_threads(claim, matched, indexes, pairs, int(want_threads))
        pairs = at
    if not pairs:
        return absent(claim, matched, indexes)
    points, unpaired = [], []
    for idx, p in pairs:
        r = p.e2e if scope == "e2e" else p.model
        if r is None or not r.paired or r.ci is None:
            unpaired.append(p.config())
            continue
        s, ci = _speedup(r)
        if ci is None:  # cannot happen after r.ci was checked; kept for the type
            unpaired.append(p.config())
            continue
        bar = claimed * (1 - tol)
        agrees: bool | None = None  # the interval reaches the bar, the speedup does not, or it holds 1 too
        if ci is not None and ci[1] < bar:
            agrees = False
        elif ci is not None and s >= bar and ci[0] > 1.0:
            agrees = True
        where = f"{hardware.cpu_model(idx.run)}, {_threads(p.yolo26) or '?'} threads"
        how = "end to end, YOLO11 with its NMS" if scope == "e2e" else "model only"
        said = (
            f"{p.yolo26.backend} {p.yolo26.model} {p.yolo26.head} vs {p.other.model} on {where}: "
            f"{fmt_num(s)}× [{fmt_num(ci[0])}-{fmt_num(ci[1])}] ({how}; paired, interleaved; "
            f"{'YOLO26 faster' if ci[0] > 1 else 'YOLO26 slower' if ci[1] < 1 else 'tied'})"
        ) + (
            f" (cannot tell: its interval reaches {fmt_num(bar)}× and {_short_of(s, ci, bar)})"
            if agrees is None
            else ""
        )
        points.append(Point(((idx, p.yolo26), (idx, p.other)), agrees, said))
    note = (
        f"claimed {fmt_num(claimed)}× (with a {fmt_num(tol * 100)}% margin: {fmt_num(claimed * (1 - tol))}×); "
        f"published under: {PROFILE_CONDITIONS}"
    )
    if unpaired:
        note += f"; not timed together, not judged: {', '.join(unpaired)}"
    if not points:
        return Outcome(
            verdict=UNMEASURABLE,
            evidence=f"no pair has a paired ratio ({', '.join(unpaired)}); {claim.unmeasurable}",
            cands=[(i, p.yolo26) for i, p in pairs],
        )
    return Outcome(points, note=note)


def _short_of(s: float, ci: tuple[float, float] | None, bar: float) -> str:
    """Why a speedup whose interval reaches the bar does not agree: it holds 1 too, or the speedup is short of it."""
    if ci is not None and ci[0] <= 1.0:
        return "holds 1 too"
    return f"the measured {fmt_num(s)}× is short of it"


def _no_threads(
    claim: Claim,
    matched: list[Cand],
    indexes: list[RunIndex],
    pairs: list[tuple[RunIndex, migration.Pair]],
    threads: int,
) -> Outcome:
    """Not measurable at `threads`: what the records ran with, and whether the machine has that many cores."""
    if not pairs:
        return absent(claim, matched, indexes)
    seen = []
    for idx in {i.position: i for i, _ in pairs}.values():
        ran = sorted({t for i, p in pairs if i is idx and (t := _threads(p.yolo26)) is not None})
        cores = _cores(idx)
        why = (
            f"{hardware.cpu_model(idx.run)} has {cores} physical cores: {threads} threads would oversubscribe it, "
            "so its run kept to its cores"
            if cores is not None and cores < threads
            else "the run chose another thread budget"
        )
        seen.append(f"{why} (its records ran {', '.join(map(str, ran)) or 'an unknown number of'} threads)")
    return Outcome(
        verdict=UNMEASURABLE,
        evidence=f"ultralytics' ProfileModels times with {threads} intra-op threads; {'; '.join(seen)}; "
        f"{claim.unmeasurable}",
        cands=[(i, p.yolo26) for i, p in pairs],
    )


@check("published_ratio")
def _published_ratio(claim: Claim, matched: list[Cand], indexes: list[RunIndex]) -> Outcome:
    """Each pair: this machine's model-only ratio (YOLO26's p50 over the other's, paired) against the ratio of the
    two families' published CPU figures at that size; it agrees where the measured interval comes within
    `tolerance_pct` of the published ratio, disagrees where it does not, and says nothing where the interval is
    too wide to tell which family is faster while the published ratio does tell (it holds 1, the band does not)."""
    family = str(claim.params.get("versus", "yolo11"))
    tol = float(claim.params.get("tolerance_pct", 10)) / 100.0
    ours, theirs = CPU_SPEEDS["yolo26"], CPU_SPEEDS[family]
    pairs = _pairs(claim, matched)
    if not pairs:
        return absent(claim, matched, indexes)
    points = []
    for idx, p in pairs:
        size = str(p.yolo26.size)
        published = ours.ms[size] / theirs.ms[size]
        r = p.model
        if r is None or not r.paired or r.ci is None:
            continue
        lo, hi = published * (1 - tol), published * (1 + tol)
        agrees: bool | None = r.ci[1] >= lo and r.ci[0] <= hi
        if agrees and r.ci[0] <= 1.0 <= r.ci[1] and not lo <= 1.0 <= hi:
            agrees = None  # too wide: it cannot tell whether YOLO26 is faster, which the published ratio says
        said = (
            f"{size}: published {fmt_num(ours.ms[size])} / {fmt_num(theirs.ms[size])} ms = {fmt_num(published)}×; "
            f"here ({p.yolo26.backend}, {hardware.cpu_model(idx.run)}, {_threads(p.yolo26) or '?'} threads, "
            f"model only, paired) {fmt_num(r.value)}× [{fmt_num(r.ci[0])}-{fmt_num(r.ci[1])}]"
        ) + (" (too wide to tell which is faster)" if agrees is None else "")
        points.append(Point(((idx, p.yolo26), (idx, p.other)), agrees, said))
    if not points:
        return Outcome(
            verdict=UNMEASURABLE,
            evidence=f"no pair was timed together; {claim.unmeasurable}",
            cands=[(i, p.yolo26) for i, p in pairs],
        )
    sizes = sorted({str(p.yolo26.size) for _, p in pairs})
    rest = [s for s in ours.ms if s not in sizes]
    note = f"within {fmt_num(tol * 100)}% of the published ratio; published under: {ours.conditions}"
    if rest:
        pub = ", ".join(f"{s} {fmt_num(ours.ms[s] / theirs.ms[s])}×" for s in rest)
        note += f"; sizes not measured here (published: {pub})"
    return Outcome(points, note=note)
