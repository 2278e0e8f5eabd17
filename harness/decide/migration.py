"""Should I move to YOLO26? YOLO26 against the model a user runs today (YOLO11, YOLOv8), pair by pair, on one
machine.

A pair is a cell of the other family and the YOLO26 cell of the same backend, device, size, task, shape, batch and
precision (each YOLO26 head the machine ran: the NMS-free `e2e` first, what YOLO26 deploys without NMS; `raw` where
it ran too). The run timed both in one interleaved group (harness.execute.workload.timing_key), so each pair has:

- the end-to-end ratio, YOLO26's e2e p50 over the other's, with its 95% interval (`paired_e2e`: the same letterbox
  and normalisation before, ultralytics' NMS after YOLO11's one-to-many head, the top-k filter after YOLO26's
  NMS-free head): what a user who ships the whole pipeline sees. It decides: faster where the interval is below 1,
  slower above, tied where it holds 1.
- the model-only ratio beside it (`paired`), which is what ultralytics' published speeds compare: it leaves out
  YOLO11's NMS, so it flatters YOLO11 where NMS costs.
- the accuracy difference where both figures are known on one scale: measured on the user's data for both, or
  ultralytics' published tables for both (harness.accuracy.published_families; at the published shape, fp32).

A machine's answer: YOLO26 where judged pairs are faster end to end and none slower (the others tied), the other
family where pairs are slower and none faster, tied where every interval holds 1, and no single answer where the
backends disagree, faster on some and slower on others (each pair says which). Records timed apart (another run) compare by their separate p50s, without an interval, and decide nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from harness.core.axes import DEFAULT_FAMILY, FAMILY_NAMES, HEADS, SIZES
from harness.core.record import CellRecord
from harness.decide import paired
from harness.decide.accuracy import MEASURED, Accuracy, accuracy_of
from harness.decide.index import RunIndex, backend_order, machine_label, order_key
from harness.decide.load import run_shape
from harness.decide.picks import Pick, UseCaseAnswer

log = logging.getLogger(__name__)

FASTER, SLOWER, TIED, UNKNOWN = "faster", "slower", "tied", "not known"
#: lines of pairs the first screen shows under an answer (the evidence has every one)
SHOWN_ROWS = 8


def name(family: str) -> str:
    """A family in words: YOLO26, YOLO11, YOLOv8."""
    return FAMILY_NAMES.get(family, family)


@dataclass(frozen=True)
class Pair:
    """One YOLO26 cell and the other family's cell of the same configuration, both ok on one machine."""

    yolo26: CellRecord
    other: CellRecord
    e2e: paired.Ratio | None
    model: paired.Ratio | None
    accuracy_26: Accuracy
    accuracy_other: Accuracy

    @property
    def relation(self) -> str:
        """YOLO26 end to end against the other: faster, slower, tied (the interval holds 1), or not known (no
        end-to-end ratio with an interval: not timed together, or --no-e2e)."""
        if self.e2e is None or not self.e2e.paired or self.e2e.ci is None:
            return UNKNOWN
        return {"faster": FASTER, "slower": SLOWER, "tied": TIED}[self.e2e.relation()]

    def accuracy_difference(self) -> float | None:
        """YOLO26's accuracy less the other's, where both are known on one scale (None otherwise)."""
        a, b = self.accuracy_26, self.accuracy_other
        if a.source != b.source or a.value is None or b.value is None:
            return None
        return a.value - b.value

    def accuracy_words(self) -> str:
        """The difference in words, with both figures and their source."""
        a, b = self.accuracy_26, self.accuracy_other
        diff = self.accuracy_difference()
        if diff is None:
            return f"accuracy difference not known ({b.why or a.why or 'not known on one scale for both'})"
        if a.source == MEASURED:
            return f"mAP50-95 {a.value:.3f} vs {b.value:.3f}: {diff:+.3f} (measured on your data)"
        return f"{a.label} {a.value:.1f} vs {b.value:.1f}: {diff:+.1f} (published, not measured here)"

    def config(self) -> str:
        """`onnxruntime yolo26n e2e vs yolo11n, 640 fp32`."""
        r = self.yolo26
        batch = f" b{r.batch}" if r.batch != 1 else ""
        return f"{r.backend} {r.model} {r.head} vs {self.other.model}, {run_shape(r)} {r.precision_requested}{batch}"

    def line(self) -> str:
        """One line: the configuration, the end-to-end ratio with its interval and what it says, the model-only
        ratio beside it, the accuracy difference, and what the other's NMS was given."""
        said = {FASTER: "YOLO26 faster", SLOWER: "YOLO26 slower", TIED: "tied", UNKNOWN: "not decided"}[
            self.relation
        ]
        e2e = f"e2e {self.e2e.text()}" if self.e2e else "e2e not measured"
        model = f"model-only {self.model.text()}" if self.model else "model-only not measured"
        return f"{self.config()}: {e2e}, {said}; {model}; {self.accuracy_words()}{self.nms_words()}"

    def nms_words(self) -> str:
        """What YOLO11's NMS had to do on the timed image, where its weights are random: a trained model passes
        more boxes to NMS on a real image, and NMS costs more with them."""
        given = (self.other.e2e or {}).get("postprocess_input") if isinstance(self.other.e2e, dict) else None
        above = given.get("above_conf") if isinstance(given, dict) else None
        if above is None or not str(self.other.weights).startswith("random-init"):
            return ""
        return (
            f"; {self.other.model}'s NMS got {above} boxes above conf {given.get('conf')} (random-init weights: "
            "trained ones pass more on a real image, and NMS costs more with them; --weights-dir for yours)"
        )

    def as_dict(self) -> dict:
        def ratio(r: paired.Ratio | None) -> dict | None:
            if r is None:
                return None
            return {"ratio": r.value, "ratio_ci": list(r.ci) if r.ci else None, "paired": r.paired}

        y, o = self.yolo26, self.other
        return {
            "backend": y.backend,
            "device": y.device,
            "size": y.size,
            "task": y.task,
            "shape": run_shape(y),
            "batch": y.batch,
            "precision": y.precision_requested,
            "yolo26": {"cell_id": y.cell_id, "model": y.model, "head": y.head, "weights": y.weights},
            "other": {"cell_id": o.cell_id, "model": o.model, "head": o.head, "weights": o.weights},
            "e2e": ratio(self.e2e),
            "model_only": ratio(self.model),
            "relation": self.relation,
            "accuracy": {
                "yolo26": self.accuracy_26.as_dict(),
                "other": self.accuracy_other.as_dict(),
                "difference": self.accuracy_difference(),
                "words": self.accuracy_words(),
            },
            "nms_input": (o.e2e or {}).get("postprocess_input") if isinstance(o.e2e, dict) else None,
        }


