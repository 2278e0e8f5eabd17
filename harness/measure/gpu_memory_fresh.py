"""Device memory of a cuda cell measured in the probe's fresh process (harness.execute.worker), where nothing but this
cell has touched the device: `FreshGpuMemory`.

The benchmark process loads every runner of a timing group into one process with one caching allocator, so a
runner's device memory there depends on the runners loaded before it (docs/gpu.md has the H100 records that showed
it). Here the process holds this cell's runtime alone, and the figures are (MiB, in the `memory` section):

- `device_context_mib`: NVML's figure for this process right after a trivial CUDA op, before load, less torch's
  reserved memory at that moment: the CUDA context;
- `device_peak_process_mib`: NVML's figure for this process, peak over load, first run and the probe's runs
  (sampled at 200 Hz, plus a reading after the last run), less the context: everything this cell put on the device;
- `torch_max_allocated_mib`, `torch_max_reserved_mib`: torch's allocator peaks since the reset before load, which
  starts from nothing here, so they are this cell's alone;
- `device_outside_torch_mib`: NVML's figure after the last run less the context and torch's reserved memory then:
  kernel modules, library handles and workspaces loaded on first use (cuDNN, cuBLAS, Triton) and whatever a runtime
  allocates outside torch's allocator (TensorRT, ONNX Runtime's CUDA EP);
- `device_peak_used_mib` is null with the reason: it is device-wide, and the export phase runs other cells' probes
  on the same GPU at the same time.

So the process's device memory after the runs is context + torch's reserved + outside-torch, and its peak over the
context is at least torch's reserved: harness.core.memory_order's relation holds by construction, and a record
whose readings break it anyway gets null with the reason (`enforce_memory_order`), never the contradictory pair.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from harness.core.memory_order import MEMORY_ORDER_TOLERANCE_MIB, enforce_memory_order
from harness.core.record import MIB, CellRecord, Memory, set_null
from harness.measure.cuda_timing import torch_cuda_reason
from harness.measure.host_memory import PeakProbe, Sampler
from harness.measure.nvml import nvml_for_tracker, process_used_bytes

SAMPLE_HZ = 200.0
DEVICE_WIDE_REASON = (
    "not read in the probe's fresh process: NVML's device-wide figure counts every process on the GPU, and the "
    "export phase runs other cells' probes there at the same time; device_peak_process_mib is this cell's"
)
NO_CONTEXT = "the CUDA context was not read before load"


def touch_device() -> None:
    """A trivial CUDA op on torch's current device, waited for: the context exists after it."""
    import torch

    torch.ones(1, device=torch.device("cuda", torch.cuda.current_device())).add_(1)
    torch.cuda.synchronize()


