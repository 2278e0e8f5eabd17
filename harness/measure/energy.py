"""Energy per inference: the `energy` tracker, the one place that fills the record's `energy` section.

For a cuda cell: the delta of NVML's total-energy counter (nvmlDeviceGetTotalEnergyConsumption, mJ, whole GPU,
Volta and newer) over exactly the timed rounds: summed over the runner's blocks of rounds (`resume` .. `pause`;
other runners' blocks between them are not counted), divided by rounds x batch. That gross figure
(`per_inference_j`) depends on nothing that ran before; a window under MIN_WINDOW_S says so in `source`.

The counter is the whole GPU's, and a yolo26n call on an H100 draws little beside the idle power, so the section
also has `net_per_inference_j`: gross less the run's one idle baseline x the window, per inference. The baseline
is read once per run, before the first cell, with the process's CUDA context held (the state every cell is timed
in), after the GPU has settled (`take_run_baseline`, harness.measure.nvml.settled_idle: power and SM clock read
until they stop falling, with a bound) and written to env.json under
`gpu_env.idle_baseline` with how it was read; every cell of the run subtracts the same figure. (An idle reading
before each cell made the net figure depend on the cell before: 70 W in some cells of the first H100 run,
116-133 W in others, up to 4x apart; a GPU idles far lower while no process holds a CUDA context, and takes
seconds to come down after work, docs/gpu-probes-2026-11-25.md.) `idle_power_w` is that baseline.
Fills `energy` = core.record.Energy {per_inference_j, window_s, inferences, source, net_per_inference_j,
idle_power_w}, or that section with every figure None and the reason under `null_reasons["energy.<figure>"]`.

For every other cell the factory returns `EnergyNotMeasured`, which fills the section with the reason (no energy
counter is read for CPUs or non-NVIDIA GPUs), so the attempt never words that reason itself.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from typing import Any

from harness.core.record import CellRecord, Energy, set_null
from harness.measure.base import Tracker, register_tracker
from harness.measure.nvml import EnergyMeter, NvmlUnavailable, nvml_for_tracker, settled_idle

log = logging.getLogger(__name__)

#: a window shorter than this (s) is noted in the figure's source: the counter advances in coarse steps
MIN_WINDOW_S = 1.0
#: the run's idle baseline, for the cells of this process and of the processes it starts (JSON of
#: `take_run_baseline`'s dict)
BASELINE_ENV = "YOLO26_BENCH_GPU_IDLE"
FIGURES = ("per_inference_j", "window_s", "inferences", "net_per_inference_j", "idle_power_w")

SOURCE = (
    "NVML total-energy counter (nvmlDeviceGetTotalEnergyConsumption) over the timed rounds; whole GPU, so "
    "other processes on it count too"
)


def hold_cuda_context() -> str:
    """Make sure this process holds a CUDA context on torch's current device (one tiny allocation), and say so.

    Every cell is timed with its process's context held, and a GPU holding one stays clocked up: an H200 drew
    118 W at 1980 MHz with a context and nothing running, 76 W at 345 MHz without one
    (docs/gpu-probes-2026-11-25.md). The baseline is read in the state the cells run in."""
    try:
        import torch

        if not torch.cuda.is_available():
            return "not held: torch sees no CUDA device"
        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()
        return (
            f"held: this process's CUDA context on cuda:{torch.cuda.current_device()}, as during every cell"
        )
    except Exception as e:  # the baseline is still read; it says it was read without a context
        return f"not held: {type(e).__name__}: {e}"


def take_run_baseline(
    nvml: Any = None, handle: Any = None, context: Callable[[], str] | None = hold_cuda_context, **settle: Any
) -> dict:
    """Read the run's idle baseline (nvml.settled_idle) with this process's CUDA context held (`context`, None:
    as the process is), and publish it to this process and its children.

    Called once per run, before the first cell (harness.measure.machine.facts, for env.json's
    `gpu_env.idle_baseline`). Never raises: without NVML or a power reading the dict has `power_w: None` and the
    reason, and the net figures of the run are null with it.
    """
    module, handle, reason = nvml_for_tracker(nvml, handle)
    if reason is None and handle is None:
        reason = "no NVML device"
    base: dict
    if reason is not None:
        base = {"power_w": None, "reason": reason}
    else:
        held = context() if context is not None else "as the process was (not made sure of)"
        try:
            base = settled_idle(handle, module, **settle)
            base["cuda_context"] = held
        except NvmlUnavailable as e:
            base = {"power_w": None, "reason": str(e)}
    os.environ[BASELINE_ENV] = json.dumps(base)
    return base


def run_baseline() -> dict | None:
    """The run's idle baseline published by take_run_baseline (None when none was taken in this run)."""
    text = os.environ.get(BASELINE_ENV)
    if not text:
        return None
    try:
        base = json.loads(text)
    except ValueError:
        return {"power_w": None, "reason": f"{BASELINE_ENV} is not JSON: {text[:60]!r}"}
    return base if isinstance(base, dict) else None


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
    the window below which the figure carries a note (the counter advances in coarse steps); `baseline` is the
    run's idle baseline (default: the one take_run_baseline published, `run_baseline()`); `clock` times the
    window (a fake clock in tests). `idle_s` is no longer read (no idle power is read per cell); it is accepted so
    that older callers keep working."""

    field = "energy"

    def __init__(
        self,
        batch: int = 1,
        nvml: Any = None,
        handle: Any = None,
        min_window_s: float = MIN_WINDOW_S,
        idle_s: float | None = None,
        baseline: dict | None = None,
        clock: Any = None,
    ) -> None:
        self.batch = batch
        self.min_window_s = min_window_s
        self.baseline = baseline if baseline is not None else run_baseline()
        self.clock = clock
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

    def idle(self) -> tuple[float | None, str | None]:
        """(the run's idle baseline in W, None), or (None, why there is none)."""
        if self.baseline is None:
            return None, (
                "no idle baseline was read in this run (it is read once per run before the first cell, "
                "harness.measure.energy.take_run_baseline)"
            )
        power = self.baseline.get("power_w")
        if power is None:
            return (
                None,
                f"the run's idle baseline was not read: {self.baseline.get('reason') or 'no reason given'}",
            )
        return float(power), None

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
            meter = EnergyMeter(self.handle, self.nvml, self.min_window_s)
            if self.clock is not None:
                meter.clock = self.clock
            self.meter = meter.start()
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
        idle_w, idle_reason = self.idle()
        net = None
        how = ""
        if idle_w is not None:
            net = (self.joules - idle_w * self.window) / inferences
            settled = (self.baseline or {}).get("settled")
            how = (
                f"; net: less the run's idle baseline ({idle_w:.1f} W, read once before the first cell "
                + (
                    "after the GPU settled"
                    if settled
                    else "but the GPU had not settled within the bound: an upper "
                    "bound of the idle power, so the net figure is a lower bound"
                )
                + "; env.json gpu_env.idle_baseline) x the window"
            )
        rec.energy = Energy(
            per_inference_j=self.per_inference_j,
            window_s=self.window,
            inferences=inferences,
            source=SOURCE + how + (f"; {note}" if note else ""),
            net_per_inference_j=net,
            idle_power_w=idle_w,
        )
        if idle_w is None:
            for key in ("net_per_inference_j", "idle_power_w"):
                set_null(rec, f"energy.{key}", idle_reason or "the idle baseline was not read")


register_tracker("energy", order=30)(EnergyTracker.for_cell)
