"""The trackers of a cell: every tracker module of harness/measure/ registers itself (`register_tracker` at its end),
and this module finds them, so adding a quantity adds no line here.

A module is a tracker module when its source calls `register_tracker(`; only those are imported (the other measure
modules, parity or the canary, stay unimported in processes that only measure), in file-name order, and the trackers
run in their registered `order` (host memory first).
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path

from harness.measure.base import TRACKER_ORDER, TRACKERS, Tracker

log = logging.getLogger(__name__)

_HERE = Path(__file__).resolve().parent
_NOT_TRACKERS = {"base", "trackers"}
_discovered = False


def tracker_modules() -> list[str]:
    """The modules of harness/measure/ that register a tracker, by file name."""
    return [
        f"harness.measure.{p.stem}"
        for p in sorted(_HERE.glob("*.py"))
        if p.stem not in _NOT_TRACKERS and not p.stem.startswith("_") and "register_tracker(" in p.read_text()
    ]


def discover() -> None:
    """Import every tracker module once (each registers its tracker as it is imported)."""
    global _discovered
    if not _discovered:
        for name in tracker_modules():
            importlib.import_module(name)
        _discovered = True


def trackers_for(cell, skip: tuple[str, ...] = ()) -> list[Tracker]:
    """The trackers that apply to `cell`, in their registered order (host memory first), except those in `skip`."""
    discover()
    out = []
    for name in sorted(TRACKERS, key=lambda n: TRACKER_ORDER[n]):
        if name in skip:
            continue
        try:
            t = TRACKERS[name](cell)
        except Exception:  # a tracker that cannot start must not stop the cell
            log.exception("tracker %s could not be created for %s", name, cell.id)
            continue
        if t is not None:
            out.append(t)
    return out
