"""Energy figures that do not depend on cell order (issue 36, item 2), with a fake NVML on a virtual clock whose
power decays after work, as a GPU still clocked up from the cell before does (the first H100 run read 70 W idle
before some cells and 116-133 W before others).

The fake is the only stand-in (no GPU here); the settling, the tracker and the energy arithmetic are the real code.
The figures of the fake (70 W idle, 50 W of work, a 4 s decay) are synthetic, chosen to look like that H100 run.
"""

from __future__ import annotations

import math

import pytest

from harness.core.record import new_record
from harness.measure.energy import BASELINE_ENV, EnergyTracker, run_baseline, take_run_baseline
from harness.measure.nvml import idle_power_w, settled_idle

IDLE_W = 70.0
IDLE_CLOCK = 345.0
MAX_CLOCK = 1980.0


class DecayingGpu:
    """A GPU on a virtual clock: it draws IDLE_W + the work's draw while working; after work its power (and SM
    clock) fall back towards idle exponentially with time constant `tau` s. The energy counter integrates power."""

    NVML_CLOCK_GRAPHICS, NVML_CLOCK_SM, NVML_CLOCK_MEM = 0, 1, 2

    def __init__(self, tau: float = 4.0, start_w: float = IDLE_W) -> None:
        self.t = 0.0
        self.tau = tau
        self.mj = 0.0
        self.work_w: float | None = None  # extra draw while working
        self.left_w = start_w  # power when the last work ended
        self.left_t = 0.0

    # -- the NVML calls the harness makes ---------------------------------------------------------------------
    def nvmlInit(self) -> None:
        pass

    def power_at(self, t: float) -> float:
        if self.work_w is not None:
            return IDLE_W + self.work_w
        return IDLE_W + (self.left_w - IDLE_W) * math.exp(-(t - self.left_t) / self.tau)

    def nvmlDeviceGetPowerUsage(self, h) -> int:
        return int(self.power_at(self.t) * 1000)

    def nvmlDeviceGetClockInfo(self, h, which) -> int:
        share = (self.power_at(self.t) - IDLE_W) / 430.0  # clocks follow the power above idle
        return int(IDLE_CLOCK + (MAX_CLOCK - IDLE_CLOCK) * min(1.0, share))

    def nvmlDeviceGetTotalEnergyConsumption(self, h) -> int:
        return int(self.mj)

    # -- the virtual clock --------------------------------------------------------------------------------------
    def clock(self) -> float:
        return self.t

    def work(self, seconds: float, draw_w: float) -> None:
        self.work_w = draw_w
        self._integrate(seconds)
        self.left_w, self.left_t, self.work_w = IDLE_W + draw_w, self.t, None

    def _integrate(self, seconds: float) -> None:
        steps = max(1, int(seconds / 0.001))
        for _ in range(steps):
            self.mj += self.power_at(self.t) * 1000.0 * (seconds / steps)
            self.t += seconds / steps


def _sleep(gpu: DecayingGpu):
    def sleep(dt: float) -> None:
        gpu._integrate(dt)

    return sleep


def _cell_record(cuda_cell):
    return new_record("r", cuda_cell, "random-init:0")


@pytest.fixture
def cuda_cell():
    from tests.test_nvml import _cuda_cell

    return _cuda_cell()


def _measure(gpu: DecayingGpu, baseline: dict | None, old_idle: bool, cuda_cell) -> float:
    """One cell as the attempt drives the tracker: load and warm-up (3 s of light work at 20 W), then 2 s of timed
    rounds (1000 rounds at 50 W above idle); returns its net energy per inference."""
    handle = object()
    idle_before_load = idle_power_w(handle, gpu, seconds=0)  # what the tracker read before this issue
    t = EnergyTracker(batch=1, nvml=gpu, handle=handle, min_window_s=1.0, baseline=baseline, clock=gpu.clock)
    t.start()
    gpu._integrate(1.0)  # load: the GPU idles (still decaying from whatever ran before)
    gpu.work(0.5, 20.0)  # first run and warm-up
    t.start_timed()
    t.resume()
    gpu.work(2.0, 50.0)
    t.pause()
    t.stop(1000)
    rec = _cell_record(cuda_cell)
    t.fill(rec)
    e = rec.energy
    assert e.per_inference_j == pytest.approx((IDLE_W + 50.0) * 2.0 / 1000, rel=0.01)  # gross: order-free
    if old_idle:
        return (e.per_inference_j * e.inferences - idle_before_load * e.window_s) / e.inferences
    assert e.net_per_inference_j is not None
    return e.net_per_inference_j