class FreshGpuMemory:
    """The device memory of one cell in a process of its own (see the module docstring): start() before load,
    stop() after the last run, fill(rec) into the record's `memory` section.

    `nvml`, `handle`, `cuda` (torch.cuda or a stand-in with reset_peak_memory_stats, max_memory_allocated,
    max_memory_reserved, memory_reserved and synchronize) and `touch` (the trivial CUDA op) replace the real ones
    in tests.
    """

    def __init__(
        self,
        nvml: Any = None,
        handle: Any = None,
        cuda: Any = None,
        touch: Callable[[], None] | None = None,
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
        self.touch = touch or touch_device
        self.context: float | None = None  # bytes
        self.context_reason: str | None = None
        self.sampler: Sampler | None = None
        self.end: float | None = None  # the process's bytes after the last run
        self.torch: tuple[float, float, float] | None = (
            None  # max allocated, max reserved, reserved at the end
        )
        self.rounds = 0
        self.stopped = False

    @classmethod
    def for_cell(cls, cell) -> FreshGpuMemory | None:
        return cls() if cell.device == "cuda" else None

    def _process(self) -> float | None:
        return process_used_bytes(self.handle, self.pid, self.nvml)

    def start(self) -> None:
        """Create the context (a trivial op), read it, reset torch's peaks and start sampling: right before load."""
        reserved = 0.0
        if self.cuda is not None:
            try:
                self.touch()
                reserved = float(self.cuda.memory_reserved())
                self.cuda.reset_peak_memory_stats()
            except Exception as e:
                self.torch_reason = f"torch allocator statistics unavailable: {type(e).__name__}: {e}"
        if self.handle is None:
            self.context_reason = self.reason
            return
        try:
            used = self._process()
        except Exception as e:
            self.context_reason = self.reason = f"NVML read failed: {type(e).__name__}: {e}"
            return
        if used is None:
            self.context_reason = "the driver does not report per-process memory (usedGpuMemory unavailable)"
        elif used == 0:
            self.context_reason = (
                f"NVML never listed this process (pid {self.pid}) on the GPU: NVML reports host PIDs, so in a "
                "container with its own PID namespace the process is not found (docs/gpu.md)"
            )
        elif self.torch_reason is not None and self.cuda is not None:
            self.context_reason = f"torch's reserved memory before load unknown: {self.torch_reason}"
        else:
            self.context = used - reserved
        self.sampler = Sampler([PeakProbe("device_process", self._process)], hz=self.hz).start()

    def stop(self, rounds: int) -> None:
        """After the last run: wait for the device, read the process once more and torch's figures."""
        if self.stopped:
            return
        self.stopped, self.rounds = True, rounds
        if self.cuda is not None and self.torch_reason is None:
            try:
                self.cuda.synchronize()
                self.torch = (
                    float(self.cuda.max_memory_allocated()),
                    float(self.cuda.max_memory_reserved()),
                    float(self.cuda.memory_reserved()),
                )
            except Exception as e:
                self.torch_reason = f"torch allocator statistics unavailable: {type(e).__name__}: {e}"
        if self.sampler is not None:
            try:
                self.end = self._process()
            except Exception as e:
                self.reason = f"NVML read failed: {type(e).__name__}: {e}"
            self.sampler.stop()

    def _process_figures(self) -> tuple[float | None, float | None, str | None]:
        """(peak over the context, outside torch at the end, None) in MiB, or with Nones and the reason."""
        if self.context is None:
            return None, None, self.context_reason or NO_CONTEXT
        p = self.sampler.get("device_process") if self.sampler else None
        if p is None or p.error or p.peak is None or self.end is None:
            why = p.error if p is not None and p.error else self.reason or "no reading after the last run"
            return None, None, f"NVML read failed: {why}"
        peak = max(p.peak, self.end) - self.context
        if self.torch is None:
            return peak / MIB, None, None
        outside = (self.end - self.context - self.torch[2]) / MIB
        if outside < -MEMORY_ORDER_TOLERANCE_MIB:
            return peak / MIB, None, None  # the order check below names it
        return peak / MIB, max(0.0, outside), None

    def fill(self, rec: CellRecord) -> None:
        if not self.stopped:
            self.stop(0)  # the probe failed before stop(): stop sampling, keep what was seen
        mem = rec.memory or Memory()
        peak, outside, why = self._process_figures()
        mem.device_peak_process_mib, mem.device_outside_torch_mib = peak, outside
        mem.device_context_mib = self.context / MIB if self.context is not None else None
        if self.context is None:
            set_null(rec, "memory.device_context_mib", self.context_reason or NO_CONTEXT)
        if why is not None:
            set_null(rec, "memory.device_peak_process_mib", why)
        if outside is None:
            set_null(
                rec,
                "memory.device_outside_torch_mib",
                why
                or (
                    f"torch allocator statistics not read: {self.torch_reason}"
                    if self.torch is None
                    else "NVML's process figure after the runs is below the context plus torch's reserved memory"
                ),
            )
        mem.device_peak_used_mib = None
        set_null(rec, "memory.device_peak_used_mib", DEVICE_WIDE_REASON)
        if self.torch is not None:
            mem.torch_max_allocated_mib, mem.torch_max_reserved_mib = self.torch[0] / MIB, self.torch[1] / MIB
        else:
            mem.torch_max_allocated_mib = mem.torch_max_reserved_mib = None
            for key in ("torch_max_allocated_mib", "torch_max_reserved_mib"):
                set_null(rec, f"memory.{key}", self.torch_reason or "torch allocator statistics not read")
        window = f"load, first run and {self.rounds} runs in the probe's fresh process"
        how = []
        if self.sampler is not None:
            how.append(
                f"NVML's figure for this process sampled at {self.sampler.hz:.0f} Hz ({self.sampler.samples} "
                f"samples) and read after the last run, over {window}: context = before load after a trivial CUDA "
                "op less torch's reserved memory; process peak and outside-torch over the context"
            )
        if self.torch is not None:
            how.append(f"torch allocator max allocated/reserved since the reset before load, over {window}")
        if how:
            mem.source = "; ".join([mem.source, *how] if mem.source else how)
        rec.memory = mem
        enforce_memory_order(rec)
