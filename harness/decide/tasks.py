"""The task is part of what a user ships: every use case is answered per task the rendered runs hold (detect
first), on indexes of that task alone (harness.decide.index.RunIndex.of_task), so candidates of one task never
compete with another's. The e2e and raw heads of one task do compete (the same outputs after NMS); a pick says which
head where the task has both. A run of one task is decided as it always was; its answers and entries say the task.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from harness.core.axes import TASKS
from harness.decide.index import RunIndex, order_key
from harness.decide.registry import Outcome

log = logging.getLogger(__name__)


def tasks_of(indexes: list[RunIndex]) -> tuple[str, ...]:
    """Every task of the rendered runs' cells, in the axis' order."""
    found = {t for idx in indexes for t in idx.tasks()}
    return tuple(sorted(found, key=lambda t: order_key(t, TASKS)))


def split(indexes: list[RunIndex]) -> list[tuple[str | None, list[RunIndex]]]:
    """(task, the indexes of that task) for each task; one group of every index as it is (task None when the runs
    hold no cell, else the one task) where the runs hold one task or none."""
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
