"""Camera capacity by search (harness.scenarios.capacity) on fake runners whose per-query time grows with N, and the
camera-capacity use case on records: a search's interval, a bound from multi-stream figures, a nearest miss."""

from __future__ import annotations

import json
import math
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from harness import backends
from harness.backends.base import Runner
from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.report import render_report
from harness.scenarios import ScenarioConfig, batched_for, loadgen, streams_for
from harness.scenarios.capacity import BATCHED, STREAMS, Trial, camera_capacity, capacity, search, trial_of
from harness.scenarios.logs import DETAIL, read_detail
from harness.scenarios.results import Target
from harness.scenarios.settings import SHORT

FPS = 30.0
FRAME = 1000.0 / FPS


def runner(per_query_ms, mechanism: str = STREAMS, valid=lambda n: True):
    """A fake LoadGen MultiStream run: `per_query_ms(n)` is the per-query latency with n cameras."""
    calls: list[int] = []

    def at(n: int) -> Trial:
        calls.append(n)
        ms = per_query_ms(n)
        ok = valid(n) and ms <= FRAME
        return Trial(n, ok, {"cameras": n, "mechanism": mechanism, "ok": ok, "target_ms": ms})

    at.calls = calls  # type: ignore[attr-defined]
    return at


@pytest.mark.parametrize("per_camera_ms", [1.0, 2.3, 4.0, 7.0, 11.0, 16.0])
def test_the_search_finds_the_largest_n_within_one_step(per_camera_ms):
    at = runner(lambda n: per_camera_ms * n)
    truth = math.floor(FRAME / per_camera_ms)  # the largest n with n x per_camera_ms within the frame
    lo, hi, tried = search(at)
    assert lo == truth and hi == truth + 1  # the interval: last passing, first failing, one apart
    assert len(tried) <= 12 and all(t.ok == (t.cameras <= truth) for t in tried)


def test_the_search_doubles_then_bisects():
    at = runner(lambda n: 3.0 * n)  # 11 cameras pass, 12 fail
    search(at)
    assert at.calls[:5] == [1, 2, 4, 8, 16] and at.calls[5:] == [12, 10, 11]


def test_a_runner_that_misses_at_one_camera_gives_a_nearest_miss_never_zero_cameras():
    out = capacity(runner(lambda n: 40.0 * n), None, FPS, 0.9)
    assert out["value"] is None and out["valid"] is False and out["interval"] == [None, 1]
    assert out["nearest_miss"]["cameras"] == 1 and "even one camera fails" in out["reason"]
    # and the other way: a runner within the frame at one camera is answered
    assert capacity(runner(lambda n: 20.0 * n), None, FPS, 0.9)["value"] == 1


def test_an_invalid_loadgen_verdict_fails_the_n_whatever_its_latency():
    lo, hi, _ = search(runner(lambda n: 1.0 * n, valid=lambda n: n < 6))
    assert (lo, hi) == (5, 6)


def test_the_batched_call_wins_where_one_batched_call_is_cheaper_than_n_calls():
    streams = runner(lambda n: 4.0 * n)  # n separate calls: 8 cameras
    batched = runner(lambda n: 5.0 + 1.0 * n, BATCHED)  # one call of n frames: 28 cameras
    out = capacity(streams, batched, FPS, 0.9)
    assert out["mechanism"] == BATCHED and out["value"] == 28 and out["interval"] == [28, 29]
    assert out["mechanisms"][STREAMS]["value"] == 8


def test_the_batched_call_loses_where_it_is_not_cheaper():
    streams = runner(lambda n: 4.0 * n)
    batched = runner(lambda n: 6.0 * n, BATCHED)  # batching costs more per frame: 5 cameras
    out = capacity(streams, batched, FPS, 0.9)
    assert out["mechanism"] == STREAMS and out["value"] == 8
    assert out["mechanisms"][BATCHED]["value"] == 5
    assert "p90" in out["rule"] and "short durations" in out["rule"]


def test_a_multi_stream_result_is_judged_at_its_percentile_with_its_verdict_and_keeps_its_logs():
    def result(n: int) -> dict:
        p90 = 12.0 * n
        return {"percentile": 0.9, "p90": p90, "p99": p90 + 9, "valid": True, "loadgen": {"logs": f"n{n}"}}

    out = capacity(lambda n: trial_of(result(n), n, FRAME, STREAMS), None, FPS, 0.9)
    assert out["value"] == 2 and out["interval"] == [2, 3]  # p90 24 ms passes at 2; 36 ms fails at 3
    assert out["loadgen"] == {"logs": "n2"}  # the run that decided: the last passing N
    invalid = trial_of(
        {"percentile": 0.9, "p90": 5.0, "valid": False, "reason": "too few queries"}, 1, FRAME, STREAMS
    )
    assert not invalid.ok and invalid.entry["reason"] == "too few queries"


