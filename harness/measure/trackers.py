"""The built-in trackers, registered in the order they start (and fill). Importing this module registers them."""

from __future__ import annotations

from harness.measure.base import register_tracker
from harness.measure.cuda_timing import CudaEventTracker
from harness.measure.energy import EnergyTracker
from harness.measure.gpu_memory import GpuMemoryTracker
from harness.measure.host_memory import HostMemoryTracker

register_tracker("host_memory")(HostMemoryTracker.for_cell)
register_tracker("gpu_memory")(GpuMemoryTracker.for_cell)
register_tracker("energy")(EnergyTracker.for_cell)
register_tracker("cuda_events")(CudaEventTracker.for_cell)
