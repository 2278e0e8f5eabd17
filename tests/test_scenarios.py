"""End-to-end timing and the use-case scenarios: the stage sum against the wall time on every CPU runtime (and a
pipeline whose stage escapes the clocks failing the check), the raw head paying for its NMS, a workload's records
with their scenarios, and the run's options. The LoadGen scenarios themselves: tests/test_loadgen.py."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from harness import backends
from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.null_reasons import unexplained_nulls
from harness.execute.runner import CellRunner, RunConfig
from harness.measure.pipeline import CHECK_TOLERANCE, NO_COPY_CPU, E2ETiming, Pipeline, for_runner
from harness.measure.stats import p50_interval
from tests.fake_clock import FakeClock

# end-to-end pairs and scenarios are timed: run under load by scripts/flaky_check.sh
pytestmark = pytest.mark.timing

# 160: the exports other modules' runs make at that shape (the session's cache), not a second ExecuTorch export
SHAPE = Shape(160, 160)
CPU_BACKENDS = ("torch-eager", "onnxruntime", "openvino", "executorch-xnnpack")


# -- the stage-sum check, both ways --------------------------------------------------------------------------------
class Untimed(Pipeline):
    """A pipeline whose staged call leaves its last stage off the clocks (as a missing synchronize would)."""

    def staged(self, clock=time.perf_counter_ns):
        out = super().staged(clock)
        out.pop(self.stages[-1][0])
        return out


def _stages(clock: FakeClock):
    return [("preprocess", clock.taking(2)), ("model", clock.taking(8)), ("postprocess", clock.taking(4))]


def test_stage_sum_check_holds_when_every_stage_is_timed_and_fails_when_one_escapes():
    """On a fake clock (stages of 2, 8 and 4 ms): exact on any machine."""
    clock = FakeClock()
    whole = E2ETiming(Pipeline(_stages(clock), {}, "fake clock"))
    broken = E2ETiming(Untimed(_stages(clock), {}, "fake clock"))
    for _ in range(8):
        whole.pair(clock)
        broken.pair(clock)
    assert whole.section()["check"]["held"] is True
    assert whole.gap() == 0.0
    section = broken.section()
    assert section["check"]["held"] is False
    assert section["gap"] == pytest.approx(-4 / 14)  # 4 of 14 ms escaped the stage clocks
    assert whole.stages_ms()["h2d"] is None and whole.stages_ms()["model"] == 8.0


# -- real runtimes -------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def loaded(tmp_path_factory, cache_dir):
    """(backend, head) -> (runner, cell), exported through the session's cache and loaded once."""
    out = tmp_path_factory.mktemp("scenario-results")
    cfg = RunConfig(run_id="s", results_dir=out, cache_dir=cache_dir, canary=False)
    svc = CellRunner(cfg, progress=lambda m: None)
    got: dict[tuple, tuple] = {}

    def load(backend: str, head: str = "e2e"):
        if (backend, head) not in got:
            cell, be = Cell("n", "detect", head, backend, "cpu", SHAPE), backends.get(backend)
            mat = svc.materialize(cell)
            if backend == "torch-eager":
                runner = be.load(mat.checkpoint, cell, {})
            else:
                o = svc.export(be, cell, mat, out / f"{backend}-{head}.log", {})
                assert o.status == "ok", o.message
                runner = be.load(Path(o.artifact), cell, o.info)
            got[(backend, head)] = (runner, cell)
        return got[(backend, head)]

    yield load
    for runner, _ in got.values():
        runner.close()


def gap_interval(timing: E2ETiming) -> tuple[float, float]:
    """The order-statistic interval (95%) of the median per-pair (stage sum / wall) - 1: how far the record's own
    pairs place the gap, wider on a loaded machine."""
    ratios = [sum(s.values()) / w - 1.0 for s, w in zip(timing.staged, timing.walls, strict=True)]
    ci = p50_interval(ratios)
    assert ci is not None, ratios
    return ci.lo, ci.hi