# -- the use case on records -------------------------------------------------------------------------------------
def _rec(
    backend: str, multi: dict | None = None, search_result: dict | None = None, single_p99: float = 10.0
):
    from harness.core.axes import Shape
    from harness.core.cell import Cell
    from harness.core.record import new_record

    rec = new_record("t", Cell("n", "detect", "e2e", backend, "cpu", Shape(320, 320), 1), "random-init:0")
    rec.status = "ok"
    scen: dict = {"single-stream": {"p99": single_p99, "valid": True}}
    if multi:
        scen["multi-stream"] = multi
    if search_result:
        scen["camera-capacity"] = search_result
    rec.scenarios = scen
    return rec


def _decide(*recs):
    from harness.core.results_dir import Run
    from harness.decide import registry
    from harness.decide.index import index_runs
    from harness.decide.picks import Constraints

    idx = index_runs([Run(Path("/x"), "t", {"host": {"cpu_model": "Intel(R) Xeon(R)"}}, list(recs))])
    return registry.get("camera-capacity").decide(idx, Constraints())[0]


def test_a_search_result_is_the_figure_and_the_most_cameras_win():
    many = {"fps": 30.0, "interval": [11, 12], "mechanism": "streams", "percentile": 0.9, "tried": [{}] * 7}
    few = {"fps": 30.0, "interval": [3, 4], "mechanism": "streams", "percentile": 0.9, "tried": [{}] * 4}
    out = _decide(_rec("openvino", search_result=few), _rec("onnxruntime", search_result=many))
    assert out.answer.winner.backend == "onnxruntime"
    assert (
        "11 cameras at 30 FPS by one stream per camera (passes at 11, fails at 12)"
        in out.answer.winner.figure
    )
    assert out.entry["pick"]["interval"] == [11, 12] and out.entry["pick"]["figure_source"] == "search"


def test_a_batched_search_names_its_mechanism_and_what_each_mechanism_sustained():
    both = {"streams": {"value": 2, "interval": [2, 3]}, "batched": {"value": 5, "interval": [5, 6]}}
    won = {"fps": 30.0, "interval": [5, 6], "mechanism": "batched", "percentile": 0.9, "tried": [{}] * 9}
    out = _decide(_rec("torch-eager", search_result={**won, "mechanisms": both}))
    assert "5 cameras at 30 FPS by one batched call of every camera's frame" in out.answer.winner.figure
    assert (
        "one stream per camera: 2, one batched call of every camera's frame: 5" in out.answer.winner.numbers
    )
    # the other way: the streams won, and the figure says so
    lost = {**won, "interval": [2, 3], "mechanism": "streams", "mechanisms": both}
    assert "by one stream per camera" in _decide(_rec("torch-eager", search_result=lost)).answer.winner.figure


def test_without_a_search_the_multi_stream_figures_bound_it_and_say_so():
    passed = {"streams": 2, "percentile": 0.9, "p90": 20.0, "valid": True}
    out = _decide(_rec("openvino", multi=passed))
    assert (
        "at least 2 cameras at 30 FPS (multi-stream at 2 passed; no search ran)" in out.answer.winner.figure
    )
    assert "no camera-capacity search ran" in out.answer.winner.numbers
    missed = {"streams": 8, "percentile": 0.9, "p90": 60.0, "valid": True}
    out = _decide(_rec("openvino", multi=missed, single_p99=7.0))
    assert "1–7 cameras at 30 FPS (passes at 1, fails at 8; no search ran)" in out.answer.winner.figure


def test_not_one_camera_is_a_nearest_miss_not_a_pick():
    missed = {"streams": 2, "percentile": 0.9, "p90": 90.0, "valid": True}
    out = _decide(_rec("openvino", multi=missed, single_p99=45.0))
    assert out.answer.winner is None and not out.answer.tied
    assert out.entry["pick"] is None and out.entry["nearest_miss"]["configuration"]["backend"] == "openvino"
    assert "0 cameras" not in str(out.entry)


def test_without_a_multi_stream_run_one_stream_bounds_it_at_one_camera_either_way():
    fast = _decide(_rec("openvino", single_p99=20.0))
    assert (
        "at least 1 camera at 30 FPS (one stream within the frame time; no multi-stream"
        in fast.answer.winner.figure
    )
    slow = _decide(_rec("openvino", single_p99=50.0))
    assert slow.answer.winner is None and slow.entry["nearest_miss"]["figure"] == "not one camera at 30 FPS"


# -- the first screen of the committed CPU sample and of the H100 records ----------------------------------------
DATA = Path(__file__).resolve().parent / "data" / "gpu_h100"
SAMPLE = Path(__file__).resolve().parent.parent / "results" / "samples" / "2026-11-25-cpu-2core-default"
SEARCHED_SAMPLE = SAMPLE.parent / "2026-11-26-cpu-2core-default"
STANDIN = Path(__file__).resolve().parent.parent / "weights" / "standin" / "yolo26n-detect.pt"


