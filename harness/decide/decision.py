"""The decision: every registered use case answered on the rendered machines, as data (no HTML).

`decide(indexes, cons)` asks each use case of the registry (harness.decide.registry), in page order, for its
answers, per task (harness.decide.tasks); the `Decision` holds them (what the page renders) and decision.json's entries (what CI and dashboards read).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from harness.decide import roofline, tasks
from harness.decide.index import RunIndex
from harness.decide.picks import Constraints, UseCaseAnswer
from harness.decide.registry import use_cases

log = logging.getLogger(__name__)

DECISION_VERSION = 1


@dataclass(frozen=True)
class Decision:
    """Every use case's answer in page order (`answers`), and the per-machine ones as decision.json entries."""

    cons: Constraints
    answers: tuple[UseCaseAnswer, ...]
    entries: tuple[dict, ...]

    def as_dict(self) -> dict:
        return {"version": DECISION_VERSION, "decisions": list(self.entries)}

    def to_json(self) -> str:
        """decision.json's text."""
        return json.dumps(self.as_dict(), indent=2, allow_nan=False) + "\n"


def decide(indexes: list[RunIndex], cons: Constraints | None = None) -> Decision:
    """Every registered use case on `indexes` under `cons` (the default constraints when None), per task the runs
    hold (harness.decide.tasks: a use case never compares one task's cells with another's), on YOLO26's cells but
    for the migration answers, which pair the families."""
    cons = cons or Constraints()
    groups = tasks.split(indexes)
    every_family = tasks.split(indexes, families=True)
    several = len(groups) > 1
    outcomes = [
        tasks.tagged(o, task, several)
        for case in use_cases()
        # YOLO26 alone, but for the use cases that pair the families (harness.decide.usecases.migration)
        for task, idxs in (every_family if getattr(case, "families", False) else groups)
        for o in case.decide(idxs, cons)
    ]
    # each pick says how far from its machine's limit it runs, in words and in decision.json (harness.decide.roofline)
    answers, entries = roofline.annotate(
        tuple(o.answer for o in outcomes), tuple(o.entry for o in outcomes if o.entry is not None), indexes
    )
    return Decision(cons, answers, entries)
