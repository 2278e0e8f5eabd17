"""The claims check: each seed claim (claims.yaml) set against the records of the rendered runs.

A claim names a predicate (`check`) from the `CHECKS` registry (claim_checks.py), a record selection and the
predicate's parameters. The verdict is confirmed, refuted (with the measurement) or not measurable (with why).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.report.claim_checks import CHECKS
from harness.report.index import RunIndex
from harness.report.load import run_shape

log = logging.getLogger(__name__)

__all__ = ["CHECKS", "CLAIMS_FILE", "Claim", "ClaimResult", "evaluate", "load_claims"]

CLAIMS_FILE = Path(__file__).with_name("claims.yaml")
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
}
CLAIM_KEYS = {"id", "seed", "claim", "check", "select", "unmeasurable"}


@dataclass(frozen=True)
class Claim:
    """One row of claims.yaml: the claim, where it comes from, and how to check it."""

    id: str
    seed: str
    claim: str
    check: str
    select: dict[str, Any]
    params: dict[str, Any]
    unmeasurable: str


@dataclass(frozen=True)
class ClaimResult:
    """A claim's verdict on the rendered runs, with the evidence (measured numbers) and its cells."""

    id: str
    seed: str
    claim: str
    verdict: str
    evidence: str
    cells: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


def load_claims(path: Path = CLAIMS_FILE) -> list[Claim]:
    """Read and validate the claims table; an unknown check or selection key is an error, not a silent skip."""
    raw = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or []
    claims, seen = [], set()
    for n, item in enumerate(raw, 1):
        missing = CLAIM_KEYS - {"select"} - set(item)
        if missing:
            raise ValueError(f"{path}: claim {n} lacks {sorted(missing)}")
        if item["check"] not in CHECKS:
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
                str(item["check"]),
                dict(item.get("select") or {}),
                params,
                str(item["unmeasurable"]),
            )
        )
    return claims


def _matches(rec: dict, select: dict[str, Any]) -> bool:
    is_remedy = bool(rec.get("remedy") or rec.get("remedy_of"))
    mode = select.get("remedies", "exclude")
    if (mode == "exclude" and is_remedy) or (mode == "only" and not is_remedy):
        return False
    if "remedy_contains" in select and str(select["remedy_contains"]) not in str(rec.get("remedy") or ""):
        return False
    for key, field in (
        ("backend", "backend"),
        ("device", "device"),
        ("size", "size"),
        ("task", "task"),
        ("head", "head"),
        ("batch", "batch"),
        ("precision", "precision_requested"),
    ):
        if key in select:
            want = select[key] if isinstance(select[key], list) else [select[key]]
            if rec.get(field) not in want:
                return False
    if "dynamic" in select and bool(rec.get("dynamic")) != bool(select["dynamic"]):
        return False
    if "shape" in select and run_shape(rec) != select["shape"]:
        return False
    if "not_multiple_of" in select:
        m, h, w = int(select["not_multiple_of"]), rec.get("height"), rec.get("width")
        if not (isinstance(h, int) and isinstance(w, int)) or (h % m == 0 and w % m == 0):
            return False
    return True


def evaluate(indexes: list[RunIndex], claims: list[Claim] | None = None) -> list[ClaimResult]:
    """Every claim's verdict over the records of all rendered runs (cells and remedy attempts)."""
    claims = load_claims() if claims is None else claims
    pool = [(idx, rec) for idx in indexes for rec in idx.all_records()]
    out = []
    for claim in claims:
        matched = [(i, r) for i, r in pool if _matches(r, claim.select)]
        verdict, evidence, cells = CHECKS[claim.check](claim, matched, indexes)
        out.append(
            ClaimResult(
                claim.id,
                claim.seed,
                claim.claim,
                verdict,
                evidence,
                tuple(str(r.get("cell_id")) for _, r in cells),
            )
        )
    return out