@pytest.mark.slow
@pytest.mark.export
@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_stage_sum_agrees_with_the_wall_time_within_its_interval(loaded, backend):
    """Every stage of a real runtime's pipeline is on a clock: the gap between the stage sum and the whole call's
    wall time is within the check's tolerance, or at least the pairs' own interval of it reaches inside the
    tolerance (a loaded machine widens the interval; a stage off the clocks moves it out: the sleep test above)."""
    runner, cell = loaded(backend)
    timing = E2ETiming(for_runner(runner, cell))
    for _ in range(25):
        timing.pair()
    section = timing.section()
    lo, hi = gap_interval(timing)
    assert lo <= section["gap"] <= hi
    assert lo <= CHECK_TOLERANCE and hi >= -CHECK_TOLERANCE, (lo, hi, section)
    stages = timing.stages_ms()
    assert stages["h2d"] is None and stages["d2h"] is None
    assert timing.pipeline.absent["h2d"] == NO_COPY_CPU
    assert all(stages[s] > 0 for s in ("preprocess", "model", "postprocess"))
    assert section["pairs"] == 25 and len(timing.staged) == len(timing.walls) == 25
    assert "non_max_suppression" in section["postprocess"] and section["decode"].startswith("excluded")


NMS_SLEEP_MS = 100.0  # injected into ultralytics' NMS: far above any noise of a yolo26n@160 call


@pytest.mark.slow
@pytest.mark.export
def test_raw_head_end_to_end_pays_for_its_nms(loaded, monkeypatch):
    """The raw head's end-to-end call runs ultralytics' NMS once per call and the end-to-end head's never (its rows
    go through non_max_suppression's end2end path: a confidence filter, no suppression); with a 100 ms sleep
    injected into the suppression, the raw head's postprocess stage and whole call take at least that long
    (a sleep is never shorter), and the end-to-end head's postprocess stage shorter."""
    import ultralytics.utils.nms as nms

    calls = {"n": 0}
    real = nms.non_max_suppression

    def slow_nms(*args, **kwargs):
        if not kwargs.get("end2end"):
            calls["n"] += 1
            time.sleep(NMS_SLEEP_MS / 1e3)
        return real(*args, **kwargs)

    monkeypatch.setattr(nms, "non_max_suppression", slow_nms)
    pairs = 6
    for head, per_call in (("raw", 1), ("e2e", 0)):
        runner, cell = loaded("torch-eager", head)
        timing = E2ETiming(for_runner(runner, cell))
        calls["n"] = 0
        for _ in range(pairs):
            timing.pair()
        assert calls["n"] == 2 * pairs * per_call, (head, calls)  # a whole and a staged call per pair
        stages = timing.stages_ms()
        if per_call:
            assert stages["postprocess"] >= NMS_SLEEP_MS
            assert min(timing.walls) >= NMS_SLEEP_MS
            # The postprocess stage's clock holds the sleep: the NMS is on the stage clocks. (Whether the stage sum
            # matches the wall time is test_stage_sum_agrees_with_the_wall_time_within_its_interval's, over 25
            # pairs: here six pairs under a loaded two-worker run put the whole calls 115 ms over the staged ones
            # once, and 19-150% under them another time, so no comparison of the two is asserted here.)
        else:
            assert stages["postprocess"] < NMS_SLEEP_MS  # no NMS: the sleep never ran in this stage


