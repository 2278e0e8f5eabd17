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
idle_power_w, diff_per_inference_j, diff}, or that section with every figure None and the reason under
`null_reasons["energy.<figure>"]`.

The baseline cannot follow the GPU's state during a cell (its clocks and the power besides the inferences), and
on the H100 the net figure of the same light cell first and after a heavy one missed 10% (10.8% and 15.8%). So
the tracker also measures, after the timed rounds, two windows of equal length with different inference counts
(`difference`): one running the cell's calls back to back, one paced to about half as many; each window's energy
is E = P x T + e x n, where P is whatever the GPU draws besides the inferences (idle, static, clocks held up) and
the same in both, so e = (E1 - E2) / (n1 - n2) for equal lengths (in general the two equations' solution), with
no baseline: `diff_per_inference_j`. The windows are taken in ABBA cycles (full, paced, paced, full), so a power
that drifts through them (a GPU still coming down from the cell before) cancels too, to first order in each cycle. Counts that
do not differ enough, a counter that went backwards (wrapped or reset) or a difference that is not positive give
a null with the reason. `YOLO26_BENCH_ENERGY_DIFF_S` sets each window's seconds (default 1; 0 switches it off).

For every other cell the factory returns `EnergyNotMeasured`, which fills the section with the reason (no energy
counter is read for CPUs or non-NVIDIA GPUs), so the attempt never words that reason itself.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.backends._shared.nvml_access import nvml_error_text, nvml_module
from harness.core.record import CellRecord, Energy, set_null
from harness.measure.base import Tracker, register_tracker
from harness.measure.nvml import EnergyMeter, NvmlUnavailable, nvml_for_tracker, settled_idle

log = logging.getLogger(__name__)

#: a window shorter than this (s) is noted in the figure's source: the counter advances in coarse steps
MIN_WINDOW_S = 1.0
#: the run's idle baseline, for the cells of this process and of the processes it starts (JSON of
#: `take_run_baseline`'s dict)
BASELINE_ENV = "YOLO26_BENCH_GPU_IDLE"
FIGURES = (
    "per_inference_j",
    "window_s",
    "inferences",
    "net_per_inference_j",
    "idle_power_w",
    "diff_per_inference_j",
)
#: seconds of each of the difference method's two windows (`difference`); 0 switches the method off
DIFF_ENV = "YOLO26_BENCH_ENERGY_DIFF_S"
DIFF_WINDOW_S = 1.0
#: the paced window runs about this share of the full window's inferences (each call followed by a pause)
PACED_SHARE = 0.5
#: below this difference of the two windows' inference rates (relative to the full one's) the difference is
#: mostly the counter's noise: null with the reason
MIN_RATE_GAP = 0.2
#: ABBA cycles of the difference windows (each sub-window is seconds / (2 x cycles) long: 125 ms at the default,
#: longer than the tens of milliseconds the counter advances in)
DIFF_CYCLES = 4
#: the longest wait for the counter to advance at a window's edge, and the polling interval while waiting
COUNTER_WAIT_S = 0.25
COUNTER_POLL_S = 0.0005
DIFF_METHOD = (
    "difference of two windows of equal length with different inference counts (taken in ABBA cycles: full, "
    "paced, paced, full): "
    "each window's energy is P x T + e x n with P the power besides the inferences, the same in both, so "
    "e = (E_full x T_paced - E_paced x T_full) / (n_full x T_paced - n_paced x T_full), (E_full - E_paced) / "
    "(n_full - n_paced) for equal lengths; no idle baseline enters"
)

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


@dataclass
class Window:
    """One energy-counter window: the counter's delta (mJ), its seconds and the inferences run in it."""

    mj: float
    seconds: float
    inferences: int

    def plus(self, other: Window) -> Window:
        return Window(self.mj + other.mj, self.seconds + other.seconds, self.inferences + other.inferences)

    def to_dict(self) -> dict:
        return {"energy_j": self.mj / 1000.0, "seconds": self.seconds, "inferences": self.inferences}


def difference(
    full: Window, paced: Window, min_rate_gap: float = MIN_RATE_GAP
) -> tuple[dict | None, str | None]:
    """Energy per inference from two windows with different inference counts, where the power drawn besides the
    inferences cancels: ({per_inference_j, besides_w, full, paced, method}, None), or (None, why the difference
    means nothing: counts or rates too close, a counter that went backwards, a difference that is not positive)."""
    for name, w in (("full", full), ("paced", paced)):
        if w.mj < 0:
            return None, (
                f"NVML's energy counter went backwards in the {name} window ({w.mj:.0f} mJ): it wrapped or was "
                "reset, so the difference means nothing"
            )
        if w.seconds <= 0:
            return None, f"the {name} window has no length ({w.seconds} s)"
    if full.inferences == paced.inferences:
        return None, (
            f"both windows ran {full.inferences} inferences: their difference holds no inference, only the "
            "counter's noise"
        )
    rate_f, rate_p = full.inferences / full.seconds, paced.inferences / paced.seconds
    if rate_f <= 0 or abs(rate_f - rate_p) / rate_f < min_rate_gap:
        return None, (
            f"the windows' inference rates ({rate_f:.1f} and {rate_p:.1f} per s) differ by less than "
            f"{min_rate_gap:.0%}: the difference would be mostly the counter's noise"
        )
    det = full.inferences * paced.seconds - paced.inferences * full.seconds
    e_mj = (full.mj * paced.seconds - paced.mj * full.seconds) / det
    besides_mw = (paced.mj * full.inferences - full.mj * paced.inferences) / det
    if e_mj <= 0:
        return None, (
            f"the difference is not positive ({e_mj / 1000.0:.4g} J per inference): the counter's steps exceed "
            "what the inferences drew in these windows"
        )
    return {
        "per_inference_j": e_mj / 1000.0,
        "besides_w": besides_mw / 1000.0,
        "full": full.to_dict(),
        "paced": paced.to_dict(),
        "method": DIFF_METHOD,
    }, None


def diff_window_s(env: dict | None = None) -> tuple[float, str | None]:
    """Each difference window's seconds ($YOLO26_BENCH_ENERGY_DIFF_S, default 1), or (0, why it is off)."""
    env = os.environ if env is None else env
    raw = env.get(DIFF_ENV)
    if raw is None or raw == "":
        return DIFF_WINDOW_S, None
    try:
        value = float(raw)
    except ValueError:
        return 0.0, f"{DIFF_ENV}={raw!r} is not a number of seconds"
    if value <= 0:
        return 0.0, f"switched off ({DIFF_ENV}={raw})"
    return value, None


def synced_read(
    read: Callable[[], int],
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    max_wait_s: float = COUNTER_WAIT_S,
    poll_s: float = COUNTER_POLL_S,
) -> tuple[float, float, bool]:
    """(the counter in mJ, the time, whether it was read as it advanced): the counter is polled until its value
    changes, so the reading is the energy up to that moment rather than up to its last step (the counter advances
    in steps of tens of milliseconds; a window read between steps would miss up to a step's energy at each end)."""
    v0 = read()
    t_end = clock() + max_wait_s
    while True:
        sleep(poll_s)
        v, t = read(), clock()
        if v != v0 or t >= t_end:
            return float(v), t, v != v0


def measure_difference(
    call: Callable[[], None],
    read: Callable[[], int],
    seconds: float,
    clock: Callable[[], float] = time.perf_counter,
    sleep: Callable[[float], None] = time.sleep,
    share: float = PACED_SHARE,
    cycles: int = DIFF_CYCLES,
) -> tuple[Window, Window, dict]:
    """The two windows of `difference`, each `seconds` long in all, taken as `cycles` ABBA cycles (full, paced,
    paced, full), with `call` one inference (run and wait) and `read()` NVML's energy counter (mJ). Each
    sub-window runs from one reading of the counter as it advanced to the next (`synced_read`; the end of one is
    the start of the next), so its energy is exact up to the counter's own sampling. A power that drifts linearly
    cancels within each cycle, and what curvature leaves shrinks with the square of the cycles. The paced
    sub-windows pause after each call for as long as the call took x (1/share - 1), so they run about `share` of
    the full ones' count. Returns (full, paced, facts: sub-windows, how many readings caught the counter
    advancing)."""
    sub = seconds / (2.0 * cycles)
    v, t, caught = synced_read(read, clock, sleep)
    facts = {"cycles": cycles, "sub_window_s": sub, "readings": 1, "caught_advancing": int(caught)}

    def window(paced: bool) -> Window:
        nonlocal v, t
        n = 0
        while clock() - t < sub:
            c0 = clock()
            call()
            n += 1
            if paced:
                sleep(max(0.0, (clock() - c0) * (1.0 / share - 1.0)))
        v2, t2, ok = synced_read(read, clock, sleep)
        facts["readings"] += 1
        facts["caught_advancing"] += int(ok)
        w = Window(v2 - v, t2 - t, n)
        v, t = v2, t2
        return w

    full, paced = Window(0.0, 0.0, 0), Window(0.0, 0.0, 0)
    for _ in range(cycles):
        full = full.plus(window(False))
        paced = paced.plus(window(True)).plus(window(True))
        full = full.plus(window(False))
    return full, paced, facts


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
        diff_s: float | None = None,
        sleep: Any = None,
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
        #: the difference method: seconds per window (None: from the environment), the inner call it repeats
        self.diff_s, self.diff_off = (diff_s, None) if diff_s is not None else diff_window_s()
        if diff_s is not None and diff_s <= 0:
            self.diff_off = "switched off for this tracker (diff_s=0)"
        self.sleep = sleep
        self.call: Callable[[], None] | None = None
        self.diff: dict | None = None
        self.diff_reason: str | None = None

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

    def wrap(self, call: Callable[[], None]) -> Callable[[], None]:
        """Keep the round's call (run and wait, outside the timing trackers) for the difference windows."""
        self.call = call
        return call

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
        self.measure_diff()

    def measure_diff(self) -> None:
        """The difference method's two windows, after the timed rounds (this runner alone on the GPU)."""
        if self.diff_s is None or self.diff_s <= 0:
            self.diff_reason = f"the difference method is off: {self.diff_off or 'no window length'}"
            return
        if self.call is None:
            self.diff_reason = "no round's call to repeat (the tracker wrapped none)"
            return

        module = nvml_module(self.nvml)

        def read() -> int:
            try:
                return int(module.nvmlDeviceGetTotalEnergyConsumption(self.handle))
            except Exception as e:  # NVMLError_NotSupported
                raise NvmlUnavailable(
                    f"energy counter not readable on this GPU: {nvml_error_text(e)}"
                ) from None

        try:
            full, paced, facts = measure_difference(
                self.call,
                read,
                self.diff_s,
                clock=self.clock or time.perf_counter,
                sleep=self.sleep or time.sleep,
            )
        except NvmlUnavailable as e:
            self.diff_reason = str(e)
            return
        except (
            Exception
        ) as e:  # a call that fails here has already run in the timed rounds: say so, keep the rest
            self.diff_reason = f"the difference windows' calls failed: {type(e).__name__}: {e}"
            return
        # inferences, not rounds: a round is one call of `batch` images
        full = Window(full.mj, full.seconds, full.inferences * self.batch)
        paced = Window(paced.mj, paced.seconds, paced.inferences * self.batch)
        self.diff, self.diff_reason = difference(full, paced)
        if self.diff is not None:
            self.diff["windows"] = facts

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
            diff_per_inference_j=self.diff["per_inference_j"] if self.diff else None,
            diff=self.diff,
        )
        if self.diff is None:
            set_null(
                rec, "energy.diff_per_inference_j", self.diff_reason or "the difference windows did not run"
            )
        if idle_w is None:
            for key in ("net_per_inference_j", "idle_power_w"):
                set_null(rec, f"energy.{key}", idle_reason or "the idle baseline was not read")


register_tracker("energy", order=30)(EnergyTracker.for_cell)