def _config_key(rec: CellRecord) -> tuple:
    return (
        rec.backend,
        rec.device,
        rec.size,
        rec.task,
        rec.height,
        rec.width,
        bool(rec.dynamic),
        rec.batch,
        rec.precision_requested,
    )


def pairs(idx: RunIndex, family: str) -> list[Pair]:
    """Every pair of an ok `family` cell and an ok YOLO26 cell of the same configuration on the machine, YOLO26's
    e2e head first; in the backends' order, smaller sizes first."""
    ok = [r for r in idx.cells if r.status == "ok" and r.height and r.width]
    ours: dict[tuple, list[CellRecord]] = {}
    for r in ok:
        if r.family == DEFAULT_FAMILY:
            ours.setdefault(_config_key(r), []).append(r)
    out = []
    for other in (r for r in ok if r.family == family):
        for y in sorted(ours.get(_config_key(other), []), key=lambda r: order_key(r.head, HEADS)):
            out.append(
                Pair(
                    y,
                    other,
                    paired.e2e_ratio(y, other),
                    paired.ratio(y, other),
                    accuracy_of(y, idx.cells),
                    accuracy_of(other, idx.cells),
                )
            )
    return sorted(
        out,
        key=lambda p: (
            order_key(p.yolo26.size, SIZES),
            (p.yolo26.height or 0) * (p.yolo26.width or 0),
            str(p.yolo26.precision_requested),
            order_key(p.yolo26.backend, backend_order()),
            order_key(p.yolo26.head, HEADS),
        ),
    )


def _span(ps: list[Pair]) -> str:
    values = [p.e2e.value for p in ps if p.e2e is not None]
    if not values:
        return ""
    lo, hi = min(values), max(values)
    return f"{lo:.2f}×" if abs(hi - lo) < 0.005 else f"{lo:.2f}–{hi:.2f}×"


