"""The predicates of the claims check, registered by the name claims.yaml gives them.

Each takes the claim, the records its selection matched (with their runs) and all runs, and returns an Outcome:
the points it judged (each a record, a pair or a group of records that agrees with the claim, disagrees with it,
or ran without saying anything about it), or, when nothing could be judged, a verdict with the reason. The verdict
over the points (confirmed, partly, refuted) and the coverage the claim needs are claims.py's job.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.core.record import OPTIONAL_FIELDS, RECORD_FIELDS, CellRecord
from harness.core.record_codec import section_items
from harness.core.results_dir import dig
from harness.decide import paired
from harness.decide.index import RunIndex, row_of, workload_key
from harness.decide.load import finite, is_failed, number, p50
from harness.report import hardware
from harness.report.fmt import fmt_num
from harness.report.matrix import machine_label, row_label, short

log = logging.getLogger(__name__)

CONFIRMED, PARTLY, REFUTED = "confirmed", "partly", "refuted"
UNMEASURABLE, NOT_COMPARABLE, UNTESTABLE = "not measurable", "not comparable here", "untestable"
VERDICTS = (CONFIRMED, PARTLY, REFUTED, UNMEASURABLE, NOT_COMPARABLE, UNTESTABLE)
# Failures that say nothing about the claim: the run lacked a device or a package.
DEFAULT_INCONCLUSIVE = ("device_missing", "dependency_missing")
MAX_EVIDENCE = 4


@dataclass(frozen=True)
class Claim:
    """One row of claims.yaml: the claim, where it comes from, and how to check it."""

    id: str
    seed: str
    claim: str
    check: str | None
    select: dict[str, Any]
    params: dict[str, Any]
    unmeasurable: str
    needs: dict[str, Any] | None = None
    untestable: str = ""


Cand = tuple[RunIndex, CellRecord]


@dataclass(frozen=True)
class Point:
    """One judged piece of evidence: its records, whether it agrees with the claim (None: it ran, but says nothing
    about the claim), and what it showed, as text with the measured numbers."""

    cands: tuple[Cand, ...]
    agrees: bool | None
    said: str


@dataclass(frozen=True)
class Outcome:
    """A predicate's answer: judged points (`verdict` None, claims.py decides), or a verdict with its reason."""

    points: list[Point] = field(default_factory=list)
    verdict: str | None = None
    evidence: str = ""
    cands: list[Cand] = field(default_factory=list)
    any_of: bool = False  # an existence claim ("some ops may fall back"): one agreeing point confirms it
    note: str = ""  # said after the points (what was set aside and why)


CHECKS: dict[str, Callable[[Claim, list[Cand], list[RunIndex]], Outcome]] = {}


def check(name: str):
    """Register a predicate under the name claims.yaml uses."""

    def register(fn):
        CHECKS[name] = fn
        return fn

    return register


def say(idx: RunIndex, rec: CellRecord, indexes: list[RunIndex]) -> str:
    """One record as evidence: the cell, where it ran (when several runs render), and its outcome. A record
    traced on a fake CUDA device says so, with its own status (the checks read it as the export it stands for)."""
    where = rec.cell_id
    if len(indexes) > 1:
        where += f" on {machine_label(idx, indexes)}"
    if rec.fake_device is not None:
        traced = FAKE_STATUS.get(rec.fake_device.get("record_status") or rec.status, rec.status)
        return f"{_said(idx, rec, where)} [{traced}: {FAKE_WORDS}]"
    return _said(idx, rec, where)


#: how a claim reads a record traced on a fake CUDA device: as the export it stands for, said as a trace
FAKE_AS = {"traced": "exported", "trace_failed": "export_failed"}
FAKE_STATUS = {"traced": "traced", "trace_failed": "trace failed"}
FAKE_WORDS = "export traced on a CPU machine, fake CUDA device"


def as_claim_evidence(rec: CellRecord) -> CellRecord:
    """`rec` as the claims read it: a fake-device trace stands for the export it traced (exported when it reached
    the step that needs a GPU, export_failed when it failed before), keeping `fake_device` so that every verdict
    it decides is labelled (harness.report.claims). Other records are returned as they are."""
    if rec.status not in FAKE_AS:
        return rec
    out = copy.copy(rec)
    out.status = FAKE_AS[rec.status]
    out.fake_device = {**(rec.fake_device or {}), "record_status": rec.status}
    return out


