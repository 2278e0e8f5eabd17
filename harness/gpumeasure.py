"""What a CUDA cell measures beyond host time and RSS: NVML device and process memory (peaks over the pre-cell
baseline), torch's allocator peaks, energy per inference, a GPU snapshot, and CUDA-event device time per round.

Used by the runner for cells whose device is "cuda" only; every figure it cannot read is null with the reason.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from harness.memory import MB, PeakProbe, Sampler
from harness.records import Latency, set_null

log = logging.getLogger(__name__)

TORCH_STREAM_SCOPE = (
    "CUDA events: start .. end of the last kernel enqueued on torch's stream (host wait excluded)"
)
SYNCED_SCOPE = (
    "CUDA events: start .. after the runtime's synchronize returned (the runtime uses its own stream)"
)


class DeviceMeasure:
    """Per-cell GPU measurement; construct before load, `wrap` the timed call, `fill` the record at the end."""

    def __init__(self, cell) -> None:
        self.cell = cell
        self.handle = None
        self.reason: str | None = None
        self.energy = None
        self.events: list[tuple] = []
        self.snapshot: dict | None = None
        self._torch = None
        try:
            import torch

            if torch.cuda.is_available():
                self._torch = torch
                torch.cuda.reset_peak_memory_stats()
        except ImportError:
            pass
        try:
            from harness.nvml import NvmlUnavailable, gpu_snapshot, nvml_handle_for_torch_device

            try:
                self.handle = nvml_handle_for_torch_device(0)
                self.snapshot = gpu_snapshot(self.handle)
            except NvmlUnavailable as e:
                self.reason = str(e)
        except ImportError as e:
            self.reason = f"NVML bindings unavailable: {e}"

    def probes(self) -> list[PeakProbe]:
        if self.handle is None:
            return []
        from harness.nvml import nvml_probes

        return nvml_probes(self.handle, os.getpid())

    def wrap(
        self, run: Callable[[], object], wait: Callable[[], None], torch_stream: bool
    ) -> Callable[[], None]:
        """The timed call with a CUDA event pair around each round (host time is still taken by the timer)."""
        torch = self._torch
        if torch is None:
            return lambda: (run(), wait())

        def call() -> None:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            run()
            if torch_stream:
                end.record()
                wait()
            else:
                wait()
                end.record()
            self.events.append((start, end))

        self.scope = TORCH_STREAM_SCOPE if torch_stream else SYNCED_SCOPE
        return call

    def start_timed(self) -> None:
        """Called right before the timed rounds: only their events and energy count."""
        self.events.clear()
        if self.handle is not None:
            from harness.nvml import EnergyMeter, NvmlUnavailable

            try:
                self.energy = EnergyMeter(self.handle).start()
            except NvmlUnavailable as e:
                self.energy = None
                self.energy_reason = str(e)

    def fill(self, rec: dict, sampler: Sampler, rounds: int) -> None:
        mem = rec["memory"]
        mem["source"] += "; NVML device/process memory as peaks over the pre-cell baseline"
        for name, field in (
            ("device_used", "device_peak_used_mb"),
            ("device_process", "device_peak_process_mb"),
        ):
            p = sampler.get(name)
            if p is not None and p.peak is not None and p.baseline is not None:
                mem[field] = (p.peak - p.baseline) / MB
            else:
                set_null(
                    rec,
                    f"memory.{field}",
                    (p.error if p is not None and p.error else self.reason) or "NVML probe returned no value",
                )
        if self._torch is not None:
            mem["torch_max_allocated_mb"] = self._torch.cuda.max_memory_allocated() / MB
            mem["torch_max_reserved_mb"] = self._torch.cuda.max_memory_reserved() / MB
        if self.energy is not None and rounds > 0:
            from harness.nvml import NvmlUnavailable

            try:
                self.energy.stop()
                mem["energy_per_inference_j"] = self.energy.per_inference_j(rounds * self.cell.batch)
                if self.energy.note:
                    mem["source"] += f"; {self.energy.note}"
            except NvmlUnavailable as e:
                set_null(rec, "memory.energy_per_inference_j", str(e))
        else:
            set_null(
                rec,
                "memory.energy_per_inference_j",
                getattr(self, "energy_reason", None) or self.reason or "no timed rounds",
            )
        if self.events and self._torch is not None:
            self._torch.cuda.synchronize()
            device_ms = [s.elapsed_time(e) for s, e in self.events]
            rec["device_latency_ms"] = Latency.from_samples(device_ms, self.scope).to_dict()
            rec["device_samples_ms"] = [round(d, 4) for d in device_ms]
        else:
            set_null(rec, "device_latency_ms", "no CUDA events recorded (torch CUDA unavailable)")
        rec["gpu_snapshot"] = self.snapshot
