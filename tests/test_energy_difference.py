"""Energy per inference by the difference of two windows (harness.measure.energy.difference, issue: "Energy that
holds"), on a fake NVML on a virtual clock: the GPU draws a power besides the inferences (idle, static, clocks held
up: the same whether a call runs or not, decaying after a heavy cell) and each inference adds a fixed energy.

The fake is the only stand-in; the windows, the arithmetic and the tracker are the real code. On the H100 the net
figure against the run's idle baseline of the same light cell first and after a heavy cell missed 10% (10.8%,
15.8%); a baseline read at rest cannot know the power besides the inferences while the cell runs. The figures of
the fake (70 W settled idle, 120 W besides the inferences while a context holds the clocks up, 0.05 J an inference,
2 ms a call) are synthetic, of the order of that run."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from harness.core.record import new_record
from harness.measure.energy import (
    DIFF_ENV,
    EnergyTracker,
    Window,
    diff_window_s,
    difference,
    measure_difference,
)

SETTLED_IDLE_W = 70.0  # what a baseline read at rest gets
BESIDES_W = 120.0  # what the GPU draws besides the inferences while a cell runs (clocks up)
E_J = 0.05  # energy one inference adds
CALL_S = 0.002


class Gpu:
    """A virtual clock and an energy counter: besides(t) integrated over time, plus E_J per call."""

    def __init__(self, heavy_w: float = 0.0, tau: float = 4.0, start_mj: float = 0.0) -> None:
        self.t = 0.0
        self.mj = start_mj
        self.heavy_w, self.tau = heavy_w, tau  # a heavy cell before: besides power above BESIDES_W, decaying
        self.calls = 0

    heavy_t = 0.0  # when the heavy cell ended

    def besides_w(self, t: float) -> float:
        return BESIDES_W + self.heavy_w * math.exp(-(t - self.heavy_t) / self.tau)

    def heavy(self, seconds: float = 5.0, draw_w: float = 600.0) -> int:
        """A heavy cell: `seconds` at `draw_w` above the light cell's; after it the draw comes down slowly."""
        self.heavy_w = 0.0
        self.mj += (BESIDES_W + draw_w) * 1000.0 * seconds
        self.t += seconds
        self.heavy_w, self.heavy_t = 300.0, self.t
        return 1

    def advance(self, seconds: float) -> None:
        steps = max(1, int(seconds / 0.0005))
        for _ in range(steps):
            self.mj += self.besides_w(self.t) * 1000.0 * seconds / steps
            self.t += seconds / steps

    # the NVML calls and the harness's hooks
    def nvmlInit(self) -> None:
        pass

    def nvmlDeviceGetTotalEnergyConsumption(self, h) -> int:
        return int(self.mj)

    def clock(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)

    def call(self) -> None:
        self.advance(CALL_S)
        self.mj += E_J * 1000.0
        self.calls += 1


class SteppedGpu(Gpu):
    """The counter as NVML gives it: it advances in steps (`step` s), holding the energy up to its last step."""

    def __init__(self, step: float = 0.05, **kw) -> None:
        super().__init__(**kw)
        self.step, self.reported = step, self.mj

    def advance(self, seconds: float) -> None:
        steps = max(1, int(seconds / 0.0005))
        for _ in range(steps):
            before = self.t
            self.mj += self.besides_w(self.t) * 1000.0 * seconds / steps
            self.t += seconds / steps
            if math.floor(self.t / self.step) != math.floor(before / self.step):
                self.reported = self.mj

    def nvmlDeviceGetTotalEnergyConsumption(self, h) -> int:
        return int(self.reported)


def _read(gpu: Gpu):
    return lambda: gpu.nvmlDeviceGetTotalEnergyConsumption(None)


def _diff(gpu: Gpu, seconds: float = 1.0) -> dict:
    full, paced, facts = measure_difference(gpu.call, _read(gpu), seconds, clock=gpu.clock, sleep=gpu.sleep)
    got, why = difference(full, paced)
    assert why is None, why
    return {**got, "facts": facts}


def test_the_power_besides_the_inferences_cancels_where_one_window_counts_it():
    gpu = Gpu()
    got = _diff(gpu)
    assert got["per_inference_j"] == pytest.approx(E_J, rel=0.01)
    assert got["besides_w"] == pytest.approx(BESIDES_W, rel=0.01)
    full, paced = got["full"], got["paced"]
    # windows of equal length, but for their edges read as the counter advanced (the solution allows for that)
    assert full["seconds"] == pytest.approx(paced["seconds"], rel=0.05)
    assert paced["inferences"] == pytest.approx(full["inferences"] / 2, rel=0.05)  # about half the count
    # one window counts the power besides the inferences: its gross figure is several times the inference's ...
    gross = full["energy_j"] / full["inferences"]
    assert gross == pytest.approx(E_J + BESIDES_W * CALL_S, rel=0.01) and gross > 5 * E_J
    # ... and less a baseline read at rest (clocks down) it still counts what the clocks held up drew
    net_baseline = gross - SETTLED_IDLE_W * CALL_S
    assert net_baseline > 2 * E_J