def _said(idx: RunIndex, rec: CellRecord, where: str) -> str:
    status = rec.status
    if status == "ok":
        rec_p50 = p50(rec)
        return f"{where}: ok" + (f", p50 {fmt_num(rec_p50)} ms" if rec_p50 is not None else "")
    if is_failed(rec):
        cls, msg = (
            dig(rec.failure, "class") or "unknown",
            dig(rec.failure, "message") or rec.reason or "",
        )
        remedy = idx.working_remedy(rec)
        works = f"; works via {remedy.remedy}" if remedy is not None else ""
        return f"{where}: {status} ({cls}: {short(msg, 140)}{works})"
    return f"{where}: {status}"


def listing(cands: list[Cand], indexes: list[RunIndex]) -> str:
    said = "; ".join(say(i, r, indexes) for i, r in cands[:MAX_EVIDENCE])
    return said + (f"; and {len(cands) - MAX_EVIDENCE} more" if len(cands) > MAX_EVIDENCE else "")


def point(
    idx: RunIndex, rec: CellRecord, indexes: list[RunIndex], agrees: bool | None, said: str = ""
) -> Point:
    return Point(((idx, rec),), agrees, said or say(idx, rec, indexes))


def ran(matched: list[Cand]) -> list[Cand]:
    return [(i, r) for i, r in matched if r.status != "skipped"]


def absent(claim: Claim, matched: list[Cand], indexes: list[RunIndex] | None = None) -> Outcome:
    """Not measurable: say whether nothing matched, everything was skipped, or what ran gave no usable value."""
    skipped = [(i, r) for i, r in matched if r.status == "skipped"]
    done = ran(matched)
    if done and indexes is not None:
        why = f"the matching cells give no value to judge by: {listing(done, indexes)}"
    elif skipped:
        reasons = sorted({r.reason or "no reason recorded" for _, r in skipped})
        why = f"the {len(skipped)} matching cells were skipped ({'; '.join(short(x, 100) for x in reasons[:2])})"
    else:
        why = "no matching cell in this run"
    return Outcome(verdict=UNMEASURABLE, evidence=f"{why}; {claim.unmeasurable}", cands=done or skipped)


def _mentions(rec: CellRecord, words: list[str]) -> bool:
    failure = rec.failure if isinstance(rec.failure, dict) else {}
    # the exception's type too: the classifier keeps the message after it ("No choices to select." of a
    # NoValidChoicesError), and a claim may name the error by its type
    hay = " ".join(
        str(x)
        for x in (
            failure.get("class"),
            failure.get("message"),
            failure.get("ops"),
            failure.get("guards"),
            failure.get("exception_type"),
        )
    )
    return any(str(w).lower() in hay.lower() for w in words)


@check("fails")
def _fails(claim: Claim, matched: list[Cand], indexes: list[RunIndex]) -> Outcome:
    """Each cell that ran: a failure (on the expected operators, when named) agrees, a refuting status disagrees,
    a failure for a missing device or package (or on other operators) says nothing."""
    done = ran(matched)
    if not done:
        return absent(claim, matched, indexes)
    refute = claim.params.get("refute_statuses", ["ok", "exported"])
    inconclusive = tuple(claim.params.get("inconclusive_classes", DEFAULT_INCONCLUSIVE))
    expect = claim.params.get("expect_any")
    points = []
    for i, r in done:
        if r.status in refute:
            points.append(point(i, r, indexes, False))
        elif not is_failed(r) or dig(r.failure, "class") in inconclusive:
            points.append(
                point(i, r, indexes, None, f"{say(i, r, indexes)} (did not get far enough to tell)")
            )
        elif expect and not _mentions(r, expect):
            words = ", ".join(map(str, expect))
            points.append(point(i, r, indexes, None, f"{say(i, r, indexes)} (failed, but not on {words})"))
        else:
            points.append(point(i, r, indexes, True))
    return Outcome(points)


@check("succeeds")
def _succeeds(claim: Claim, matched: list[Cand], indexes: list[RunIndex]) -> Outcome:
    """Each cell that ran: an allowed status (ok by default) agrees, anything else disagrees."""
    done = ran(matched)
    if not done:
        return absent(claim, matched, indexes)
    allowed = claim.params.get("allow_statuses", ["ok"])
    return Outcome([point(i, r, indexes, r.status in allowed) for i, r in done])


