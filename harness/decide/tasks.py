"""The task is part of what a user ships: every use case is answered per task the rendered runs hold (detect
first), on indexes of that task alone (harness.decide.index.RunIndex.of_task), so candidates of one task never
compete with another's. The model family likewise: the use cases decide on YOLO26's cells alone (`yolo26_only`),
and only the migration answers, which ask for every family (`split(families=True)`), see the others. The e2e and raw heads of one task do compete (the same outputs after NMS); a pick says which
head where the task has both. A run of one task is decided as it always was; its answers and entries say the task.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from harness.core.axes import DEFAULT_FAMILY, TASKS
from harness.decide.index import RunIndex, order_key
from harness.decide.registry import Outcome

log = logging.getLogger(__name__)


def tasks_of(indexes: list[RunIndex]) -> tuple[str, ...]:
    """Every task of the rendered runs' cells, in the axis' order."""
    found = {t for idx in indexes for t in idx.tasks()}
    return tuple(sorted(found, key=lambda t: order_key(t, TASKS)))


def yolo26_only(indexes: list[RunIndex]) -> list[RunIndex]:
    """The indexes with YOLO26's cells alone: each use case that says what to ship decides on them (a YOLO11 cell
    is never the camera's pick for YOLO26); the families a user migrates from are compared with YOLO26 in their own
    answers (harness.decide.usecases.migration). An index holding YOLO26 alone is returned as it is."""
    return [
        idx if all(r.family == DEFAULT_FAMILY for r in idx.cells) else idx.of_family(DEFAULT_FAMILY)
        for idx in indexes
    ]


def split(indexes: list[RunIndex], families: bool = False) -> list[tuple[str | None, list[RunIndex]]]:
    """(task, the indexes of that task) for each task; one group of every index as it is (task None when the runs
    hold no cell, else the one task) where the runs hold one task or none. YOLO26's cells alone (`yolo26_only`)
    unless `families` (the migration answers, which pair the families)."""
    if not families:
        indexes = yolo26_only(indexes)
    tasks = tasks_of(indexes)
    if len(tasks) <= 1:
        return [(tasks[0] if tasks else None, indexes)]
    return [(t, [idx.of_task(t) for idx in indexes]) for t in tasks]


def tagged(outcome: Outcome, task: str | None, several: bool) -> Outcome:
    """`outcome` saying its task: in decision.json's entry always, in the answer's title where the runs hold
    `several` tasks (one task: the page looks as it did)."""
    answer = outcome.answer
    if several and task:
        answer = replace(answer, task=task, title=f"{answer.title} · {task}")
    elif task:
        answer = replace(answer, task=task)
    entry = outcome.entry
    if entry is not None:
        entry = {**entry, "task": task}
        if several and task and entry.get("title"):
            entry["title"] = f"{entry['title']} · {task}"
    return Outcome(answer, entry)
