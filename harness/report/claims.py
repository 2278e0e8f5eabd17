"""The claims check: each seed claim (claims.yaml) set against the records of the rendered runs.

A claim names a predicate (`check`) from the `CHECKS` registry (claim_checks.py), a record selection, the
predicate's parameters and the coverage it needs (`needs`):

- `tasks` / `sizes`: `all` (every task type or model size of the axes) or a list; each must have judged cells,
  ("all task types" is not confirmed by detect cells alone);
- `fallback: none`: the claim is about the full model, so a cell agrees only with zero fallback operators (an
  unknown count is unknown, never "none");
- `hardware: {label, cpu_model | gpu}`: figures for a named hardware class are judged only on runs of that class,
  for CPU claims as for GPU claims; elsewhere the verdict is "not comparable here", with the figures as context;
- `cpu_vendor: [intel, [amd, arm]]`: runs on each listed vendor (or any vendor of a nested list).

The verdict over the judged points: confirmed (every required point agrees and coverage is complete), partly
(some agree; others disagree or were not covered), refuted (none agrees, some disagree), not measurable (nothing
judged), not comparable here (only other hardware ran), untestable (the harness cannot test the claim by design;
the claim says why). Every verdict names the records that decided it.
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.core.axes import DEFAULT_FAMILY, SIZES, TASKS
from harness.core.record import CellRecord
from harness.decide.index import RunIndex
from harness.decide.load import number, run_shape
from harness.report import (
    claim_families,  # noqa: F401  (registers the predicates that pair the families)
    hardware,
)
from harness.report.claim_checks import (
    CHECKS,
    CONFIRMED,
    MAX_EVIDENCE,
    NOT_COMPARABLE,
    PARTLY,
    REFUTED,
    UNMEASURABLE,
    UNTESTABLE,
    VERDICTS,
    Cand,
    Claim,
    Outcome,
    Point,
    absent,
    as_claim_evidence,
    listing,
    ran,
)

log = logging.getLogger(__name__)

__all__ = ["CHECKS", "CLAIMS_FILE", "VERDICTS", "Claim", "ClaimResult", "evaluate", "load_claims"]

CLAIMS_FILE = Path(__file__).with_name("claims.yaml")
#: a verdict decided by a record traced on a fake CUDA device (shown beside the verdict wherever it appears)
FAKE_BASIS = "fake CUDA device: export traced on a CPU machine, not a GPU measurement"
SELECT_KEYS = {
    "backend",
    "device",
    "size",
    "task",
    "head",
    "batch",
    "precision",
    "shape",
    "dynamic",
    "remedies",
    "remedy_contains",
    "not_multiple_of",
    "family",
}
CLAIM_KEYS = {"id", "seed", "claim", "check", "select", "unmeasurable", "needs", "untestable"}
NEEDS_KEYS = {"tasks", "sizes", "fallback", "hardware", "cpu_vendor"}
# Coverage axes in the order their keys are built: name -> (all values, the record's or run's value).
AXES = {"tasks": TASKS, "sizes": SIZES}


@dataclass(frozen=True)
class ClaimResult:
    """A claim's verdict on the rendered runs, with the evidence (measured numbers) and the records behind it.

    `cells` are the cell ids of those records; `records` say where each one is shown: its run's position and
    `anchor`, the id of its matrix entry (a remedy attempt's is the cell it remedies).
    """

    id: str
    seed: str
    claim: str
    verdict: str
    evidence: str
    cells: tuple[str, ...] = ()
    records: tuple[dict, ...] = ()
    coverage: str = ""
    #: what the verdict rests on: "measured", or "fake CUDA device" when a record traced on a CPU machine decided
    #: it (harness.backends._shared.fake_cuda): never a GPU measurement
    basis: str = "measured"

    def as_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


def _validate_needs(path: Path, cid: str, needs: Any) -> dict[str, Any]:
    if needs is None:
        return {}
    if not isinstance(needs, dict) or set(needs) - NEEDS_KEYS:
        raise ValueError(f"{path}: claim {cid}: needs must be a mapping of {sorted(NEEDS_KEYS)}")
    for axis in ("tasks", "sizes"):
        value = needs.get(axis)
        if value is not None and value != "all" and not set(value) <= set(AXES[axis]):
            raise ValueError(f"{path}: claim {cid}: needs.{axis} must be 'all' or values of {AXES[axis]}")
    if needs.get("fallback") not in (None, "none"):
        raise ValueError(f"{path}: claim {cid}: needs.fallback can only be 'none'")
    hw = needs.get("hardware")
    if hw is not None and not (
        isinstance(hw, dict) and hw.get("label") and (hw.get("gpu") or hw.get("cpu_model"))
    ):
        raise ValueError(f"{path}: claim {cid}: needs.hardware needs a label and a gpu or cpu_model pattern")
    for group in needs.get("cpu_vendor") or []:
        if not set(group if isinstance(group, list) else [group]) <= set(hardware.VENDOR_NAMES):
            raise ValueError(f"{path}: claim {cid}: needs.cpu_vendor lists {sorted(hardware.VENDOR_NAMES)}")
    return dict(needs)


def load_claims(path: Path = CLAIMS_FILE) -> list[Claim]:
    """Read and validate the claims table; an unknown check, selection or coverage key is an error."""
    raw = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or []
    claims, seen = [], set()
    for n, item in enumerate(raw, 1):
        missing = {"id", "seed", "claim", "unmeasurable"} - set(item)
        if "check" not in item and "untestable" not in item:
            missing.add("check")
        if missing:
            raise ValueError(f"{path}: claim {n} lacks {sorted(missing)}")
        if "check" in item and item["check"] not in CHECKS:
            raise ValueError(
                f"{path}: claim {item['id']}: unknown check {item['check']!r}; known: {sorted(CHECKS)}"
            )
        bad = set(item.get("select") or {}) - SELECT_KEYS
        if bad:
            raise ValueError(f"{path}: claim {item['id']}: unknown select keys {sorted(bad)}")
        if item["id"] in seen:
            raise ValueError(f"{path}: claim id {item['id']} appears twice")
        seen.add(item["id"])
        params = {k: v for k, v in item.items() if k not in CLAIM_KEYS}
        claims.append(
            Claim(
                str(item["id"]),
                str(item["seed"]),
                str(item["claim"]),
                str(item["check"]) if item.get("check") else None,
                dict(item.get("select") or {}),
                params,
                str(item["unmeasurable"]),
                _validate_needs(path, item["id"], item.get("needs")),
                str(item.get("untestable") or ""),
            )
        )
    return claims


def _matches(rec: CellRecord, select: dict[str, Any]) -> bool:
    is_remedy = bool(rec.remedy or rec.remedy_of)
    mode = select.get("remedies", "exclude")
    if (mode == "exclude" and is_remedy) or (mode == "only" and not is_remedy):
        return False
    if "remedy_contains" in select and str(select["remedy_contains"]) not in (rec.remedy or ""):
        return False
    # a claim is about YOLO26 unless it names another family: a YOLO11 record never judges a seed claim
    family = select.get("family", DEFAULT_FAMILY)
    if rec.family not in (family if isinstance(family, list) else [family]):
        return False
    for key, value in (
        ("backend", rec.backend),
        ("device", rec.device),
        ("size", rec.size),
        ("task", rec.task),
        ("head", rec.head),
        ("batch", rec.batch),
        ("precision", rec.precision_requested),
    ):
        if key in select:
            want = select[key] if isinstance(select[key], list) else [select[key]]
            if value not in want:
                return False
    if "dynamic" in select and bool(rec.dynamic) != bool(select["dynamic"]):
        return False
    if "shape" in select and run_shape(rec) != select["shape"]:
        return False
    if "not_multiple_of" in select:
        m, h, w = int(select["not_multiple_of"]), rec.height, rec.width
        if not (isinstance(h, int) and isinstance(w, int)) or (h % m == 0 and w % m == 0):
            return False
    return True


# -- coverage ------------------------------------------------------------------------------------------------
def _vendor_groups(needs: dict) -> list[tuple[str, ...]]:
    return [tuple(g) if isinstance(g, list) else (g,) for g in needs.get("cpu_vendor") or []]


def _group_label(group: tuple[str, ...]) -> str:
    return " or ".join(hardware.VENDOR_NAMES[v] for v in group)


def _required(needs: dict) -> list[tuple[str, list[str]]]:
    """The coverage axes a claim declares, each with the values it must cover."""
    axes = []
    for axis in ("tasks", "sizes"):  # tasks first: the uncovered are folded by task ("seg (every size)")
        if needs.get(axis):
            axes.append((axis, list(AXES[axis]) if needs[axis] == "all" else [str(v) for v in needs[axis]]))
    if needs.get("cpu_vendor"):
        axes.append(("cpu_vendor", [_group_label(g) for g in _vendor_groups(needs)]))
    return axes


def _key(p: Point, axes: list[tuple[str, list[str]]], needs: dict) -> tuple | None:
    idx, rec = p.cands[0]
    key = []
    for axis, _ in axes:
        if axis == "cpu_vendor":
            vendor = hardware.cpu_vendor(idx.run)
            label = next((_group_label(g) for g in _vendor_groups(needs) if vendor in g), None)
            if label is None:
                return None
            key.append(label)
        else:
            key.append(rec.task if axis == "tasks" else rec.size)
    return tuple(key)


def _describe_missing(missing: list[tuple], axes: list[tuple[str, list[str]]]) -> str:
    """Uncovered combinations, folded by the last axis when a value of the others misses every one of it."""
    if len(axes) < 2:
        return ", ".join(k[0] for k in missing)
    last_name, last_values = axes[-1]
    by_rest: dict[tuple, list[str]] = {}
    for k in missing:
        by_rest.setdefault(k[:-1], []).append(k[-1])
    parts = []
    for rest, values in by_rest.items():
        head = " ".join(rest)
        if len(values) == len(last_values):
            parts.append(f"{head} (every {last_name[:-1] if last_name.endswith('s') else last_name})")
        else:
            parts.append(f"{head} ({', '.join(values)})")
    return "; ".join(parts)


@dataclass
class Coverage:
    """Points folded into the combinations a claim needs: which agree, disagree, and which are missing."""

    keys: dict[tuple, list[Point]]
    missing: list[tuple]
    text: str


def _coverage(points: list[Point], needs: dict, indexes: list[RunIndex]) -> Coverage:
    axes = _required(needs)
    if not axes:  # every point is its own requirement
        return Coverage({(n,): [p] for n, p in enumerate(points)}, [], "")
    keys: dict[tuple, list[Point]] = {}
    for p in points:
        k = _key(p, axes, needs)
        if k is not None and all(v in values for v, (_, values) in zip(k, axes, strict=True)):
            keys.setdefault(k, []).append(p)
    required = list(itertools.product(*(values for _, values in axes)))
    missing = [k for k in required if not any(p.agrees is not None for p in keys.get(k, []))]
    text = f"covered {len(required) - len(missing)} of {len(required)} required " + " × ".join(
        a[0] for a in axes
    )
    if missing:
        text += f"; not covered: {_describe_missing(missing, axes)}"
        ran_tasks = sorted({r.task for i in indexes for r in i.cells if r.status != "skipped"})
        if any(a[0] == "tasks" for a in axes):
            text += f" (tasks that ran in these runs: {', '.join(ran_tasks) or 'none'})"
    return Coverage(keys, missing, text)


# -- verdict -------------------------------------------------------------------------------------------------
def _fallback_point(p: Point) -> Point:
    """A point that agrees holds for "the full model" only if none of its records left operators undelegated."""
    if p.agrees is not True:
        return p
    for _, rec in p.cands:
        fb = number(rec.ops, "fallback")
        if fb is None:
            reason = rec.null_reasons.get("ops") or "not recorded"
            return Point(p.cands, None, f"{p.said} (fallback operators unknown: {reason})")
        if fb > 0:
            ops = (rec.ops or {}).get("fallback_ops") or []
            names = f": {', '.join(map(str, ops[:4]))}" if ops else ""
            total = int((number(rec.ops, "delegated") or 0) + fb)
            return Point(p.cands, False, f"{p.said} ({int(fb)} of {total} ops not delegated{names})")
    return p


def _decide(cov: Coverage, any_of: bool) -> str:
    states = []
    for pts in cov.keys.values():
        if any(p.agrees is False for p in pts):
            states.append(False)
        elif any(p.agrees is True for p in pts):
            states.append(True)
    agree, disagree = states.count(True), states.count(False)
    if any_of:
        return CONFIRMED if agree else REFUTED if disagree else UNMEASURABLE
    if not agree and not disagree:
        return UNMEASURABLE
    if not agree:
        return REFUTED
    return CONFIRMED if not disagree and not cov.missing else PARTLY


def _evidence(cov: Coverage, outcome: Outcome, verdict: str) -> tuple[str, list[Cand]]:
    pts = [p for ps in cov.keys.values() for p in ps]
    agree = [p for p in pts if p.agrees is True]
    disagree = [p for p in pts if p.agrees is False]
    unclear = [p for p in pts if p.agrees is None]
    parts = []
    for title, group in (("disagrees", disagree), ("agrees", agree), ("says nothing", unclear)):
        if outcome.any_of and verdict == CONFIRMED and title != "agrees":
            continue
        if group:
            said = "; ".join(p.said for p in group[:MAX_EVIDENCE])
            more = f"; and {len(group) - MAX_EVIDENCE} more" if len(group) > MAX_EVIDENCE else ""
            parts.append(f"{title} ({len(group)}): {said}{more}")
    if outcome.note:
        parts.append(outcome.note)
    deciding = (agree if outcome.any_of and verdict == CONFIRMED else disagree + agree) or unclear
    return " · ".join(parts), [c for p in deciding for c in p.cands]


def _hardware_gate(claim: Claim, matched: list[Cand], indexes: list[RunIndex]) -> Outcome | list[Cand]:
    """Records on the claim's hardware class, or the "not comparable here" outcome when only others ran."""
    spec = (claim.needs or {}).get("hardware")
    if not spec:
        return matched
    on = [(i, r) for i, r in matched if hardware.matches_class(i.run, spec)]
    if on:
        return on
    done = ran(matched)
    if not done:
        return absent(claim, matched, indexes)
    seen = sorted({hardware.describe(i.run, spec) for i, _ in done})
    measured = [(i, r) for i, r in done if r.status == "ok"] or done
    return Outcome(
        verdict=NOT_COMPARABLE,
        evidence=f"the claim is about {spec['label']}; measured here on {', '.join(seen)} "
        f"(for context only: {listing(measured, indexes)})",
        cands=measured,
    )


def _judge(claim: Claim, matched: list[Cand], indexes: list[RunIndex]) -> tuple[str, str, list[Cand], str]:
    gated = _hardware_gate(claim, matched, indexes)
    if isinstance(gated, Outcome):
        return str(gated.verdict), gated.evidence, gated.cands, ""
    outcome = CHECKS[str(claim.check)](claim, gated, indexes)
    if outcome.verdict is not None:
        return outcome.verdict, outcome.evidence, outcome.cands, ""
    needs = claim.needs or {}
    points = (
        [_fallback_point(p) for p in outcome.points] if needs.get("fallback") == "none" else outcome.points
    )
    cov = _coverage(points, needs, indexes)
    verdict = _decide(cov, outcome.any_of)
    evidence, cands = _evidence(cov, outcome, verdict)
    if verdict == UNMEASURABLE:
        evidence += f" · {claim.unmeasurable}"
    if needs.get("hardware"):
        seen = sorted({hardware.describe(i.run, needs["hardware"]) for i, _ in gated})
        evidence += f" · on {', '.join(seen)} ({needs['hardware']['label']})"
    return verdict, evidence, cands, cov.text


def _anchor(idx: RunIndex, rec: CellRecord) -> dict:
    """Where a record is shown: its matrix entry, or for a remedy attempt the entry of the cell it remedies."""
    cid = rec.cell_id
    shown = cid if cid in idx.by_id else (rec.remedy_of or cid)
    return {"run": idx.position, "cell_id": cid, "anchor": f"cell-{idx.position}-{shown}"}


def evaluate(indexes: list[RunIndex], claims: list[Claim] | None = None) -> list[ClaimResult]:
    """Every claim's verdict over the records of all rendered runs (cells and remedy attempts)."""
    claims = load_claims() if claims is None else claims
    pool = [(idx, as_claim_evidence(rec)) for idx in indexes for rec in idx.all_records()]
    out = []
    for claim in claims:
        matched = [(i, r) for i, r in pool if _matches(r, claim.select)]
        if claim.untestable:
            verdict, evidence, cands, coverage = (
                UNTESTABLE,
                f"the harness cannot test this: {claim.untestable}",
                [],
                "",
            )
            if claim.check:  # what the records do show, for context; it decides nothing
                _, context, cands, _ = _judge(claim, matched, indexes)
                evidence += f" (for context: {context})"
        else:
            verdict, evidence, cands, coverage = _judge(claim, matched, indexes)
        unique = list({(i.position, r.cell_id): (i, r) for i, r in cands}.values())
        fake = verdict not in (UNMEASURABLE, UNTESTABLE) and any(r.fake_device is not None for _, r in unique)
        out.append(
            ClaimResult(
                claim.id,
                claim.seed,
                claim.claim,
                verdict,
                evidence,
                tuple(r.cell_id for _, r in unique),
                tuple(_anchor(i, r) for i, r in unique),
                coverage,
                FAKE_BASIS if fake else "measured",
            )
        )
    return out