@check("any_succeeds")
def _any_succeeds(claim: Claim, matched: list[Cand], indexes: list[RunIndex]) -> Outcome:
    """Existence: one attempt with an allowed status (ok by default; `allow_statuses: [ok, exported]` for a claim
    that exporting works, where the runtime cannot run the artifact) confirms; attempts that all failed refute. A
    failure for a missing device or package says nothing."""
    done = ran(matched)
    if not done:
        return absent(claim, matched, indexes)
    allowed = claim.params.get("allow_statuses", ["ok"])
    points = []
    for i, r in done:
        if r.status not in allowed and dig(r.failure, "class") in DEFAULT_INCONCLUSIVE:
            points.append(
                point(i, r, indexes, None, f"{say(i, r, indexes)} (did not get far enough to tell)")
            )
        else:
            points.append(point(i, r, indexes, r.status in allowed))
    return Outcome(points, any_of=True)


@check("latency_range")
def _latency_range(claim: Claim, matched: list[Cand], indexes: list[RunIndex]) -> Outcome:
    """Each ok cell's p50 inside the claimed range (widened by `tolerance_pct`) agrees, outside disagrees."""
    ok = [(i, r) for i, r in matched if r.status == "ok" and p50(r) is not None]
    if not ok:
        return absent(claim, matched, indexes)
    tol = float(claim.params.get("tolerance_pct", 0)) / 100.0
    lo, hi = float(claim.params["lo_ms"]) * (1 - tol), float(claim.params["hi_ms"]) * (1 + tol)
    points = [point(i, r, indexes, lo <= (p50(r) or 0) <= hi) for i, r in ok]
    return Outcome(points, note=f"range {fmt_num(lo)}-{fmt_num(hi)} ms with the claim's margin")


def _baseline_for(idx: RunIndex, rec: CellRecord, baseline: str) -> CellRecord | None:
    return next(
        (
            b
            for b in idx.cells
            if b.backend == baseline
            and b.status == "ok"
            and b.device == rec.device
            and workload_key(b) == workload_key(rec)
            and p50(b)
        ),
        None,
    )


@check("speedup_range")
def _speedup_range(claim: Claim, matched: list[Cand], indexes: list[RunIndex]) -> Outcome:
    """Each ok cell paired with the baseline backend's cell of the same workload and device: a speedup (baseline
    p50 over this p50, from the paired ratio measured interleaved) inside the claimed range agrees."""
    baseline = claim.params.get("baseline", "torch-eager")
    lo, hi = float(claim.params.get("lo", 0)), claim.params.get("hi")
    points, seen = [], []
    for idx, rec in matched:
        rec_p50 = p50(rec)
        if rec.status != "ok" or rec_p50 is None or rec_p50 <= 0:
            continue
        seen.append((idx, rec))
        base = _baseline_for(idx, rec, baseline)
        if base is None:
            continue
        r = paired.ratio(rec, base)
        if r is None:
            continue
        s = 1.0 / r.value
        inside = lo <= s and (hi is None or s <= float(hi))
        how = "paired, interleaved" if r.paired else "separate p50s"
        said = f"{rec.cell_id}: {fmt_num(s)}× vs {baseline} ({how}; p50 {fmt_num(rec_p50)} ms)"
        points.append(Point(((idx, rec), (idx, base)), inside, said))
    if not points:
        if not seen:
            return absent(claim, matched, indexes)
        return Outcome(
            verdict=UNMEASURABLE,
            evidence=f"no {baseline} cell ran ok for the same workload; {claim.unmeasurable}",
            cands=seen,
        )
    want = f"claimed {fmt_num(lo)}×" + (f"-{fmt_num(float(hi))}×" if hi is not None else " or more")
    return Outcome(points, note=want)


@check("message_absent")
def _message_absent(claim: Claim, matched: list[Cand], indexes: list[RunIndex]) -> Outcome:
    """Each attempt that got past a missing device or package: failing with one of `patterns` disagrees."""
    done = [(i, r) for i, r in ran(matched) if dig(r.failure, "class") not in DEFAULT_INCONCLUSIVE]
    if not done:
        return absent(claim, matched, indexes)
    return Outcome([point(i, r, indexes, not _mentions(r, claim.params["patterns"])) for i, r in done])


@check("runs_if_exported")
def _runs_if_exported(claim: Claim, matched: list[Cand], indexes: list[RunIndex]) -> Outcome:
    """Existence: an artifact that exported and then ran ok confirms; artifacts that exported and failed refute."""
    past = [(i, r) for i, r in ran(matched) if r.status not in ("export_failed", "exported")]
    if not past:
        why = "no matching artifact got past export" if ran(matched) else "no matching cell in this run"
        return Outcome(verdict=UNMEASURABLE, evidence=f"{why}; {claim.unmeasurable}", cands=ran(matched))
    return Outcome([point(i, r, indexes, r.status == "ok") for i, r in past], any_of=True)


