"""The first stage of an attempt: is the cell runnable here (skip reasons), and which weights does it use."""

from __future__ import annotations

from harness import backends
from harness.backends._shared.fake_cuda import FAKE_OPTION
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


def fake_cuda(cell: Cell, target: str | None) -> bool:
    """Whether `cell` is traced on a fake CUDA device instead of skipped: asked for (`target`), and the backend
    can trace it here (a CUDA cell, no CUDA device: harness.backends.base.Backend.fake_cuda_reason)."""
    if target is None or cell.backend not in backends.names():
        return False
    backend = backends.get(cell.backend)
    return backend.unsupported(cell) is None and backend.fake_cuda_reason(cell) is None


def plan(s: AttemptState, checkpoints: Checkpoints, threads: int, fake_target: str | None = None) -> bool:
    """Skip the attempt with its reason, or take up its backend and its model's checkpoint. A CUDA cell with no
    device here is traced on a fake one when `fake_target` names a target (its export options then ask for it)."""
    cell, rec = s.cell, s.rec
    reason = s.attempt.skip_reason or unrunnable(cell)
    if reason and not s.attempt.skip_reason and fake_cuda(cell, fake_target):
        s.attempt.export_options = {**s.attempt.export_options, FAKE_OPTION: fake_target}
        reason = None
    if reason:
        rec.status, rec.reason = "skipped", reason
        return False
    s.backend = backends.get(cell.backend)
    s.mat = checkpoints.materialize(cell)
    rec.weights = s.mat.weights
    rec.threads_requested = threads
    return True
