"""Device memory of a cuda cell in the benchmark process: the `gpu_memory` tracker (NVML peaks, torch allocator peaks,
a GPU snapshot).

By default a cell's memory is measured in the probe's fresh process (harness.measure.gpu_memory_fresh, with the
host memory): the attempt then calls `measured_apart()` and this tracker reads only the GPU snapshot. With memory
rounds at 0 (memory measured in the benchmark process) it fills, in the `memory` section (core.record.Memory, MiB):

- `device_peak_used_mib`: NVML's device-wide used memory, peak over the baseline read at start (right before
  load). Device-wide: other processes on the GPU count too.
- `device_peak_process_mib`: this process's memory in NVML's running-process lists, peak over the baseline.
  Both are sampled at 200 Hz in a thread (harness.measure.host_memory.Sampler with the nvml_probes) from start to
  stop. In a workload (harness.execute.workload) the tracker is `solo_only`: it stops after its runner's warm-up,
  before the next runner loads, so the figures cover load, first run and warm-up, not the timed rounds (those run
  interleaved with the workload's other runners in this one process, where NVML's process figure and torch's
  allocator peaks would mix the runtimes). Warm-up runs the same calls as the timed rounds, so the peak of a
  steady-state call is in it. `memory.source` says which window a record's figures cover.
- `torch_max_allocated_mib`, `torch_max_reserved_mib`: torch's caching allocator, max since the reset at start
  (absolute, not over a baseline; zero-ish for runtimes that do not allocate through torch).
- `source`: a sentence appended to what the host tracker wrote.

In the benchmark process the runners of a timing group share one caching allocator, so a later runner's baseline
holds the earlier runners' memory while torch's peaks are absolute: the process figure can come out below torch's
reserved memory (docs/gpu.md, the H100 records). Such a record gets null with the reason for the process figure
(harness.core.memory_order.enforce_memory_order), and `device_context_mib`, `device_outside_torch_mib` are null
(only a fresh process gives them).

and the top-level `gpu_snapshot` (nvml.gpu_snapshot: clocks, temperature, power, clock-event reasons), read at stop
(after warm-up in a workload: the state the timed rounds start in). Every figure it cannot read is None with
the reason in `null_reasons` (`memory.device_peak_used_mib`, ..., `gpu_snapshot`).

The NVML handle is resolved (and CUDA's runtime initialised) when the tracker is created, before any tracker's
start. That creates no CUDA context: the first runner of a process has none at start, and its figures hold the
context (610 MiB on an H200, docs/gpu.md); the fresh-process measurement creates it first and reports it apart.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from harness.core.memory_order import enforce_memory_order
from harness.core.record import MIB, CellRecord, Memory, set_null
from harness.measure.base import Tracker, register_tracker
from harness.measure.cuda_timing import torch_cuda_reason
from harness.measure.host_memory import Sampler
from harness.measure.nvml import (
    NvmlUnavailable,
    gpu_snapshot,
    nvml_for_tracker,
    nvml_probes,
)

log = logging.getLogger(__name__)

NVML_FIELDS = (("device_used", "device_peak_used_mib"), ("device_process", "device_peak_process_mib"))
TORCH_FIELDS = ("torch_max_allocated_mib", "torch_max_reserved_mib")
#: figures only the probe's fresh process gives (harness.measure.gpu_memory_fresh)
APART_FIELDS = ("device_context_mib", "device_outside_torch_mib")
IN_PROCESS_REASON = (
    "measured only in the probe's fresh process (memory rounds 0: memory measured in the benchmark process, where "
    "the CUDA context and the libraries are shared by every runner)"
)
SAMPLE_HZ = 200.0


class GpuMemoryTracker(Tracker):
    """NVML device/process memory peaks over the pre-load baseline, torch allocator peaks and a GPU snapshot.

    `nvml` and `handle` (a module or fake namespace and one of its device handles) replace the real lookup;
    `cuda` (torch.cuda or a stand-in with reset_peak_memory_stats/max_memory_allocated/max_memory_reserved)
    replaces torch's allocator; tests pass fakes for what a CPU machine cannot have.
    """

    field = "memory"
    solo_only = True  # one runtime's memory: stops before the next runner of a workload loads

    def __init__(
        self,
        nvml: Any = None,
        handle: Any = None,
        cuda: Any = None,
        pid: int | None = None,
        hz: float = SAMPLE_HZ,
    ) -> None:
        self.pid = pid or os.getpid()
        self.hz = hz
        self.nvml, self.handle, self.reason = nvml_for_tracker(nvml, handle)
        self.torch_reason: str | None = None
        if cuda is None:
            cuda, self.torch_reason = torch_cuda_reason()
        self.cuda = cuda
        self.sampler: Sampler | None = None
        self.torch_peaks: tuple[float, float] | None = None
        self.snapshot: dict | None = None
        self.snapshot_reason: str | None = None
        self.stopped = False
        self.rounds = 0  # timed rounds inside the window (0: stopped before them)
        self.apart = False  # the memory figures come from the probe's fresh process: only the snapshot here

    def measured_apart(self) -> None:
        self.apart = True

    @classmethod
    def for_cell(cls, cell) -> GpuMemoryTracker | None:
        return cls() if cell.device == "cuda" else None

    def start(self) -> None:
        if self.apart:
            return
        if self.cuda is not None:
            try:
                self.cuda.reset_peak_memory_stats()
            except Exception as e:
                self.torch_reason = f"torch allocator statistics unavailable: {type(e).__name__}: {e}"
        if self.handle is not None:
            try:
                probes = nvml_probes(self.handle, self.pid, self.nvml)
            except NvmlUnavailable as e:
                self.reason = str(e)
            else:
                self.sampler = Sampler(probes, hz=self.hz).start()

    def stop(self, rounds: int) -> None:
        if self.stopped:
            return
        self.stopped = True
        self.rounds = rounds
        if self.sampler is not None:
            self.sampler.stop()
        if self.cuda is not None and self.torch_reason is None and not self.apart:
            try:
                self.torch_peaks = (
                    float(self.cuda.max_memory_allocated()),
                    float(self.cuda.max_memory_reserved()),
                )
            except Exception as e:
                self.torch_reason = f"torch allocator statistics unavailable: {type(e).__name__}: {e}"
        if self.handle is not None:
            try:
                self.snapshot = gpu_snapshot(self.handle, self.nvml)
            except Exception as e:
                self.snapshot_reason = f"GPU snapshot failed: {type(e).__name__}: {e}"

    def _nvml_figure(self, probe_name: str) -> tuple[float | None, str | None]:
        """(peak over baseline in MiB, None) or (None, reason) for one NVML probe."""
        if self.sampler is None:
            return None, self.reason or "NVML memory was not sampled (the tracker did not start)"
        p = self.sampler.get(probe_name)
        if p is None:
            return None, f"no NVML probe {probe_name}"
        if p.error:
            return None, f"NVML read failed: {p.error}"
        if p.peak is None or p.baseline is None:
            if probe_name == "device_process":
                return None, "the driver does not report per-process memory (usedGpuMemory unavailable)"
            return None, "NVML returned no value"
        if probe_name == "device_process" and p.peak == 0:
            # any CUDA context takes hundreds of MiB: a process never listed is a PID that NVML does not know
            return None, (
                f"NVML never listed this process (pid {self.pid}) on the GPU: NVML reports host PIDs, so in a "
                "container with its own PID namespace the process is not found (docs/gpu.md)"
            )
        return max(0.0, p.peak - p.baseline) / MIB, None

    def fill(self, rec: CellRecord) -> None:
        if not self.stopped:  # the attempt failed before stop(): stop sampling, keep what was seen
            self.stop(0)
        if not self.apart:
            self._fill_memory(rec)
        rec.gpu_snapshot = self.snapshot
        if self.snapshot is None:
            set_null(
                rec,
                "gpu_snapshot",
                self.snapshot_reason or self.reason or "not read: the timed rounds did not finish",
            )

    def _fill_memory(self, rec: CellRecord) -> None:
        mem = rec.memory or Memory()
        for probe_name, key in NVML_FIELDS:
            value, why = self._nvml_figure(probe_name)
            setattr(mem, key, value)
            if why is not None:
                set_null(rec, f"memory.{key}", why)
        if self.torch_peaks is not None:
            mem.torch_max_allocated_mib = self.torch_peaks[0] / MIB
            mem.torch_max_reserved_mib = self.torch_peaks[1] / MIB
        else:
            for key in TORCH_FIELDS:
                setattr(mem, key, None)
                set_null(rec, f"memory.{key}", self.torch_reason or "torch allocator statistics not read")
        how = []
        window = (
            f"from before load to the end of {self.rounds} timed rounds"
            if self.rounds
            else "from before load to the end of warm-up (load, first run, warm-up; the timed rounds are not in it)"
        )
        if self.sampler is not None:
            how.append(
                f"NVML device-wide and this process's memory sampled at {self.sampler.hz:.0f} Hz "
                f"({self.sampler.samples} samples), peaks over the baseline before load, {window}"
            )
        if self.torch_peaks is not None:
            how.append(f"torch allocator max allocated/reserved since the reset before load, {window}")
        if how:
            mem.source = "; ".join([mem.source, *how] if mem.source else how)
        for key in APART_FIELDS:
            setattr(mem, key, None)
            set_null(rec, f"memory.{key}", IN_PROCESS_REASON)
        rec.memory = mem
        enforce_memory_order(rec)


register_tracker("gpu_memory", order=20)(GpuMemoryTracker.for_cell)