def _fallback_text(rec: CellRecord) -> str:
    fb = int(number(rec.ops, "fallback") or 0)
    return f"{rec.cell_id}: {fb} of {int((number(rec.ops, 'delegated') or 0) + fb)} ops not delegated"


@check("fallback_present")
def _fallback_present(claim: Claim, matched: list[Cand], indexes: list[RunIndex]) -> Outcome:
    """Existence ("some ops may fall back"): one artifact with operators left undelegated confirms."""
    counted = [(i, r) for i, r in matched if number(r.ops, "fallback") is not None]
    if not counted:
        return absent(claim, matched, indexes)
    points = [
        point(i, r, indexes, (number(r.ops, "fallback") or 0) > 0, _fallback_text(r)) for i, r in counted
    ]
    return Outcome(points, any_of=True)


def figure(rec: CellRecord, path: str) -> float | None:
    """The number at a dotted path that claims.yaml names (`compile_s`, `latency_ms.p99`, `accuracy.ratio`), or
    None when the record has none there (absent, null, boolean or not a finite number)."""
    name, _, rest = path.partition(".")
    value = getattr(rec, name) if name in RECORD_FIELDS or name in OPTIONAL_FIELDS else None
    if rest:
        value = dig(dict(section_items(value)), rest)
    return finite(value)


def _groups(
    matched: list[Cand], read: Callable[[CellRecord], object], uncached: bool = False
) -> dict[tuple, list[tuple[Cand, float]]]:
    groups: dict[tuple, list[tuple[Cand, float]]] = {}
    for i, r in matched:
        v = finite(read(r))
        if v is None or (uncached and r.cache_hit):
            continue
        # Artifacts for different targets of one workload compare with each other, whatever device they name.
        groups.setdefault((i.position, *workload_key(r)), []).append(((i, r), v))
    return {k: v for k, v in groups.items() if len({c[0][1].backend for c in v}) >= 2}


@check("size_spread")
def _size_spread(claim: Claim, matched: list[Cand], indexes: list[RunIndex]) -> Outcome:
    """Each workload with artifacts of two or more backends: a size spread within `max_spread_pct` agrees."""
    groups = _groups(matched, lambda r: r.artifact_bytes)
    if not groups:
        return absent(claim, matched, indexes)
    limit = float(claim.params.get("max_spread_pct", 10))
    points = []
    for members in groups.values():
        lo, hi = min(v for _, v in members), max(v for _, v in members)
        spread = (hi / lo - 1) * 100 if lo > 0 else float("inf")
        said = ", ".join(f"{c[1].backend} {fmt_num(v / 1e6)} MB" for c, v in members)
        points.append(
            Point(tuple(c for c, _ in members), spread <= limit, f"{said} (spread {fmt_num(spread)}%)")
        )
    return Outcome(points, note=f"claimed within {fmt_num(limit)}%")


@check("fastest_export")
def _fastest_export(claim: Claim, matched: list[Cand], indexes: list[RunIndex]) -> Outcome:
    """Each workload exported uncached by the `winner` and another backend: the winner being fastest agrees."""
    winner = claim.params["winner"]
    groups = {
        k: v
        for k, v in _groups(matched, lambda r: r.export_s, uncached=True).items()
        if any(c[1].backend == winner for c, _ in v)
    }
    if not groups:
        return absent(claim, matched, indexes)
    points = []
    for members in groups.values():
        members = sorted(members, key=lambda m: m[1])
        said = "export times (uncached): " + ", ".join(f"{c[1].backend} {fmt_num(v)} s" for c, v in members)
        points.append(Point(tuple(c for c, _ in members), members[0][0][1].backend == winner, said))
    return Outcome(points)


@check("field_min")
def _field_min(claim: Claim, matched: list[Cand], indexes: list[RunIndex]) -> Outcome:
    """Each record with the field: a value of at least `min` agrees."""
    path, least, unit = claim.params["field"], float(claim.params["min"]), claim.params.get("unit", "")
    have = [(i, r, figure(r, path)) for i, r in matched if figure(r, path) is not None]
    if not have:
        return absent(claim, matched, indexes)
    points = [
        point(i, r, indexes, (v or 0) >= least, f"{r.cell_id}: {path} {fmt_num(v or 0)} {unit}")
        for i, r, v in have
    ]
    return Outcome(points, note=f"claimed at least {fmt_num(least)} {unit}")