def test_the_same_cell_after_a_heavy_one_gives_the_same_figure_within_5_percent():
    """The order check on the fake: the light cell first, and after a heavy cell whose draw besides the inferences
    is still coming down (+300 W, time constant 4 s; the cell's load, warm-up and timed rounds take 3.5 s before
    the windows), within 5% by the difference (its ABBA cycles cancel the drift to first order); the net figure
    against one baseline misses by far. With a counter that advances in 50 ms steps, as NVML's does."""
    first = _diff(SteppedGpu())
    heavy = SteppedGpu(heavy_w=300.0)
    heavy.advance(3.5)
    after = _diff(heavy)
    assert first["per_inference_j"] == pytest.approx(E_J, rel=0.01)
    assert abs(after["per_inference_j"] - first["per_inference_j"]) / first["per_inference_j"] < 0.05
    # every edge was read as the counter advanced, so the 50 ms steps cost nothing
    assert first["facts"]["caught_advancing"] == first["facts"]["readings"] == 17

    def net_against_baseline(got: dict) -> float:
        f = got["full"]
        return (f["energy_j"] - SETTLED_IDLE_W * f["seconds"]) / f["inferences"]

    rel_old = abs(net_against_baseline(after) - net_against_baseline(first)) / net_against_baseline(first)
    assert rel_old > 0.5


def test_a_difference_that_means_nothing_is_null_with_its_reason():
    same = difference(Window(5000, 1.0, 400), Window(5100, 1.0, 400))
    assert same[0] is None and "both windows ran 400 inferences" in same[1]
    close = difference(Window(5000, 1.0, 400), Window(4900, 1.0, 380))
    assert close[0] is None and "differ by less than 20%" in close[1]
    wrapped = difference(Window(-(2**40), 1.0, 400), Window(4000, 1.0, 200))
    assert wrapped[0] is None and "went backwards" in wrapped[1] and "wrapped or was reset" in wrapped[1]
    noise = difference(Window(4000, 1.0, 400), Window(4000, 1.0, 200))
    assert noise[0] is None and "not positive" in noise[1]
    # windows of unequal length: the two equations' solution, not the plain difference
    got, why = difference(
        Window((120 * 1.0 + 0.05 * 400) * 1000, 1.0, 400), Window((120 * 1.2 + 0.05 * 200) * 1000, 1.2, 200)
    )
    assert (
        why is None
        and got["per_inference_j"] == pytest.approx(0.05)
        and got["besides_w"] == pytest.approx(120)
    )


def test_a_counter_that_wraps_inside_a_window_gives_a_null_through_the_windows():
    class Wrapping(Gpu):
        def nvmlDeviceGetTotalEnergyConsumption(self, h) -> int:
            return int(self.mj) % 2**20  # a counter that wraps (within the run, so a window may straddle it)

    gpu = Wrapping(start_mj=2**20 - 3000)
    full, paced, _ = measure_difference(gpu.call, _read(gpu), 2.0, clock=gpu.clock, sleep=gpu.sleep)
    got, why = difference(full, paced)
    assert got is None and "went backwards" in why


def _cell():
    from tests.test_nvml import _cuda_cell

    return _cuda_cell()


def test_the_tracker_records_the_difference_after_the_timed_rounds_and_says_how():
    gpu = Gpu()
    t = EnergyTracker(
        batch=1,
        nvml=gpu,
        handle=object(),
        min_window_s=0.0,
        baseline={"power_w": SETTLED_IDLE_W, "settled": True},
        clock=gpu.clock,
        diff_s=1.0,
        sleep=gpu.sleep,
    )
    t.start()
    call = t.wrap(gpu.call)
    t.start_timed()
    t.resume()
    n = 0
    while gpu.t < 2.0:
        call()
        n += 1
    t.pause()
    t.stop(n)
    rec = new_record("r", _cell(), "random-init:0")
    t.fill(rec)
    e = rec.energy
    assert e.inferences == n and gpu.calls > n  # the windows ran after the timed rounds, outside their count
    assert e.diff_per_inference_j == pytest.approx(E_J, rel=0.01)
    assert e.net_per_inference_j > 2 * E_J  # the baseline's figure still counts the clocks held up
    assert "equal length with different inference counts" in e.diff["method"] and "ABBA" in e.diff["method"]
    assert e.diff["windows"]["cycles"] == 4 and e.diff["besides_w"] == pytest.approx(BESIDES_W, rel=0.01)
    assert "energy.diff_per_inference_j" not in rec.null_reasons


