"""The first stage of an attempt: is the cell runnable here (skip reasons), and which weights does it use."""

from __future__ import annotations

from harness import backends
from harness.core.cell import Cell
from harness.execute.services import Checkpoints
from harness.execute.state import AttemptState


def unrunnable(cell: Cell) -> str | None:
    """Why `cell` cannot run here (unknown backend, device, precision, missing runtime), or None."""
    try:
        backend = backends.get(cell.backend)
    except KeyError as e:
        return str(e)
    return backend.unsupported(cell) or backend.probe(cell.device)


def plan(s: AttemptState, checkpoints: Checkpoints, threads: int) -> bool:
    """Skip the attempt with its reason, or take up its backend and its model's checkpoint."""
    cell, rec = s.cell, s.rec
    reason = s.attempt.skip_reason or unrunnable(cell)
    if reason:
        rec.status, rec.reason = "skipped", reason
        return False
    s.backend = backends.get(cell.backend)
    s.mat = checkpoints.materialize(cell)
    rec.weights = s.mat.weights
    rec.threads_requested = threads
    return True
