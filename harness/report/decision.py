"""The report's first screen: what to ship on each machine, per use case, in a few lines.

One row per use case (its objective and constraints), one column per machine: the pick with the figure that won
it, the cells tied for it, or why none qualifies or that the use case was not measured. Each row links to the
evidence behind it, which names the runner-ups and every rejected cell with its figure.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from harness.core.record import CellRecord
from harness.decide import host_bound, nearest
from harness.decide.index import RunIndex
from harness.decide.picks import Pick, UseCaseAnswer
from harness.decide.registry import ALWAYS, IF_ANSWERED, UseCase, use_cases
from harness.report.matrix import machine_label

log = logging.getLogger(__name__)

SHORT = 110  # characters of a reason on the first screen; the evidence below has the whole text
ROWS_SHOWN = 8  # lines of an answer's comparisons on the first screen (`UseCaseAnswer.rows`)


@dataclass(frozen=True)
class Answer:
    """One use case on one machine (or on every machine, `span`), as the first screen shows it."""

    state: str  # pick, tied, none, not-measured
    anchor: str
    backends: tuple[str, ...] = ()
    device: str = ""
    figure: str = ""
    note: str = ""
    cell_ids: tuple[str, ...] = ()
    workload: str = ""  # the workload the cells were compared on
    labels: tuple[str, ...] = ()  # tied: each named with its configuration (the candidate-based picks)
    command: str = ""  # no pick: the command line that measures the configuration that could meet it
    #: under the pick: the largest size that fits, the fastest that meets the bound and what it gives up, and
    #: whether the pick sits at the limit (the latency-bound use cases)
    lines: tuple[str, ...] = ()


@dataclass
class DecisionRow:
    key: str
    title: str
    objective: str
    constraint: str
    answers: list[Answer] = field(default_factory=list)
    span: bool = False  # one answer across the machines (the use case compares them all)


def anchor(rec: UseCaseAnswer) -> str:
    """The id of a use case's block in the evidence section (per task where the answer is one task's of several:
    its title says the task)."""
    task = f"-{rec.task}" if rec.task and rec.title.endswith(f" · {rec.task}") else ""
    return f"rec-{rec.key}{task}" + (f"-{rec.machine_pos}" if rec.machine_pos is not None else "")


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SHORT else text[: SHORT - 1] + "…"


def _pick_name(p: Pick) -> str:
    """`openvino yolo26n 320 fp32 (e2e p90 4.75 ms [4.70-4.85])`."""
    return (
        f"{p.backend} {p.figure.replace(' · ', ' (', 1)})"
        if " · " in p.figure
        else f"{p.backend} ({p.figure})"
    )


def _next_words(p: Pick) -> str:
    """The runner-up on the first screen: its figure where its scenario measured it, else only what it is (the
    evidence section gives the figure and why it was not measured)."""
    if p.measured:
        return p.figure
    return f"{p.figure.split(' · ')[0]}, not measured by its scenario: see the evidence"


def under_pick(rec: UseCaseAnswer) -> tuple[str, ...]:
    """The lines under a latency-bound pick, in reading order: the largest size that fits, the fastest that meets
    the bound and what it gives up, the pick at the limit and the next with margin."""
    lines = []
    if rec.ladder_line:
        lines.append(rec.ladder_line)
    if rec.faster:
        lines.append(f"{rec.faster_words}: {_pick_name(rec.faster)}; gives up {rec.gives_up}")
    if rec.at_limit:
        nxt = (
            f"; with margin: {_pick_name(rec.with_margin)}"
            if rec.with_margin
            else "; none meets it with margin"
        )
        lines.append(rec.at_limit + nxt)
    # the comparisons the answer rests on (the migration answers' pairs), the first few: the evidence has all
    lines += rec.rows[:ROWS_SHOWN]
    if len(rec.rows) > ROWS_SHOWN:
        lines.append(f"and {len(rec.rows) - ROWS_SHOWN} more: see the evidence")
    return tuple(lines)


def answer(rec: UseCaseAnswer) -> Answer:
    """The first-screen form of one use case's answer."""
    where = anchor(rec)
    if rec.winner is not None:
        w = rec.winner
        nxt = rec.runner_up
        note = f"next: {nxt.backend}/{nxt.device} ({_next_words(nxt)})" if nxt and nxt.figure else ""
        if not nxt:
            note = "no other cell qualifies"
        if rec.rejections:
            note += f"; {len(rec.rejections)} rejected"
        if w.accuracy:  # what the pick trades in accuracy is never left to the evidence section
            note = f"{w.accuracy}; {note}"
        if w.host_bound:  # the figure is the host's: it will move with the host CPU
            note = f"{host_bound.SHORT}; {note}"
        return Answer(
            "pick",
            where,
            (w.backend,),
            w.device,
            w.figure or w.numbers,
            note,
            (w.cell_id,),
            rec.workload or "",
            lines=under_pick(rec),
        )
    if rec.tied:
        t = rec.tied[0]
        # candidate picks differ in more than the backend: each is named with its configuration
        labels = tuple(
            f"{p.backend} {p.figure.split(' · ')[0]}" if " · " in p.figure else p.backend for p in rec.tied
        )
        bound = [p.backend for p in rec.tied if p.host_bound]
        note = _clip(rec.tie_reason or "")
        if bound:
            note = f"{host_bound.SHORT} ({len(bound)} of {len(rec.tied)}); {note}"
        return Answer(
            "tied",
            where,
            tuple(p.backend for p in rec.tied),
            t.device,
            f"{t.backend}: {t.figure or t.numbers}",  # the best-ranked one's figure, said as whose
            note,
            tuple(p.cell_id for p in rec.tied),
            rec.workload or "",
            labels=labels,
            lines=under_pick(rec),
        )
    if not rec.measured:
        return Answer("not-measured", where, note=_clip(rec.none_reason or "not measured"))
    if rec.nearest_miss:
        nm = rec.nearest_miss
        return Answer("none", where, note=nearest.text(nm), command=nm.get("command") or "")
    if rec.rejections:
        kinds = sorted({r.constraint for r in rec.rejections})
        note = f"none meets the constraints: {len(rec.rejections)} rejected ({', '.join(kinds)})"
        return Answer("none", where, note=note)
    return Answer("none", where, note=_clip(rec.none_reason or "no cell qualifies"), lines=under_pick(rec))