def answer(
    idx: RunIndex, indexes: list[RunIndex], family: str, key: str, title: str, criterion: str, constraint: str
) -> tuple[UseCaseAnswer, dict]:
    """The migration answer on one machine, and its decision.json entry."""
    machine = machine_label(idx, indexes)
    ps = pairs(idx, family)
    other = name(family)
    base = dict(
        key=key,
        title=title,
        criterion=criterion,
        constraint=constraint,
        machine=machine,
        machine_pos=idx.position,
    )
    entry = {
        "use_case": key,
        "title": title,
        "machine": machine,
        "family": family,
        "objective": criterion,
        "rule": constraint,
        "pairs": [p.as_dict() for p in ps],
    }
    if not ps:
        ran = any(r.family == family for r in idx.cells)
        why = (
            f"no {other} cell ran ok beside a YOLO26 cell of the same backend, size, shape and precision"
            if ran
            else f"no {other} cell on this machine"
        )
        return UseCaseAnswer(**base, none_reason=why), {**entry, "verdict": None, "reason": why}
    rows = tuple(p.line() for p in ps)
    judged = [p for p in ps if p.relation != UNKNOWN]
    counts = {r: sum(1 for p in judged if p.relation == r) for r in (FASTER, SLOWER, TIED)}
    summary = ", ".join(f"{n} {r}" for r, n in counts.items() if n)
    device = ps[0].yolo26.device
    first = ps[0]
    if not judged:
        why = (
            "no pair has an end-to-end ratio with its interval (not timed together in this run, or --no-e2e): "
            "each pair's model-only ratio is below"
        )
        return UseCaseAnswer(**base, none_reason=why, rows=rows), {**entry, "verdict": None, "reason": why}
    accuracy = "; ".join(dict.fromkeys(_accuracy_summary(p) for p in judged))
    one_way = (counts[FASTER] > 0) != (counts[SLOWER] > 0)  # faster or slower somewhere, never both
    if one_way:
        faster = counts[FASTER] > 0
        winner_family, loser_family = (DEFAULT_FAMILY, family) if faster else (family, DEFAULT_FAMILY)
        decided = [p for p in judged if p.relation == (FASTER if faster else SLOWER)]
        tied_too = f", tied on {counts[TIED]}" if counts[TIED] else ""
        figure = (
            f"YOLO26 {'faster' if faster else 'slower'} end to end on {len(decided)} of {len(ps)} pairs "
            f"({_span(decided)} {other}'s e2e p50){tied_too}, {'slower' if faster else 'faster'} on none"
        )
        win = Pick(name(winner_family), device, machine, first.yolo26.cell_id, figure, figure, accuracy)
        lose = Pick(
            name(loser_family),
            device,
            machine,
            first.other.cell_id,
            f"{name(loser_family)}: {'slower' if faster else 'faster'} end to end on {len(decided)} pairs, "
            f"{'faster' if faster else 'slower'} on none",
        )
        verdict = "move" if faster else "stay"
        return (
            UseCaseAnswer(**base, winner=win, runner_up=lose, rows=rows),
            {**entry, "verdict": verdict, "counts": counts},
        )
    if counts[TIED] == len(judged):
        why = f"every pair's end-to-end interval holds 1 ({len(judged)} pairs, {_span(judged)})"
        tied = tuple(
            Pick(name(f), device, machine, cid, why, f"tied end to end ({_span(judged)})", accuracy)
            for f, cid in ((DEFAULT_FAMILY, first.yolo26.cell_id), (family, first.other.cell_id))
        )
        return (
            UseCaseAnswer(**base, tied=tied, tie_reason=why, rows=rows),
            {**entry, "verdict": "tied", "counts": counts},
        )
    why = f"it depends on the backend and size: YOLO26 end to end {summary} (each pair below)"
    return UseCaseAnswer(**base, none_reason=why, rows=rows), {
        **entry,
        "verdict": "depends",
        "counts": counts,
    }


def _accuracy_summary(p: Pair) -> str:
    diff = p.accuracy_difference()
    if diff is None:
        return "accuracy difference not known"
    if p.accuracy_26.source == MEASURED:
        return f"{p.yolo26.model} {p.yolo26.head}: mAP50-95 {diff:+.3f} (measured on your data)"
    return f"{p.yolo26.model} {p.yolo26.head}: {p.accuracy_26.label} {diff:+.1f} (published)"
