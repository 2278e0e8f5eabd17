"""Energy per inference: the `energy` tracker, the one place that fills the record's `energy` section.

For a cuda cell: the delta of NVML's total-energy counter (nvmlDeviceGetTotalEnergyConsumption, mJ, whole GPU,
Volta and newer) over exactly the timed rounds: summed over the runner's blocks of rounds (`resume` .. `pause`;
other runners' blocks between them are not counted), divided by rounds x batch.
The counter is the whole GPU's, and a yolo26n call on an H100 draws little beside the idle power, so `start` (right
before the workload loads) also reads the idle power (median of NVML's power readings over IDLE_S seconds), and
the section has both figures: `per_inference_j` (gross) and `net_per_inference_j` (gross less idle power x window,
per inference), with `idle_power_w`.
Fills `energy` = core.record.Energy {per_inference_j, window_s, inferences, source, net_per_inference_j,
idle_power_w}, or that section with every figure None and the reason under `null_reasons["energy.<figure>"]`.

For every other cell the factory returns `EnergyNotMeasured`, which fills the section with the reason (no energy
counter is read for CPUs or non-NVIDIA GPUs), so the attempt never words that reason itself.
"""

from __future__ import annotations

import logging
from typing import Any

from harness.core.record import CellRecord, Energy, set_null
from harness.measure.base import Tracker, register_tracker
from harness.measure.nvml import EnergyMeter, NvmlUnavailable, idle_power_w, nvml_for_tracker

log = logging.getLogger(__name__)

#: seconds of NVML power readings before each workload for its idle power
IDLE_S = 2.0
FIGURES = ("per_inference_j", "window_s", "inferences", "net_per_inference_j", "idle_power_w")

SOURCE = (
    "NVML total-energy counter (nvmlDeviceGetTotalEnergyConsumption) over the timed rounds; whole GPU, so "
    "other processes on it count too"
)


def not_measured_reason(device: str) -> str:
    """Why a cell on `device` has no energy figure."""
    if device == "cpu":
        return (
            "not measured: CPU cell; no energy counter is read for CPUs "
            "(the harness reads only NVML's counter, on NVIDIA GPUs)"
        )
    return (
        f"not measured: {device} cell; the harness reads only NVML's energy counter, which covers NVIDIA (cuda) "
        "devices"
    )


def put_null(rec: CellRecord, reason: str) -> None:
    """The energy section with every figure null, each with `reason`."""
    rec.energy = Energy()
    for key in FIGURES:
        set_null(rec, f"energy.{key}", reason)


class EnergyNotMeasured(Tracker):
    """The energy section of a cell whose device has no counter the harness reads: null with the reason."""

    field = "energy"

    def __init__(self, device: str) -> None:
        self.reason = not_measured_reason(device)

    def fill(self, rec: CellRecord) -> None:
        put_null(rec, self.reason)


class EnergyTracker(Tracker):
    """GPU energy over the timed rounds. `nvml` and `handle` replace the real lookup in tests; `min_window_s` is
    the window below which the figure carries a note (the counter advances in coarse steps); `idle_s` the seconds
    of power readings for the idle power in `start`."""

    field = "energy"

    def __init__(
        self,
        batch: int = 1,
        nvml: Any = None,
        handle: Any = None,
        min_window_s: float = 1.0,
        idle_s: float = IDLE_S,
    ) -> None:
        self.batch = batch
        self.min_window_s = min_window_s
        self.idle_s = idle_s
        self.idle_w: float | None = None
        self.idle_reason: str | None = "the idle power was not read (the tracker did not start)"
        self.nvml, self.handle, self.reason = nvml_for_tracker(nvml, handle)
        self.meter: EnergyMeter | None = None
        self.joules = 0.0
        self.window = 0.0
        self.timed = False  # start_timed was called
        self.rounds: int | None = None
        self.per_inference_j: float | None = None

    @classmethod
    def for_cell(cls, cell) -> Tracker:
        if cell.device != "cuda":
            return EnergyNotMeasured(cell.device)
        return cls(batch=cell.batch)

    def start(self) -> None:
        """Right before the workload loads: the GPU's idle power, for the net figure."""
        if self.handle is None or self.reason:
            self.idle_reason = self.reason or "no NVML device"
            return
        try:
            self.idle_w = idle_power_w(self.handle, self.nvml, self.idle_s)
            self.idle_reason = None
        except NvmlUnavailable as e:
            self.idle_w, self.idle_reason = None, str(e)

    def start_timed(self) -> None:
        self.meter = None
        self.rounds = None
        self.joules = 0.0
        self.window = 0.0
        self.timed = True

    def resume(self) -> None:
        """Each block of this runner's timed rounds is metered on its own; the blocks of other runners between
        them are not counted."""
        if self.handle is None or self.reason:
            return
        try:
            self.meter = EnergyMeter(self.handle, self.nvml, self.min_window_s).start()
        except NvmlUnavailable as e:
            self.reason = str(e)
            self.meter = None

    def pause(self) -> None:
        if self.meter is None or self.meter.stop_mj is not None:
            return
        try:
            self.joules += self.meter.stop() / 1000.0
            self.window += self.meter.window_s or 0.0
        except NvmlUnavailable as e:
            self.reason = str(e)

    def stop(self, rounds: int) -> None:
        self.rounds = rounds
        if self.meter is None or rounds <= 0 or self.reason:
            return
        self.pause()
        self.per_inference_j = self.joules / (rounds * self.batch)

    def _null_reason(self) -> str:
        if self.reason:
            return self.reason
        if not self.timed:
            return "no timed rounds ran"
        if self.rounds is None:
            return "the timed rounds did not finish"
        if self.rounds <= 0:
            return "no timed round completed"
        if self.meter is None:
            return "no block of timed rounds was metered"
        return "the energy counter gave no reading"

    def fill(self, rec: CellRecord) -> None:
        if self.per_inference_j is None:
            put_null(rec, self._null_reason())
            return
        note = None
        if self.window < self.min_window_s:
            note = (
                f"energy window {self.window:.2f} s (the sum of this runner's blocks) is shorter than "
                f"{self.min_window_s:.1f} s: the NVML counter advances in coarse steps, so the figure is imprecise"
            )
        inferences = (self.rounds or 0) * self.batch  # a figure per inference means rounds were timed
        net = None
        if self.idle_w is not None:
            net = (self.joules - self.idle_w * self.window) / inferences
        rec.energy = Energy(
            per_inference_j=self.per_inference_j,
            window_s=self.window,
            inferences=inferences,
            source=SOURCE
            + (
                f"; net: less the idle power ({self.idle_w:.1f} W, median of NVML power readings over "
                f"{self.idle_s:.0f} s before load) x the window"
                if self.idle_w is not None
                else ""
            )
            + (f"; {note}" if note else ""),
            net_per_inference_j=net,
            idle_power_w=self.idle_w,
        )
        if self.idle_w is None:
            for key in ("net_per_inference_j", "idle_power_w"):
                set_null(rec, f"energy.{key}", self.idle_reason or "the idle power was not read")


register_tracker("energy", order=30)(EnergyTracker.for_cell)
