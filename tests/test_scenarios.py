"""End-to-end timing and the use-case scenarios: the stage sum against the wall time on every CPU runtime (and a
pipeline whose stage escapes the clocks failing the check), the raw head paying for its NMS, the server scenario
against a queue with a known service time, each scenario's validity rule both ways, and the run's options."""

from __future__ import annotations

import heapq
import time
from pathlib import Path

import numpy as np
import pytest

from harness import backends
from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.null_reasons import unexplained_nulls
from harness.core.stats import p50_interval
from harness.execute.attempt import CellRunner, RunConfig
from harness.measure.pipeline import CHECK_TOLERANCE, NO_COPY_CPU, E2ETiming, Pipeline, for_runner
from harness.scenarios import loadgen
from tests.fake_clock import FakeClock

# end-to-end pairs and scenarios are timed: run under load by scripts/flaky_check.sh
pytestmark = pytest.mark.timing

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


NMS_SLEEP_MS = 100.0  # injected into ultralytics' NMS: far above any noise of a yolo26n@320 call


@pytest.mark.slow
@pytest.mark.export
def test_raw_head_end_to_end_pays_for_its_nms(loaded, monkeypatch):
    """The raw head's end-to-end call runs ultralytics' NMS once per call and the end-to-end head's never (its rows
    go through non_max_suppression's end2end path: a confidence filter, no suppression); with a 100 ms sleep
    injected into the suppression, the raw head's postprocess stage and whole call take at least that long
    (a sleep is never shorter), and the stage sum still accounts for the wall time."""
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
            lo, hi = gap_interval(timing)
            assert lo <= CHECK_TOLERANCE and hi >= -CHECK_TOLERANCE, (lo, hi)
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
        assert rec["latency_e2e_ms"]["p50"] > 0 and all(
            rec["stages_ms"][s] > 0 for s in ("preprocess", "model", "postprocess")
        )
        assert isinstance(rec["e2e"]["check"]["held"], bool) and rec["e2e"]["pairs"] >= 20
        assert set(rec["stages_ms"]) == {"preprocess", "h2d", "model", "d2h", "postprocess"}
        assert rec["null_reasons"]["stages_ms.h2d"] == NO_COPY_CPU
        # validity from a 0.2 s budget depends on the machine's moment: its type and rule, not its value
        assert rec["scenario"] == "single-stream" and isinstance(rec["scenario_result"]["valid"], bool)
        assert set(rec["scenarios"]) == {"single-stream", "multi-stream", "server", "offline", "camera"}
        for name, res in rec["scenarios"].items():
            assert res["scenario"] == name and res["value"] is not None and isinstance(res["valid"], bool)
            assert res["rule"]
        assert rec["scenarios"]["multi-stream"]["streams"] == cfg.threads
        assert unexplained_nulls(rec) == []
    ort = by_id[cells[1].id][0]
    assert "InferenceSession" in ort["scenarios"]["server"]["mechanism"]
    assert ort["operators"]["total_ops"] > 100


# -- the server scenario against a queue whose service time is known -----------------------------------------------
def simulate(times: list[float], service_s: float, servers: int) -> list[float]:
    """Latencies (ms) of a FIFO queue with `servers` servers of constant service time: M/D/c on these arrivals."""
    free = [0.0] * servers
    out = []
    for t in times:
        start = max(t, heapq.heappop(free))
        heapq.heappush(free, start + service_s)
        out.append((start + service_s - t) * 1e3)
    return out


