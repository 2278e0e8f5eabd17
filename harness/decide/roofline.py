"""How far from its machine's limit a cell runs: its roofline figures as the report, the picks and decision.json
read them.

A record's own `roofline` section when it has one (the run wrote it: harness.execute.roofline). A record written
before has none: it gets the same arithmetic (harness.core.roofline) on the committed table of the models' counted
work (harness.core.model_work) and its run's env.json `peaks`, which a run from before the peaks were measured does
not have: its peak, bound and shares are then null with that reason, and its work and achieved rate still show.
Every pick carries one line of it (`Pick.roofline`), and decision.json each pick's figures (`annotate`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

from harness.core import model_work
from harness.core.axes import DEFAULT_FAMILY
from harness.core.record import CellRecord
from harness.core.roofline import FIGURES, figures, rate_unit, share_text
from harness.decide.index import RunIndex, machine_label
from harness.decide.load import p50
from harness.decide.picks import Pick, UseCaseAnswer
from harness.decide.words import fmt_num

log = logging.getLogger(__name__)

#: a share of the bound below this is far from the machine's limit; at or above NEAR, near it
FAR, NEAR = 0.25, 0.7


@dataclass(frozen=True)
class View:
    """A cell's roofline figures (harness.core.roofline.FIGURES), the reason for each null one, and their sources."""

    figures: dict[str, Any]
    reasons: dict[str, str]
    work_source: str
    peaks_source: str
    #: "record" (the run wrote them) or "derived" (the committed work table and the run's env.json, at report time)
    origin: str

    def get(self, name: str) -> Any:
        return self.figures.get(name)

    def why(self, name: str) -> str:
        return self.reasons.get(name) or "not known"

    def as_dict(self) -> dict:
        return {
            **self.figures,
            "work_source": self.work_source,
            "peaks_source": self.peaks_source,
            "origin": self.origin,
            "null_reasons": {k: v for k, v in self.reasons.items() if self.figures.get(k) is None},
        }


def of(rec: CellRecord | None, idx: RunIndex) -> View | None:
    """The roofline of an ok record with a model-only p50 (None for any other)."""
    if rec is None or rec.status != "ok" or p50(rec) is None:
        return None
    r = rec.roofline
    if r is not None:
        values = {k: getattr(r, k) for k in FIGURES}
        reasons = {k: str(rec.null_reasons.get(f"roofline.{k}") or "") for k in FIGURES if values[k] is None}
        return View(values, reasons, r.work_source, r.peaks_source, "record")
    work, work_why = model_work.lookup(
        rec.size, rec.task, rec.head, rec.height, rec.width, rec.batch, rec.weights
    )
    if rec.remedy and "backbone-only" in rec.remedy:
        work, work_why = None, "a backbone-only remedy runs part of the model: the table counts whole models"
    if rec.family != DEFAULT_FAMILY:
        work, work_why = None, f"the committed work table counts YOLO26 only, not {rec.model}"
    peaks = idx.run.env.get("peaks") if isinstance(idx.run.env, dict) else None
    values, reasons = figures(
        work,
        p50(rec),
        rec.device,
        rec.precision_executed,
        rec.precision_requested,
        peaks if isinstance(peaks, dict) else None,
        rec.precision_detail,
        work_why or "the model's work is not known",
    )
    source = f"env.json peaks of run {idx.run.run_id}" if isinstance(peaks, dict) else ""
    return View(values, reasons, str(work.get("how", "")) if work else "", source, "derived")


def _g(v: Any) -> str:
    """Giga-units to 3 significant figures, without an exponent (2610, not 2.61e+03)."""
    return fmt_num(float(v) / 1e9)


def _rate(v: Any) -> str:
    """FLOP/s in words: GFLOP/s below 10 TFLOP/s, TFLOP/s from there."""
    scale, prefix = rate_unit(float(v))
    return f"{fmt_num(float(v) / scale)} {prefix}FLOP/s"


def words(rec: CellRecord | None, idx: RunIndex) -> str:
    """One line: how far from its machine's limit the cell runs ("" for a record without a rate)."""
    v = of(rec, idx)
    if v is None:
        return ""
    achieved, flops = v.get("achieved_flops_s"), v.get("flops")
    if achieved is None:
        return f"how far from the machine's limit is not known: {v.why('achieved_flops_s')}"
    rate = f"{_rate(achieved)} ({_g(flops)} GFLOP a call)"
    share = v.get("share_of_bound")
    if share is None:
        return f"runs at {rate}; the machine's limit is not known: {v.why('share_of_bound')}"
    peak = v.get("share_of_peak")
    return (
        f"runs at {share_text(share)} of this machine's roofline bound ({v.get('bound_by')}-bound, "
        f"{_rate(v.get('bound_flops_s'))}; {share_text(peak)} of its {v.get('peak_of')} compute peak): "
        f"{rate}, {verdict(share)}"
    )


def verdict(share_of_bound: float) -> str:
    """How far from the machine's limit a share of the roofline bound is, in words (FAR, NEAR)."""
    if share_of_bound < FAR:
        return "far from the machine's limit: a faster runtime or a narrower precision could pay"
    if share_of_bound >= NEAR:
        return "near the machine's limit: little left to gain on this machine"
    return "a part of the machine's limit"


def _view_dict(rec: CellRecord | None, idx: RunIndex | None) -> dict | None:
    v = of(rec, idx) if idx is not None else None
    return None if v is None else v.as_dict()


def annotate(
    answers: tuple[UseCaseAnswer, ...], entries: tuple[dict, ...], indexes: list[RunIndex]
) -> tuple[tuple[UseCaseAnswer, ...], tuple[dict, ...]]:
    """Every pick with its roofline line (`Pick.roofline`), every decision.json pick with its figures
    (`roofline`): the use cases decide, this says how far from the machine's limit each pick runs."""
    cells: dict[tuple[str, str], tuple[RunIndex, CellRecord]] = {}
    for idx in indexes:
        label = machine_label(idx, indexes)
        for rec in idx.all_records():
            cells[(label, str(rec.cell_id))] = (idx, rec)

    def pick(p: Pick | None) -> Pick | None:
        if p is None or p.roofline:
            return p
        idx, rec = cells.get((p.machine, p.cell_id), (None, None))
        return replace(p, roofline=words(rec, idx)) if idx is not None else p

    def picks(ps: tuple[Pick, ...]) -> tuple[Pick, ...]:
        return tuple(q for q in (pick(p) for p in ps) if q is not None)

    out_answers = tuple(
        replace(
            a, winner=pick(a.winner), runner_up=pick(a.runner_up), tied=picks(a.tied), others=picks(a.others)
        )
        for a in answers
    )

    def entry_pick(d: Any, machine: str) -> Any:
        if not isinstance(d, dict):
            return d
        cid = (
            (d.get("configuration") or {}).get("cell_id")
            if isinstance(d.get("configuration"), dict)
            else None
        )
        idx, rec = cells.get((machine, str(cid)), (None, None))
        return {**d, "roofline": _view_dict(rec, idx)}

    out_entries = []
    for e in entries:
        machine = str(e.get("machine"))
        out = {**e, "pick": entry_pick(e.get("pick"), machine)}
        if isinstance(e.get("tied_with"), list):
            out["tied_with"] = [entry_pick(d, machine) for d in e["tied_with"]]
        out_entries.append(out)
    return out_answers, tuple(out_entries)
