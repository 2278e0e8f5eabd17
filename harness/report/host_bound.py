"""The report's "Host-bound CUDA cells" section: each ok CUDA cell's host-bound verdict (harness.measure.host_bound)
and its comparisons marked machine-dependent where the cell is host-bound (its time is the host's launch speed,
which moves from machine to machine and within minutes on one)."""

from __future__ import annotations

from dataclasses import dataclass

from harness.decide.index import RunIndex
from harness.measure.host_bound import HOST_BOUND_SHARE, share_text, verdict
from harness.report.matrix import machine_label

MACHINE_DEPENDENT = "machine-dependent"


@dataclass(frozen=True)
class HostBoundRow:
    machine: str
    cell_id: str
    state: str  # "host-bound", "device-bound" or "unknown"
    share: str  # the figure the verdict rests on, as shown
    basis: str
    #: the cells a paired ratio compares it with, each comparison machine-dependent when this cell is host-bound
    compared_with: tuple[str, ...] = ()


def host_bound_rows(indexes: list[RunIndex]) -> list[HostBoundRow]:
    """One row per ok CUDA cell (and remedy attempt) of the rendered runs; a comparison (a paired ratio) is
    machine-dependent when either of its two cells is host-bound."""
    rows = []
    for idx in indexes:
        records = idx.all_records()
        verdicts = {rec.cell_id: v for rec in records if (v := verdict(rec, records)) is not None}
        bound = {cid for cid, v in verdicts.items() if v.get("host_bound")}
        for rec in records:
            v = verdicts.get(rec.cell_id)
            if v is None:
                continue
            hb = v.get("host_bound")
            state = "unknown" if hb is None else ("host-bound" if hb else "device-bound")
            others = (rec.paired or {}).get("others") or {}
            dependent = tuple(sorted(o for o in others if rec.cell_id in bound or o in bound))
            basis = v.get("reason") or v.get("basis") or ""
            rows.append(
                HostBoundRow(machine_label(idx, indexes), rec.cell_id, state, share_text(v), basis, dependent)
            )
    return rows


def host_bound_section(indexes: list[RunIndex]) -> dict:
    rows = host_bound_rows(indexes)
    return {
        "rows": rows,
        "threshold": HOST_BOUND_SHARE,
        "host_bound": sum(r.state == "host-bound" for r in rows),
        "label": MACHINE_DEPENDENT,
    }