def _first_screen(index: Path) -> str:
    page = index.read_text()
    start = page.index('id="decision"')
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page[start : page.index("</section>", start)]))


def _capacity_entry(index: Path) -> dict:
    entries = json.loads((index.parent / "decision.json").read_text())["decisions"]
    return next(e for e in entries if e["use_case"] == "camera-capacity")


def test_the_h100_records_get_a_camera_capacity_on_the_first_screen(tmp_path):
    run = tmp_path / "h100"
    run.mkdir()
    shutil.copy(DATA / "scenarios-cudagraph-cells.jsonl", run / "cells.jsonl")
    index = render_report([run], tmp_path / "out")
    # 8 streams missed the 33.3 ms frame at p90 (34.0 ms); one stream's p99 is 9.0 ms: no search ran, so a bound
    assert "1–7 cameras at 30 FPS (passes at 1, fails at 8; no search ran)" in _first_screen(index)
    entry = _capacity_entry(index)
    assert entry["pick"]["interval"] == [1, 8] and entry["pick"]["figure_source"] == "bounded by multi-stream"


def test_the_committed_cpu_sample_gets_a_camera_capacity_on_the_first_screen(tmp_path):
    index = render_report([SAMPLE], tmp_path)
    assert "at least 2 cameras at 30 FPS (multi-stream at 2 passed; no search ran)" in _first_screen(index)
    assert _capacity_entry(index)["pick"]["interval"] == [2, None]


def test_the_committed_default_run_with_the_search_gets_its_searched_interval_on_the_first_screen(tmp_path):
    """The README's main command at 19221c7 (results/samples/2026-11-26-cpu-2core-default): the search ran."""
    index = render_report([SEARCHED_SAMPLE], tmp_path)
    assert "1 camera at 30 FPS by one stream per camera (passes at 1, fails at 2)" in _first_screen(index)
    pick = _capacity_entry(index)["pick"]
    assert pick["interval"] == [1, 2] and pick["figure_source"] == "search" and pick["mechanism"] == STREAMS


# -- the batched mechanism on a real runner ------------------------------------------------------------------------
@pytest.mark.timing  # LoadGen keeps a real clock: run under load by scripts/flaky_check.sh
@pytest.mark.skipif(loadgen.missing() is not None, reason=str(loadgen.missing()))
def test_a_torch_eager_runner_is_searched_one_stream_per_camera_and_as_one_batched_call(tmp_path):
    """PyTorch eager takes any batch, so the search also sends the N cameras' frames as one call of batch N (LoadGen
    still issues N samples per query); which mechanism wins is the machine's, so only what ran is asserted."""
    cell = Cell("n", "detect", "e2e", "torch-eager", "cpu", Shape(64, 64))
    runner = backends.get("torch-eager").load(STANDIN, cell, {})
    cfg = ScenarioConfig(threads=2)
    target = Target(streams_for(runner, cell, cfg), 2, 1, tmp_path / "loadgen", tmp_path, SHORT, 0)
    batched = batched_for(runner, cell, cfg)
    assert batched is not None
    out = camera_capacity(target, 20.0, 1.0, batched=replace(target, streams_for=batched, grouped=True))
    assert set(out["mechanisms"]) == {STREAMS, BATCHED}
    by = {m: [t for t in out["tried"] if t["mechanism"] == m] for m in (STREAMS, BATCHED)}
    assert by[STREAMS] and by[BATCHED] and out["tried"][0]["cameras"] == 1
    assert all("batch of" in t["how"] for t in by[BATCHED]) and not any(
        "batch of" in t["how"] for t in by[STREAMS]
    )
    assert (
        out["mechanism"] in (STREAMS, BATCHED)
        and out["value"] == out["mechanisms"][out["mechanism"]]["value"]
    )
    # LoadGen issued N samples per query to the one batched call
    for t in by[BATCHED]:
        detail = read_detail((tmp_path / t["loadgen"]["logs"]).parent / DETAIL)
        assert detail["effective_samples_per_query"] == t["cameras"]


def test_only_a_runner_that_takes_any_batch_gets_the_batched_mechanism():
    """The other way: the base runner (a static export's), and a cell that is batched already, get none."""

    class Fixed(Runner):
        def run(self, prepared):
            return prepared

        def outputs(self, result):
            return [result]

    cfg = ScenarioConfig()
    one = Cell("n", "detect", "e2e", "onnxruntime", "cpu", Shape(64, 64))
    assert Fixed().batched(4) is None and batched_for(Fixed(), one, cfg) is None
    eager = backends.get("torch-eager").load(STANDIN, replace(one, backend="torch-eager"), {})
    assert batched_for(eager, replace(one, backend="torch-eager"), cfg) is not None
    assert batched_for(eager, replace(one, backend="torch-eager", batch=2), cfg) is None