def _baseline(gpu: DecayingGpu) -> dict:
    return settled_idle(object(), gpu, clock=gpu.clock, sleep=_sleep(gpu))


def test_the_same_cell_first_and_after_a_heavy_cell_has_the_same_net_energy(cuda_cell):
    # run A: the cell first
    gpu = DecayingGpu()
    base_a = _baseline(gpu)
    first = _measure(gpu, base_a, False, cuda_cell)
    # run B: a heavy cell (500 W above idle for 5 s) right before the same cell
    gpu = DecayingGpu()
    base_b = _baseline(gpu)
    gpu.work(5.0, 500.0)
    after_heavy = _measure(gpu, base_b, False, cuda_cell)
    assert base_a["settled"] and base_b["settled"]
    assert first == pytest.approx(50.0 * 2.0 / 1000, rel=0.05)
    assert after_heavy == pytest.approx(first, rel=0.10)


def test_the_old_idle_reading_before_each_cell_fails_that(cuda_cell):
    """The other way round: the idle power read before each cell's load (the tracker before this issue) gives
    the same cell a net figure far more than 10% apart after a heavy cell."""
    gpu = DecayingGpu()
    first = _measure(gpu, None, True, cuda_cell)
    gpu = DecayingGpu()
    gpu.work(5.0, 500.0)
    after_heavy = _measure(gpu, None, True, cuda_cell)
    assert first == pytest.approx(50.0 * 2.0 / 1000, rel=0.05)
    assert abs(after_heavy - first) / first > 0.10


def test_the_baseline_waits_for_the_gpu_to_settle_within_its_bound():
    # the run starts while the GPU is still clocked up (another process, or the previous run)
    gpu = DecayingGpu(start_w=200.0)
    base = _baseline(gpu)
    assert base["settled"] and base["power_w"] == pytest.approx(IDLE_W, abs=1.5)
    assert (
        base["waited_s"] > 5.0
        and len(base["windows"]) > 2
        and "until a window's median power" in base["method"]
    )
    # a GPU that has not settled within the bound: the last window, and it says it had not settled
    gpu = DecayingGpu(tau=60.0, start_w=300.0)
    base = settled_idle(object(), gpu, clock=gpu.clock, sleep=_sleep(gpu), max_s=5.0)
    assert not base["settled"] and base["power_w"] > IDLE_W + 50 and base["waited_s"] <= 6.5


def test_the_tracker_says_when_the_baseline_had_not_settled_or_was_not_read(cuda_cell):
    gpu = DecayingGpu()
    handle = object()
    for base, net_null in (
        ({"power_w": 90.0, "settled": False}, False),
        ({"power_w": None, "reason": "x"}, True),
    ):
        t = EnergyTracker(nvml=gpu, handle=handle, baseline=base, clock=gpu.clock)
        t.start_timed()
        t.resume()
        gpu.work(1.5, 50.0)
        t.stop(100)
        t.fill(rec := _cell_record(cuda_cell))
        assert rec.energy.per_inference_j is not None
        if net_null:
            assert rec.energy.net_per_inference_j is None
            assert rec.null_reasons["energy.net_per_inference_j"] == "the run's idle baseline was not read: x"
        else:
            assert rec.energy.idle_power_w == 90.0 and "had not settled" in rec.energy.source


def test_the_run_baseline_reaches_the_cells_through_the_environment(monkeypatch):
    monkeypatch.delenv(BASELINE_ENV, raising=False)
    assert run_baseline() is None
    gpu = DecayingGpu()
    base = take_run_baseline(gpu, object(), context=lambda: "held: fake", clock=gpu.clock, sleep=_sleep(gpu))
    assert run_baseline() == base and base["power_w"] == pytest.approx(IDLE_W, abs=0.5)
    assert base["cuda_context"] == "held: fake"  # read in the state the cells run in, and it says so
    # no power reading: the baseline says why, and the run's net figures are null with that reason
    monkeypatch.delenv(BASELINE_ENV)

    class NoPower(DecayingGpu):
        def nvmlDeviceGetPowerUsage(self, h):
            raise RuntimeError("Not Supported")

    base = take_run_baseline(NoPower(), object(), context=None)
    assert base["power_w"] is None and "power reading not available" in base["reason"]
    assert run_baseline() == base


def test_the_context_holder_says_when_there_is_no_cuda_device():
    import torch

    from harness.measure.energy import hold_cuda_context

    if torch.cuda.is_available():
        pytest.skip("asserts this CPU machine's no-GPU answer")
    assert hold_cuda_context() == "not held: torch sees no CUDA device"