@check("dynamic_works")
def _dynamic_works(claim: Claim, matched: list[Cand], indexes: list[RunIndex]) -> Outcome:
    """The plain dynamic artifact exported and ran at every swept size that is a multiple of `multiple_of`;
    other sizes are reported but judged by their own claim (YOLO needs multiples of 32)."""
    m = int(claim.params.get("multiple_of", 32))
    done = [(i, r) for i, r in ran(matched) if not r.remedy]
    probes = [(i, r) for i, r in done if not r.height]
    sweeps = [(i, r) for i, r in done if r.height]
    if not probes and not sweeps:
        return absent(claim, matched, indexes)
    failed_export = [
        point(i, r, indexes, False, f"the dynamic export failed: {say(i, r, indexes)}")
        for i, r in probes
        if r.status == "export_failed"
    ]
    judged = [(i, r) for i, r in sweeps if (r.height or 0) % m == 0 and (r.width or 0) % m == 0]
    aside = [(i, r) for i, r in sweeps if (i, r) not in judged]
    note = f"not judged here, not a multiple of {m}: {listing(aside, indexes)}" if aside else ""
    if not judged and not failed_export:
        return Outcome(
            verdict=UNMEASURABLE,
            evidence=f"no size that is a multiple of {m} was swept; {claim.unmeasurable}",
            cands=sweeps,
        )
    points = failed_export + [point(i, r, indexes, r.status == "ok") for i, r in judged]
    return Outcome(points, note=note)


def _relation(fast: CellRecord, other: CellRecord) -> str:
    """`faster`, `slower` or `tied` for `fast` against `other`: from their paired ratio's 95% interval when they
    were timed together (it holds 1: tied), else from their p50 confidence intervals (overlap: tied); `unknown`
    when either has too few rounds for an interval."""
    r = paired.ratio(fast, other)
    if r is not None and r.paired and r.ci is not None:
        return r.relation()
    a, b = paired.latency_interval(fast), paired.latency_interval(other)
    if a is None or b is None:
        return "unknown"
    if a.overlaps(b):
        return "tied"
    return "faster" if a.hi < b.lo else "slower"


@check("vendor_contrast")
def _vendor_contrast(claim: Claim, matched: list[Cand], indexes: list[RunIndex]) -> Outcome:
    """`fast` (e.g. OpenVINO) against `other` (e.g. ONNX Runtime) on the same workload and machine: on a CPU of the
    `benefit_vendors` it must be faster (p50 intervals apart), on any other vendor's CPU it must not be. A contrast
    between vendors: both sides must have been measured, else the claim is not measurable (one side is context)."""
    fast, other = claim.params["fast"], claim.params["other"]
    benefit = set(claim.params.get("benefit_vendors", ["intel"]))
    points, unknown_vendor = [], []
    for idx in indexes:
        vendor = hardware.cpu_vendor(idx.run)
        mine = [r for i, r in matched if i is idx and r.status == "ok"]
        for rec in (r for r in mine if r.backend == fast):
            peer = next(
                (r for r in mine if r.backend == other and workload_key(r) == workload_key(rec)), None
            )
            if peer is None:
                continue
            if vendor is None:
                unknown_vendor.append((idx, rec))
                continue
            rel = _relation(rec, peer)
            where = f"{hardware.cpu_model(idx.run)} ({hardware.VENDOR_NAMES[vendor]})"
            said = (
                f"{row_label(row_of(workload_key(rec)))} on {where}: {fast} p50 {fmt_num(p50(rec) or 0)}"
                f" ms vs {other} {fmt_num(p50(peer) or 0)} ms ({fast} {rel})"
            )
            agrees = None if rel == "unknown" else (rel == "faster") == (vendor in benefit)
            points.append(Point(((idx, rec), (idx, peer)), agrees, said))
    note = (
        f"runs whose CPU vendor env.json does not tell: {listing(unknown_vendor, indexes)}"
        if unknown_vendor
        else ""
    )
    if not points and unknown_vendor:
        return Outcome(verdict=UNMEASURABLE, evidence=f"{note}; {claim.unmeasurable}", cands=unknown_vendor)
    if not points:
        return absent(claim, matched, indexes)
    sides = {hardware.cpu_vendor(p.cands[0][0].run) in benefit for p in points}
    if len(sides) < 2:
        seen = sorted({hardware.VENDOR_NAMES[hardware.cpu_vendor(p.cands[0][0].run) or ""] for p in points})
        said = "; ".join(p.said for p in points[:MAX_EVIDENCE])
        return Outcome(
            verdict=UNMEASURABLE,
            evidence=f"only {' and '.join(seen)} CPUs were measured, the claim contrasts vendors "
            f"(for context: {said}); {claim.unmeasurable}",
            cands=[c for p in points for c in p.cands],
        )
    return Outcome(points, note=note)