@pytest.mark.parametrize("servers", [1, 2])
def test_server_scenario_finds_the_rate_of_a_known_service_time_within_10_percent(servers):
    service_ms, bound_ms = 10.0, 30.0
    taken: list[float] = []

    def query():
        t0 = time.perf_counter()
        time.sleep(service_ms / 1e3)
        taken.append(time.perf_counter() - t0)

    budget = loadgen.Budget(min_queries=100, min_s=1.0)
    res = loadgen.server(
        [query] * servers, "sleep", bound_ms, start_rate=30.0 * servers, seed=3, budget=budget
    )
    service_s = float(np.median(taken))  # the sleep as the OS delivered it
    expected, _, _ = loadgen.search_rate(
        lambda r: float(
            np.percentile(
                simulate(loadgen.arrivals(r, loadgen.queries_at(r, budget), 3), service_s, servers), 99
            )
        ),
        bound_ms,
        30.0 * servers,
    )
    assert res["valid"] is True and expected is not None
    assert res["value"] == pytest.approx(expected, rel=0.10), (res["tried"], expected)
    assert res["value"] < servers * 1000.0 / service_ms  # never above what the servers can serve
    lo, hi = res["rate_interval"]
    assert lo == res["value"] and hi > lo
    assert all(t["queries"] >= 100 for t in res["tried"])


def test_server_scenario_is_invalid_when_no_rate_fails():
    res = loadgen.server(
        [_sleeper(1)],
        "sleep",
        10_000.0,
        start_rate=50.0,
        budget=loadgen.Budget(min_queries=20, min_s=0.1),
        steps=2,
    )
    assert res["valid"] is False and res["rate_interval"][1] is None


# -- validity rules and the other scenarios ------------------------------------------------------------------------
def test_single_stream_is_valid_only_with_its_queries():
    ok = loadgen.single_stream(_sleeper(1), loadgen.Budget(min_queries=20, min_s=0.05, max_s=5))
    short = loadgen.single_stream(_sleeper(20), loadgen.Budget(min_queries=100, min_s=0.05, max_s=0.3))
    assert ok["valid"] is True and ok["queries"] >= 20 and ok["value"] == ok["p90"]
    assert short["valid"] is False and short["queries"] < 100
    assert ok["p50"] == pytest.approx(1.1, abs=1.0)


def test_multi_stream_runs_streams_at_once_and_a_lock_serialises_them():
    import threading

    lock = threading.Lock()

    def locked():
        with lock:
            time.sleep(0.01)

    budget = loadgen.Budget(min_queries=20, min_s=0.1)
    concurrent = loadgen.multi_stream([_sleeper(10)] * 2, "threads", budget)
    serial = loadgen.multi_stream([locked] * 2, "lock", budget)
    assert concurrent["streams"] == 2 and concurrent["valid"] is True
    assert concurrent["p50"] == pytest.approx(10.5, abs=3)
    assert serial["p50"] == pytest.approx(21, abs=4)
    assert concurrent["throughput_ips"] > 1.6 * serial["throughput_ips"]


def test_offline_picks_the_concurrency_with_the_most_images_per_second():
    res = loadgen.offline(lambda c: ([_sleeper(5)] * c, "threads"), batch=1, sweep=(1, 2), seconds=0.3)
    by_c = {r["concurrency"]: r["ips"] for r in res["sweep"]}
    assert res["concurrency"] == 2 and res["value"] == by_c[2] > 1.6 * by_c[1]


def test_camera_counts_late_and_dropped_frames():
    fast = loadgen.camera(_sleeper(2), rates=(30,), seconds=1.0)
    slow = loadgen.camera(_sleeper(50), rates=(30,), seconds=2.0)
    assert fast["value"] == 0.0 and fast["valid"] is True
    # a 50 ms query at 30 FPS (33 ms frames): every processed frame is late, and about every other one is dropped
    assert slow["value"] == 1.0 and slow["fps"]["30"]["processed"] < 0.7 * slow["fps"]["30"]["frames"]


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


def test_server_runs_the_fewest_streams_within_10_percent_of_the_best_offline_rate():
    from harness.scenarios import server_concurrency

    sweep = [
        {"concurrency": 1, "ips": 40.0},
        {"concurrency": 2, "ips": 43.0},
        {"concurrency": 4, "ips": 44.0},
    ]
    assert server_concurrency({"sweep": sweep}) == 1
    sweep[0]["ips"] = 30.0
    assert server_concurrency({"sweep": sweep}) == 2
    assert server_concurrency({}) == 1
