"""The report's parity section: per cell, every parity metric with its bound, which one failed, and what was
compared (harness.measure.parity writes these into the record's `parity`).

Records written before per-quantity parity hold only {max_abs, rel_l2, tolerance, compared, ok}: they are shown
as what they are, one pooled relative L2 against one tolerance, labelled as the older comparison.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from harness.decide.index import RunIndex
from harness.decide.load import number
from harness.report.fmt import fmt_num
from harness.report.matrix import LogHref, anchor_for, machine_label

log = logging.getLogger(__name__)

RAN = ("ok", "parity_failed")


@dataclass
class MetricView:
    """One metric as shown: its value, its bound (empty when not judged) and whether it failed."""

    name: str
    value: str
    bound: str = ""
    failed: bool = False


@dataclass
class ParityRow:
    """One cell's parity in the parity table."""

    machine: str
    run_number: int
    cell_id: str
    backend: str
    precision: str
    method: str
    ok: bool
    failed: list[str]
    metrics: list[MetricView]
    compared: str
    corrupted: str = ""
    legacy: bool = False
    anchor: str | None = None
    log_href: str | None = None
    notes: list[str] = field(default_factory=list)


def _shown(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return str(value)
        return fmt_num(value, 4) if 1e-3 <= abs(value) < 1e6 or value == 0 else f"{value:.3g}"
    return "n/a" if value is None else str(value)[:80]


def _bound(entry) -> tuple[str, float] | None:
    """A recorded threshold [kind, bound], or None when it is not one."""
    if not isinstance(entry, list | tuple) or len(entry) != 2:
        return None
    kind, bound = entry
    if kind not in ("min", "max") or isinstance(bound, bool) or not isinstance(bound, int | float):
        return None
    return str(kind), float(bound)


def _compared(compared) -> str:
    """What was compared, as one line: the description, then the counts."""
    if not isinstance(compared, dict):
        return str(compared or "not recorded")[:400]
    parts = [str(compared.get("what") or "")]
    counts = [
        ("rows (ref/backend)", "rows_ref", "rows_out"),
        ("above the floor (ref/backend)", "ref_above_floor", "out_above_floor"),
    ]
    for label, a, b in counts:
        if isinstance(compared.get(a), int) and isinstance(compared.get(b), int):
            parts.append(f"{label} {compared[a]}/{compared[b]}")
    if isinstance(compared.get("matched"), int):
        parts.append(f"matched {compared['matched']}")
    floor = number(compared, "floor_rel")
    if floor is not None:
        parts.append(f"floor {floor:g} of the reference's top score")
    return "; ".join(p for p in parts if p)


def _current(p: dict) -> tuple[list[MetricView], list[str]]:
    metrics = p.get("metrics") if isinstance(p.get("metrics"), dict) else {}
    thresholds = p.get("thresholds") if isinstance(p.get("thresholds"), dict) else {}
    listed = p.get("failed") if isinstance(p.get("failed"), list) else []
    failed = [m for m in listed if isinstance(m, str)]
    views = []
    for name, value in metrics.items():
        b = _bound(thresholds.get(name))
        bound = "" if b is None else f"{'≥' if b[0] == 'min' else '≤'} {b[1]:g}"
        views.append(MetricView(str(name), _shown(value), bound, name in failed))
    return views, failed


def _legacy(p: dict) -> tuple[list[MetricView], list[str]]:
    """Records from before per-quantity parity: one pooled rel. L2 against one tolerance."""
    rel, tol = number(p, "rel_l2"), number(p, "tolerance")
    failed = [] if p.get("ok") else ["rel_l2"]
    views = [MetricView("rel_l2", _shown(rel), f"≤ {tol:g}" if tol is not None else "", bool(failed))]
    if "max_abs" in p:
        views.append(MetricView("max_abs", _shown(number(p, "max_abs"))))
    return views, failed


def parity_rows(indexes: list[RunIndex], href: LogHref) -> list[ParityRow]:
    """A row for every record whose outputs were compared with the reference."""
    rows = []
    for idx in indexes:
        machine = machine_label(idx, indexes)
        for rec in idx.all_records():
            p = rec.parity
            if rec.status not in RAN or not isinstance(p, dict):
                continue
            legacy = "metrics" not in p
            views, failed = _legacy(p) if legacy else _current(p)
            corrupted = p.get("corrupted") or rec.corrupted or ""
            cid = rec.cell_id or ""
            rows.append(
                ParityRow(
                    machine=machine,
                    run_number=idx.position + 1,
                    cell_id=cid,
                    backend=rec.backend,
                    precision=str(p.get("precision") or rec.precision_requested),
                    method="pooled rel. L2 (older record)" if legacy else str(p.get("method") or "n/a"),
                    ok=bool(p.get("ok")) and not failed,
                    failed=failed,
                    metrics=views,
                    compared=_compared(p.get("compared")),
                    corrupted=", ".join(map(str, corrupted))
                    if isinstance(corrupted, list)
                    else str(corrupted),
                    legacy=legacy,
                    anchor=anchor_for(idx.position, cid) if rec.status == "parity_failed" else None,
                    log_href=href(idx, rec),
                )
            )
    return rows
