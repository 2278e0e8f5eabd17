"""The remedy ladder: one walk that serves plain cells, dynamic-shape exports and the padded sweep shapes.

After a failed attempt, the first remedy of `remedies.yaml` that matches the failure (and is not applied yet) is
added to the chain, cumulatively, and the cell is tried again as a remedy attempt with a record of its own; the walk
ends when an attempt is done (what "done" means is the caller's: a plain cell that runs ok, a dynamic export that
exports), when no remedy matches, or after `max_chain` remedies.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.record import CellRecord
from harness.execute.remedies import Remedy, combined_change, matching, padded
from harness.execute.state import Attempt

log = logging.getLogger(__name__)

MAX_REMEDY_CHAIN = 3
#: failure classes no remedy is tried on: the harness broke the cell, so a workaround that then "works" would be
#: a false compatibility finding about the model or the runtime
HARNESS_CLASSES = frozenset({"harness_error"})


def harness_caused(failed: CellRecord) -> bool:
    """True when the failure of record `failed` was the harness's own (its class, or a crash in the harness)."""
    f = failed.failure or {}
    return f.get("class") in HARNESS_CLASSES or f.get("stage") == "harness"


# Tries one remedy attempt; returns its records (the attempt's own first) and whether the walk is done.
TryAttempt = Callable[[Attempt], tuple[list[CellRecord], bool]]


def remedy_attempt(cell: Cell, remedies: list[Remedy], remedy_of: str) -> Attempt:
    """The attempt that applies `remedies` (cumulatively) to `cell`, labelled as a remedy of `remedy_of`."""
    change = combined_change(remedies)
    target = cell
    if "head" in change:
        target = target.with_(head=change["head"])
    if "pad_to" in change:
        m = change["pad_to"]
        target = target.with_(
            shape=Shape(padded(cell.shape.height, m), padded(cell.shape.width, m), cell.shape.dynamic)
        )
    name = "+".join(r.name for r in remedies)
    return Attempt(
        target,
        f"{remedy_of}+{name}",
        remedy=name,
        remedy_of=remedy_of,
        export_options=dict(change["export_options"]),
        load_options=dict(change["load_options"]),
    )


def next_remedy(
    cell: Cell,
    applied: list[Remedy],
    failed: CellRecord,
    dynamic: bool,
    select: Callable[[Remedy], bool] = lambda r: True,
) -> Remedy | None:
    """The first remedy of the ladder that matches this failure, passes `select` and is not applied yet; None
    for a failure the harness caused (`harness_caused`)."""
    if harness_caused(failed):
        return None
    f = failed.failure or {}
    target = remedy_attempt(cell, applied, "").cell if applied else cell
    names = {r.name for r in applied}
    message = f.get("message") or failed.reason
    for r in matching(target, f.get("class"), dynamic, message):
        if r.name not in names and select(r):
            return r
    return None


def climb(
    cell: Cell,
    failed: CellRecord,
    try_attempt: TryAttempt,
    *,
    dynamic: bool = False,
    select: Callable[[Remedy], bool] = lambda r: True,
    max_chain: int = MAX_REMEDY_CHAIN,
) -> list[CellRecord]:
    """Walk the ladder from the failed record `failed`; every record of every remedy attempt, in order."""
    out: list[CellRecord] = []
    applied: list[Remedy] = []
    current = failed
    while len(applied) < max_chain:
        remedy = next_remedy(cell, applied, current, dynamic, select)
        if remedy is None:
            break
        applied.append(remedy)
        recs, done = try_attempt(remedy_attempt(cell, applied, failed.cell_id))
        out += recs
        if done:
            break
        current = recs[0]
    return out