@pytest.mark.slow
@pytest.mark.export
def test_cells_of_a_workload_record_end_to_end_fields_and_scenarios(tmp_path, cache_dir):
    cfg = RunConfig(
        run_id="e2e",
        results_dir=tmp_path,
        cache_dir=cache_dir,
        max_time_s=0.2,
        block_s=0.02,
        e2e_max_time_s=0.3,
        e2e_p90_budget_s=600.0,  # 20 pairs however slow a loaded machine makes them (else 10, by the clock)
        e2e_p99_budget_s=0.0,  # and not the p99's 100, however fast (tests/test_e2e_rounds.py times those)
        accuracy=False,
        scenarios="all",
        # an 8.3 ms frame: the camera search ends within a few cameras (at 30 FPS, yolo26n 160 served cameras until
        # the search's 47 s budget ran out, twice: 116 s of the whole suite's slowest tests)
        camera_fps=120.0,
    )
    svc = CellRunner(cfg, progress=lambda m: None)
    # OpenVINO and ONNX Runtime at 160 (exports the session shares): LoadGen's query counts make a scenario's time
    # follow the runner's latency (torch eager at 160 spent 68 s in them under load, ONNX Runtime 28 s)
    cells = [Cell("n", "detect", "e2e", b, "cpu", Shape(160, 160)) for b in ("openvino", "onnxruntime")]
    svc.prepare(cells)
    by_id = svc.run_workload(cells)
    for c in cells:
        rec = by_id[c.id][0]
        assert rec.status == "ok", rec.reason
        assert rec.latency_e2e_ms.timing_scope == "end-to-end"
        assert rec.latency_e2e_ms.rounds >= 20
        assert rec.latency_e2e_ms.p50 > 0 and all(
            rec.stages_ms[s] > 0 for s in ("preprocess", "model", "postprocess")
        )
        assert isinstance(rec.e2e["check"]["held"], bool) and rec.e2e["pairs"] >= 20
        assert set(rec.stages_ms) == {"preprocess", "h2d", "model", "d2h", "postprocess"}
        assert rec.null_reasons["stages_ms.h2d"] == NO_COPY_CPU
        # validity from a 0.2 s budget depends on the machine's moment: its type and rule, not its value
        assert rec.scenario == "single-stream" and isinstance(rec.scenario_result["valid"], bool)
        assert set(rec.scenarios) == {
            "single-stream",
            "multi-stream",
            "camera-capacity",
            "server",
            "offline",
            "camera",
        }
        for name, res in rec.scenarios.items():
            assert res["scenario"] == name and isinstance(res["valid"], bool) and res["rule"]
            # a value, or LoadGen's reason (the server: no rate VALID on a loaded machine)
            assert res["value"] is not None or res["reason"], res
            assert res["valid"] or res["reason"], res
            if name != "camera":
                # the camera search's runs at its bound may be longer ("short x2", "short x4": harness.scenarios.capacity)
                durations = res["loadgen"]["durations"]
                longer = name == "camera-capacity" and re.fullmatch(r"short x[24]", durations)
                assert res["driver"] == "mlperf_loadgen" and (durations == "short" or longer), durations
                assert (cfg.run_dir / res["loadgen"]["logs"]).is_file()
        assert rec.scenarios["camera"]["driver"].startswith("harness")
        assert rec.scenarios["multi-stream"]["streams"] == cfg.threads
        assert unexplained_nulls(rec) == []
    ort = by_id[cells[1].id][0]
    assert "InferenceSession" in ort.scenarios["server"]["mechanism"]
    assert ort.operators["total_ops"] > 100


# -- options -------------------------------------------------------------------------------------------------------
def test_scenario_options_are_checked_before_work():
    from harness.core.axes import SelectionError
    from harness.pytest_plugin import options

    def opt_of(**kw):
        return lambda name: kw.get(name)

    assert options.scenario_mode(opt_of(), "default") == "decision"
    assert options.scenario_mode(opt_of(scenarios="n640"), "default") == "n640"
    assert options.scenario_mode(opt_of(), "nightly") == "all"
    assert options.scenario_mode(opt_of(scenarios="none"), "nightly") == "none"
    with pytest.raises(SelectionError, match="--scenarios: unknown 'some'"):
        options.scenario_mode(opt_of(scenarios="some"), "default")
    rule = next(r for r in options.NUMBER_RULES if r.name == "server_bound_ms")
    with pytest.raises(SelectionError, match="--server-bound-ms: 0"):
        options.numbers(lambda name: 0 if name == "server_bound_ms" else None)
    assert rule.parse("0.5") == 0.5
    assert options.scenario_durations(opt_of()) == "short"
    assert options.scenario_durations(opt_of(scenario_durations="mlperf")) == "mlperf"
    with pytest.raises(SelectionError, match="--scenario-durations: unknown 'long'"):
        options.scenario_durations(opt_of(scenario_durations="long"))
