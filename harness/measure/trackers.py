"""The built-in trackers, registered in the order they start (and fill), and the trackers of a cell.

Importing this module registers them; `trackers_for` lives here so that it cannot run before they are.
"""

from __future__ import annotations

import logging

from harness.measure.base import TRACKERS, Tracker, register_tracker
from harness.measure.cuda_timing import CudaEventTracker
from harness.measure.energy import EnergyTracker
from harness.measure.gpu_memory import GpuMemoryTracker
from harness.measure.host_memory import HostMemoryTracker

log = logging.getLogger(__name__)

register_tracker("host_memory")(HostMemoryTracker.for_cell)
register_tracker("gpu_memory")(GpuMemoryTracker.for_cell)
register_tracker("energy")(EnergyTracker.for_cell)
register_tracker("cuda_events")(CudaEventTracker.for_cell)


def trackers_for(cell, skip: tuple[str, ...] = ()) -> list[Tracker]:
    """The trackers that apply to `cell`, in registration order (host memory first), except those in `skip`."""
    out = []
    for name, factory in TRACKERS.items():
        if name in skip:
            continue
        try:
            t = factory(cell)
        except Exception:  # a tracker that cannot start must not stop the cell
            log.exception("tracker %s could not be created for %s", name, cell.id)
            continue
        if t is not None:
            out.append(t)
    return out
