"""End-to-end timing and the use-case scenarios: the stage sum against the wall time on every CPU runtime (and a
pipeline whose stage escapes the clocks failing the check), the raw head paying for its NMS, a workload's records
with their scenarios, and the run's options. The LoadGen scenarios themselves: tests/test_loadgen.py."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from harness import backends
from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.null_reasons import unexplained_nulls
from harness.execute.attempt import CellRunner, RunConfig
from harness.measure.pipeline import CHECK_TOLERANCE, NO_COPY_CPU, E2ETiming, Pipeline, for_runner

SHAPE = Shape(320, 320)
CPU_BACKENDS = ("torch-eager", "onnxruntime", "openvino", "executorch-xnnpack")


def _sleeper(ms: float):
    return lambda _=None: time.sleep(ms / 1e3)


# -- the stage-sum check, both ways --------------------------------------------------------------------------------
class Untimed(Pipeline):
    """A pipeline whose staged call leaves its last stage off the clocks (as a missing synchronize would)."""

    def staged(self, clock=time.perf_counter_ns):
        out = super().staged(clock)
        out.pop(self.stages[-1][0])
        return out


def _stages():
    return [("preprocess", _sleeper(2)), ("model", _sleeper(8)), ("postprocess", _sleeper(4))]


def test_stage_sum_check_holds_when_every_stage_is_timed_and_fails_when_one_escapes():
    whole = E2ETiming(Pipeline(_stages(), {}, "sleep"))
    broken = E2ETiming(Untimed(_stages(), {}, "sleep"))
    for _ in range(8):
        whole.pair()
        broken.pair()
    assert whole.section()["check"]["held"] is True
    assert abs(whole.gap()) <= CHECK_TOLERANCE
    section = broken.section()
    assert section["check"]["held"] is False
    assert section["gap"] < -0.15  # 4 of 14 ms escaped the stage clocks
    assert whole.stages_ms()["h2d"] is None and whole.stages_ms()["model"] == pytest.approx(8, rel=0.5)


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


@pytest.mark.slow
@pytest.mark.export
@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_stage_sum_within_5_percent_of_the_wall_time(loaded, backend):
    runner, cell = loaded(backend)
    timing = E2ETiming(for_runner(runner, cell))
    for _ in range(25):
        timing.pair()
    section = timing.section()
    assert section["check"]["held"], section
    stages = timing.stages_ms()
    assert stages["h2d"] is None and stages["d2h"] is None
    assert timing.pipeline.absent["h2d"] == NO_COPY_CPU
    assert all(stages[s] > 0 for s in ("preprocess", "model", "postprocess"))
    assert stages["model"] > stages["preprocess"] and stages["model"] > stages["postprocess"]
    assert "non_max_suppression" in section["postprocess"] and section["decode"].startswith("excluded")


@pytest.mark.slow
@pytest.mark.export
def test_raw_head_end_to_end_exceeds_model_only_by_its_nms(loaded):
    """Model-only and end-to-end rounds of the raw head and the e2e head, interleaved: the raw head's end-to-end
    time is its model time plus its pre- and post-processing, and its post-processing (NMS) costs more than the
    end-to-end head's top-k filter."""
    timings, model = {}, {"raw": [], "e2e": []}
    for head in ("raw", "e2e"):
        runner, cell = loaded("torch-eager", head)
        timings[head] = E2ETiming(for_runner(runner, cell))
    prepared = {h: loaded("torch-eager", h)[0].prepare(np.zeros((1, 3, 320, 320), np.float32)) for h in model}
    for _ in range(30):
        for head in ("raw", "e2e"):
            runner = loaded("torch-eager", head)[0]
            t0 = time.perf_counter_ns()
            runner.run(prepared[head])
            model[head].append((time.perf_counter_ns() - t0) / 1e6)
            timings[head].pair()
    raw = timings["raw"]
    e2e_p50, model_p50 = float(np.median(raw.walls)), float(np.median(model["raw"]))
    stages = raw.stages_ms()
    extra = stages["preprocess"] + stages["postprocess"]
    assert e2e_p50 > model_p50
    assert e2e_p50 - model_p50 == pytest.approx(extra, rel=0.6, abs=0.5)
    assert stages["postprocess"] > 1.3 * timings["e2e"].stages_ms()["postprocess"]


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
        accuracy=False,
        scenarios="all",
    )
    svc = CellRunner(cfg, progress=lambda m: None)
    cells = [Cell("n", "detect", "e2e", b, "cpu", SHAPE) for b in ("torch-eager", "onnxruntime")]
    svc.prepare(cells)
    by_id = svc.run_workload(cells)
    for c in cells:
        rec = by_id[c.id][0]
        assert rec["status"] == "ok", rec["reason"]
        assert rec["latency_e2e_ms"]["timing_scope"] == "end-to-end"
        assert rec["latency_e2e_ms"]["rounds"] >= 20
        # the model stage is timed in the same pairs as the whole calls; model-only rounds ran earlier (drift)
        assert rec["latency_e2e_ms"]["p50"] > rec["stages_ms"]["model"]
        assert rec["e2e"]["check"]["held"] is True
        assert set(rec["stages_ms"]) == {"preprocess", "h2d", "model", "d2h", "postprocess"}
        assert rec["null_reasons"]["stages_ms.h2d"] == NO_COPY_CPU
        assert rec["scenario"] == "single-stream" and rec["scenario_result"]["valid"] is True
        assert set(rec["scenarios"]) == {"single-stream", "multi-stream", "server", "offline", "camera"}
        for name, res in rec["scenarios"].items():
            assert res["scenario"] == name and isinstance(res["valid"], bool) and res["rule"]
            # a value, or LoadGen's reason (the server: no rate VALID on a loaded machine)
            assert res["value"] is not None or res["reason"], res
            assert res["valid"] or res["reason"], res
            if name != "camera":
                assert res["driver"] == "mlperf_loadgen" and res["loadgen"]["durations"] == "short"
                assert (cfg.run_dir / res["loadgen"]["logs"]).is_file()
        assert rec["scenarios"]["camera"]["driver"].startswith("harness")
        assert rec["scenarios"]["multi-stream"]["streams"] == cfg.threads
        assert unexplained_nulls(rec) == []
    ort = by_id[cells[1].id][0]
    assert "InferenceSession" in ort["scenarios"]["server"]["mechanism"]
    assert ort["operators"]["total_ops"] > 100


# -- options -------------------------------------------------------------------------------------------------------
def test_scenario_options_are_checked_before_work():
    from harness.core.axes import SelectionError
    from harness.pytest_plugin import options

    def opt_of(**kw):
        return lambda name: kw.get(name)

    assert options.scenario_mode(opt_of(), "default") == "n640"
    assert options.scenario_mode(opt_of(), "nightly") == "all"
    assert options.scenario_mode(opt_of(scenarios="none"), "nightly") == "none"
    with pytest.raises(SelectionError, match="--scenarios: unknown 'some'"):
        options.scenario_mode(opt_of(scenarios="some"), "default")
    rule = next(r for r in options.NUMBER_RULES if r.name == "server_bound_ms")
    with pytest.raises(SelectionError, match="--server-bound-ms: 0"):
        rule.check(0)
    assert options.scenario_durations(opt_of()) == "short"
    assert options.scenario_durations(opt_of(scenario_durations="mlperf")) == "mlperf"
    with pytest.raises(SelectionError, match="--scenario-durations: unknown 'long'"):
        options.scenario_durations(opt_of(scenario_durations="long"))
