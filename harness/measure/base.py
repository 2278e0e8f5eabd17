"""The tracker interface: one tracker per measured quantity, each filling its own record section.

A cell's attempt builds its trackers (harness.measure.trackers.trackers_for), starts them right before the runtime
loads, marks the start of the timed rounds, resumes and pauses them around each block of its timed rounds (the
blocks of a workload's runners alternate, harness.measure.interleave), stops them after the last timed round and
lets each fill the record, or say why it could not (`set_null` with the reason). Adding a measurement is one
tracker module that ends with its `register_tracker(name, order=...)` call (harness.measure.trackers finds it), its
record field in `harness.core.record`, and the report section that shows it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from harness.core.record import CellRecord


class Tracker:
    """One measured quantity over one attempt. Every hook is optional; the defaults do nothing."""

    #: the record field (or dotted section field) this tracker fills
    field: ClassVar[str] = ""
    #: a quantity of one runtime alone (memory): when a workload's runners are timed together, the tracker stops
    #: after its runner's warm-up, before the next runner loads (harness.execute.workload)
    solo_only: ClassVar[bool] = False

    def measured_apart(self) -> None:
        """Called before start when the cell's memory was measured in the probe's fresh process
        (harness.execute.loading): a memory tracker then leaves its figures to that measurement."""

    def start(self) -> None:
        """Right before the runtime loads the artifact (baselines are taken here)."""

    def start_timed(self) -> None:
        """Right before the first timed round (quantities that cover the timed rounds only start here)."""

    def resume(self) -> None:
        """Right before each block of this runner's timed rounds (interleaved timing runs other runners between
        its blocks: a quantity over the timed rounds counts the blocks only)."""

    def pause(self) -> None:
        """Right after each block of this runner's timed rounds."""

    def wrap(self, call: Callable[[], None]) -> Callable[[], None]:
        """The timed call, possibly instrumented (CUDA events). Default: unchanged."""
        return call

    def stop(self, rounds: int) -> None:
        """Right after the last timed round (`rounds` were timed; 0 when timing did not run)."""

    def fill(self, rec: CellRecord) -> None:
        """Write this tracker's figures into the record, or a null reason for each it could not measure."""


# name -> factory(cell) returning a Tracker, or None when the quantity does not apply to the cell
TrackerFactory = Callable[[object], "Tracker | None"]
TRACKERS: dict[str, TrackerFactory] = {}
#: name -> the tracker's place in the start (and fill) order, lowest first
TRACKER_ORDER: dict[str, int] = {}


def register_tracker(name: str, order: int = 100) -> Callable[[TrackerFactory], TrackerFactory]:
    """Register a tracker factory under `name`, started (and filled) in `order` among the others. A tracker module
    of harness/measure/ registers itself at import; harness.measure.trackers finds it by that call."""

    def deco(factory: TrackerFactory) -> TrackerFactory:
        if name in TRACKERS:
            raise ValueError(f"tracker {name!r} registered twice")
        TRACKERS[name] = factory
        TRACKER_ORDER[name] = order
        return factory

    return deco