def decision_rows(recs: list[UseCaseAnswer], indexes: list[RunIndex]) -> list[DecisionRow]:
    """The first screen's rows, in the registry's page order: per machine for the per-machine use cases, one
    answer across machines for the others (shown only when answered, for the model-only ones: each use case says
    where it shows). Runs from before the scenario records get one row saying the scenario use cases were not
    measured, not four."""
    rows = []
    shown = [c for c in use_cases() if c.first_screen in (ALWAYS, IF_ANSWERED)]
    for case, mine in _by_case_and_task(recs, shown):
        key = case.key
        first = mine[0]
        row = DecisionRow(key, first.title, first.criterion, first.constraint or "")
        if first.machine_pos is None:
            if case.first_screen == IF_ANSWERED and first.winner is None and not first.tied:
                continue
            row.answers, row.span = [answer(first)], True
        else:
            by_pos = {r.machine_pos: r for r in mine}
            row.answers = [answer(by_pos[i.position]) for i in indexes if i.position in by_pos]
        rows.append(row)
    return _fold_unmeasured(rows, indexes)


def _by_case_and_task(
    recs: list[UseCaseAnswer], cases: list[UseCase]
) -> list[tuple[UseCase, list[UseCaseAnswer]]]:
    """(use case, its answers of one task), in page order, then the tasks' order (harness.decide.tasks): one row
    each on the first screen."""
    out = []
    for case in cases:
        tasks: dict[str | None, list[UseCaseAnswer]] = {}
        for r in recs:
            if r.key == case.key:
                tasks.setdefault(r.task, []).append(r)
        out.extend((case, mine) for mine in tasks.values())
    return out


def _fold_unmeasured(rows: list[DecisionRow], indexes: list[RunIndex]) -> list[DecisionRow]:
    """The scenario use cases in one row when no machine measured any of them (runs from before the scenarios)."""
    scenario_keys = {c.key for c in use_cases() if c.scenario}
    scen = [r for r in rows if r.key in scenario_keys]
    if not scen or any(a.state != "not-measured" for r in scen for a in r.answers):
        return rows
    why = "no scenario records in this run (recorded before them): the model-only rows below stand in"
    folded = DecisionRow(
        "scenarios",
        ", ".join(r.title for r in scen),
        "the use cases measured end to end, under their scenarios",
        "",
        [Answer("not-measured", scen[0].answers[0].anchor, note=why) for _ in indexes],
    )
    at = rows.index(scen[0])
    return [*rows[:at], folded, *(r for r in rows[at:] if r.key not in scenario_keys)]


@dataclass(frozen=True)
class Column:
    """A machine's column: its label, and the workload its per-machine answers were compared on when they share
    one (said once in the heading instead of in every answer)."""

    label: str
    workload: str


def machine_columns(rows: list[DecisionRow], indexes: list[RunIndex]) -> list[Column]:
    out = []
    for n, idx in enumerate(indexes):
        # said once only when every answered row compared that one workload (camera, server and offline
        # compare every configuration, their workload is "")
        loads = {
            r.answers[n].workload
            for r in rows
            if not r.span and n < len(r.answers) and r.answers[n].state in ("pick", "tied")
        }
        loads = loads if "" not in loads else {"", "(several)"}
        out.append(
            Column(
                f"[{idx.position + 1}] {machine_label(idx, indexes)}", loads.pop() if len(loads) == 1 else ""
            )
        )
    return out


@dataclass(frozen=True)
class Absent:
    """A device of a machine on which no cell ran: one line on the first screen instead of rows of `no pick`."""

    machine: str
    device: str
    skipped: int
    reason: str  # the most common skip reason


def absent_devices(indexes: list[RunIndex]) -> list[Absent]:
    """The devices of each machine whose every cell was skipped, with the commonest reason (a CPU-only machine:
    cuda, gpu and the export-only targets' devices that nothing exported for)."""
    out = []
    for idx in indexes:
        by_dev: dict[str, list[CellRecord]] = {}
        for rec in idx.cells:
            by_dev.setdefault(str(rec.device), []).append(rec)
        for dev, recs in sorted(by_dev.items()):
            if not recs or any(r.status != "skipped" for r in recs):
                continue
            reasons: dict[str, int] = {}
            for r in recs:
                why = str(r.reason or "no reason recorded")
                reasons[why] = reasons.get(why, 0) + 1
            out.append(
                Absent(machine_label(idx, indexes), dev, len(recs), max(reasons, key=reasons.__getitem__))
            )
    return out