def test_the_tracker_says_why_when_the_method_is_off_or_has_no_call(monkeypatch):
    monkeypatch.setenv(DIFF_ENV, "0")
    assert diff_window_s() == (0.0, f"switched off ({DIFF_ENV}=0)")
    monkeypatch.setenv(DIFF_ENV, "soon")
    assert diff_window_s()[0] == 0.0 and "not a number" in diff_window_s()[1]
    monkeypatch.delenv(DIFF_ENV)
    assert diff_window_s() == (1.0, None)
    for diff_s, wrap, why in ((0.0, True, "switched off"), (1.0, False, "no round's call to repeat")):
        gpu = Gpu()
        t = EnergyTracker(nvml=gpu, handle=object(), clock=gpu.clock, diff_s=diff_s, sleep=gpu.sleep)
        if wrap:
            t.wrap(gpu.call)
        t.start_timed()
        t.resume()
        for _ in range(100):
            gpu.call()
        t.stop(100)
        rec = new_record("r", _cell(), "random-init:0")
        t.fill(rec)
        assert rec.energy.per_inference_j is not None and rec.energy.diff_per_inference_j is None
        assert why in rec.null_reasons["energy.diff_per_inference_j"]


def _order_bench(monkeypatch, gpu: Gpu):
    """benchmarks/gpu_order_host_bound.py with torch, time and NVML replaced by the fake GPU (the tracker, the
    windows and the script's comparison are the real code)."""
    import contextlib
    import importlib.util
    import types

    repo = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location(
        "gpu_order_host_bound", repo / "benchmarks" / "gpu_order_host_bound.py"
    )
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    h = object()
    monkeypatch.setattr(bench, "time", types.SimpleNamespace(perf_counter=gpu.clock, sleep=gpu.advance))
    monkeypatch.setattr(
        bench,
        "EnergyTracker",
        lambda **kw: EnergyTracker(
            nvml=gpu, handle=h, clock=gpu.clock, sleep=gpu.sleep, min_window_s=0.0, **kw
        ),
    )
    monkeypatch.setattr(bench, "idle_power_w", lambda handle, seconds: gpu.besides_w(gpu.t))
    monkeypatch.setattr(bench, "gpu_snapshot", lambda handle: {})
    monkeypatch.setattr(bench, "heavy_cell", lambda torch: gpu.heavy())
    torch = types.SimpleNamespace(
        no_grad=contextlib.nullcontext, cuda=types.SimpleNamespace(synchronize=lambda: None)
    )
    base = {"power_w": SETTLED_IDLE_W, "settled": True}

    def run(timed_s: float, diff_s: float) -> dict:
        return bench.order_run(torch, lambda x: gpu.call(), None, base, h, timed_s=timed_s, diff_s=diff_s)

    return bench, run


def test_the_order_benchmark_compares_the_methods_and_the_check_holds(monkeypatch):
    """The order check on the fake GPU: the difference of two windows holds the order within 5%, the 2 s net
    figure against the run's baseline does not, and the script says which method was steadier."""
    gpu = Gpu()
    bench, run = _order_bench(monkeypatch, gpu)
    short, long = run(2.0, 1.0), run(10.0, 0.0)
    diff = bench.method_figures(short, "diff_j")
    net = bench.method_figures(short, "net_j_run_baseline")
    assert diff["first"] == pytest.approx(E_J, rel=0.02) and diff["rel"] < 0.05 and diff["noise"] < 0.02
    assert net["rel"] > 0.05  # what the H100 showed: the 2 s net figure moves with the cell before
    order = bench.energy_order(short, long)
    assert order["held"] is True and order["steadier_method"] == "difference of two windows (1 s each)"
    assert (
        order["net_rel_diff_new"] == net["rel"] and order["methods"]["net, run baseline (10 s)"]["rel"] > 0.05
    )


def test_the_order_check_fails_where_the_inference_itself_costs_more_after_the_heavy_cell(monkeypatch):
    """The other way: after the heavy cell each inference draws 15% more (a hot GPU), which no method should
    cancel: the difference sees it (rel about 0.15) and the check does not hold."""

    class HotGpu(Gpu):
        def call(self) -> None:
            super().call()
            if self.heavy_t > 0:  # after the heavy cell
                self.mj += 0.15 * E_J * 1000.0

    gpu = HotGpu()
    bench, run = _order_bench(monkeypatch, gpu)
    short, long = run(2.0, 1.0), run(10.0, 0.0)
    order = bench.energy_order(short, long)
    diff = order["methods"]["difference of two windows (1 s each)"]
    assert diff["noise"] < 0.02 and diff["rel"] == pytest.approx(0.15, abs=0.03)
    assert order["held"] is False and order["steadier_method"] is not None
    # a run whose difference meant nothing in one cell cannot pick it: only the 10 s window is left to judge
    short["after_heavy"]["diff_j"] = None
    assert bench.energy_order(short, long)["steadier_method"] == "net, run baseline (10 s)"
