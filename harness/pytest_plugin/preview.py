"""What `pytest suites/ --collect-only` says about each cell: whether it would run here, or its skip reason.

A collect-only run does no work (no export, no load), so the reason is what the plan and the backend can tell
without it: an exclusion of the matrix, `Backend.unsupported` (precision, device, dynamic shape) and
`Backend.probe` (the runtime and the device are there). A first GPU run is rehearsed with it on a machine
without a GPU: every cuda cell must come out a skip with its reason, never a cell that would run.
"""

from __future__ import annotations

from collections.abc import Iterable

from harness import backends
from harness.execute.planning import fake_cuda
from harness.plan.matrix import PlannedCell


def skip_reason(
    planned: PlannedCell, probes: dict[tuple[str, str], str | None], fake_target: str | None = None
) -> str | None:
    """Why `planned` would be skipped here, or None when it would run (a CUDA cell traced on a fake device with
    --fake-cuda runs its export here). `probes` caches probe results."""
    if planned.excluded:
        return planned.excluded
    cell = planned.cell
    try:
        backend = backends.get(cell.backend)
    except KeyError as e:
        return f"no backend {cell.backend!r} ({e})"
    reason = backend.unsupported(cell)
    if reason:
        return reason
    key = (cell.backend, cell.device)
    if key not in probes:
        try:
            probes[key] = backend.probe(cell.device)
        except Exception as e:  # a probe that raises is a reason, not a crash of the collection
            probes[key] = f"{cell.backend} probe failed: {type(e).__name__}: {e}"
    if probes[key] and fake_cuda(cell, fake_target):
        return None
    return probes[key]


def preview_lines(
    planned: Iterable[PlannedCell], known: dict[str, str | None] | None = None, fake_target: str | None = None
) -> list[str]:
    """One line per cell: `<cell id>: skip: <reason>`, `<cell id>: runs here`, or `<cell id>: export traced on a
    fake CUDA device here` (--fake-cuda). `known`: reasons already found (cell id -> reason or None; the
    --time-budget plan found every cell's), not asked again."""
    probes: dict[tuple[str, str], str | None] = {}
    known = known or {}
    out = []
    for p in planned:
        why = known[p.cell.id] if p.cell.id in known else skip_reason(p, probes, fake_target)
        if why is None and fake_cuda(p.cell, fake_target):
            out.append(f"{p.cell.id}: export traced on a fake CUDA device here (--fake-cuda)")
            continue
        out.append(f"{p.cell.id}: skip: {why}" if why else f"{p.cell.id}: runs here")
    return out
