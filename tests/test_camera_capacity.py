"""Camera capacity by search (harness.scenarios.capacity) on fake runners whose per-query time grows with N, and the
camera-capacity use case on records: a search's interval, a bound from multi-stream figures, a nearest miss."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from harness import backends
from harness.backends.base import SERIAL, SPLIT, Plan, Runner
from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.decide.capacity import Capacity
from harness.report import render_report
from harness.scenarios import ScenarioConfig, batched_for, loadgen, streams_for, ways_for
from harness.scenarios.capacity import BATCHED, STREAMS, Trial, Way, camera_capacity, search, trial_of
from harness.scenarios.logs import DETAIL, read_detail
from harness.scenarios.results import Target
from harness.scenarios.settings import SHORT

FPS = 30.0
FRAME = 1000.0 / FPS
BUDGET = 2  # the fake machine's thread budget


class FakeClock:
    """The seconds a fake run costs: what LoadGen's MultiStream would take (64 queries, at least 1 s), doubled per
    durations level."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def way(key, per_query_ms, clock: FakeClock | None = None, width=lambda n, level: 0.2, valid=lambda n: True,
        plan=None):  # fmt: skip
    """A mechanism whose LoadGen run at n cameras has the per-query p90 `per_query_ms(n)` and an interval of
    half-width `width(n, level)` around it (the early-stopping bound above, the 1% order statistic below)."""
    calls: list[tuple[int, int]] = []

    def at(n: int, level: int) -> Trial:
        calls.append((n, level))
        w = width(n, level)
        ms = per_query_ms(n)
        result = {"percentile": 0.9, "p90": ms, "p90_guaranteed": ms + w, "p90_interval": [ms - w, ms + w],
                  "valid": valid(n), "queries": 64 * 2**level, "mechanism": f"{key} at {n}"}  # fmt: skip
        if clock is not None:
            clock.t += max(1.0, 64 * ms / 1000.0) * 2**level
        return trial_of(result, n, FRAME, key, level)

    plans = plan or (lambda n: Plan(n, BUDGET, 1, words=f"{key} x{n}"))
    w = Way(key, f"{key} in words", at, plans)
    object.__setattr__(w, "calls", calls)  # the runs it was asked for, (n, level)
    return w


def serial(call_ms):
    return way(
        SERIAL, lambda n: call_ms * n, plan=lambda n: Plan(1, BUDGET, 1, words="one worker, frames in turn")
    )


def streams(call_ms, contention=1.3):
    """N calls at once, each with the whole budget: they share the cores and fight over them."""
    return way(STREAMS, lambda n: call_ms * n * (contention if n > 1 else 1.0),
               plan=lambda n: Plan(n, BUDGET, 1, words=f"{n} concurrent calls"))  # fmt: skip


def split_way(call_ms, one_thread_ms):
    """min(N, budget) workers of budget/k threads: a worker takes ceil(N/k) frames at the k-thread call's cost."""

    def per_query(n):
        k = min(n, BUDGET)
        return math.ceil(n / k) * (call_ms if k == 1 else one_thread_ms)

    def plan(n):
        k = min(n, BUDGET)
        return Plan(
            k, BUDGET // k, k, words=f"{k} sessions x {BUDGET // k} thread" if k > 1 else "one worker"
        )

    return way(SPLIT, per_query, plan=plan)


def batched(fixed_ms, per_frame_ms):
    return way(BATCHED, lambda n: fixed_ms + per_frame_ms * n,
               plan=lambda n: Plan(1, BUDGET, 1, n, f"one call of batch {n}"))  # fmt: skip


def run(*ways, **kw):
    return search(list(ways), FPS, 0.9, **kw)


@pytest.mark.parametrize("per_camera_ms", [1.0, 2.3, 4.0, 7.0, 11.0, 16.0])
def test_the_search_finds_the_largest_n_within_one_step(per_camera_ms):
    out = run(serial(per_camera_ms))
    truth = math.floor(FRAME / per_camera_ms)  # the largest n with n x per_camera_ms within the frame
    assert out["value"] == truth and out["interval"] == [truth, truth + 1] and out["decided"] is True
    assert all(t["ok"] == (t["cameras"] <= truth) for t in out["tried"])


def test_the_search_doubles_then_bisects():
    w = serial(3.0)  # 11 cameras pass, 12 fail
    run(w)
    assert [n for n, _ in w.calls][:5] == [1, 2, 4, 8, 16] and [n for n, _ in w.calls][5:8] == [12, 10, 11]


def test_serial_wins_where_a_call_uses_every_core():
    """A call that scales with every core: N concurrent calls only fight over them, and a 1-thread call costs the
    budget's times more; one worker taking the frames in turn serves the most, and the answer names it."""
    out = run(serial(7.0), streams(7.0), split_way(7.0, 17.5), batched(7.0, 7.0))
    assert out["mechanism"] == SERIAL and out["value"] == 4 and out["interval"] == [4, 5]
    assert out["deploy"] == "one worker, frames in turn" and out["configuration"]["workers"] == 1
    assert out["mechanisms"][STREAMS]["value"] < 4 and out["mechanisms"][SPLIT]["value"] < 4


def test_split_streams_win_where_calls_scale_badly_with_threads():
    """A call that barely speeds up with a second thread (8 ms on 2 threads, 9.6 ms on 1): two workers of one
    thread each serve 6 cameras where one worker of two serves 4."""
    out = run(serial(8.0), streams(8.0), split_way(8.0, 9.6))
    assert out["mechanism"] == SPLIT and out["value"] == 6 and out["interval"] == [6, 7]
    assert out["deploy"] == "2 sessions x 1 thread" and out["configuration"]["instances"] == 2
    assert out["mechanisms"][SERIAL]["value"] == 4


def test_batched_wins_where_one_call_of_n_is_cheaper():
    out = run(serial(4.0), streams(4.0), batched(5.0, 1.0))  # n calls: 8 cameras; one call of n: 28
    assert out["mechanism"] == BATCHED and out["value"] == 28 and out["interval"] == [28, 29]
    assert out["deploy"] == "one call of batch 28" and out["mechanisms"][SERIAL]["value"] == 8


def test_a_tie_goes_to_the_simplest_mechanism_and_says_which_tied():
    out = run(streams(4.0, contention=1.0), serial(4.0))  # the same cost either way: 8 cameras
    assert out["mechanism"] == SERIAL and out["value"] == 8
    assert out["tied_mechanisms"] == [STREAMS] or out["mechanisms"][STREAMS]["value"] == 8


def test_one_worker_at_one_camera_runs_once_for_every_mechanism_that_deploys_it():
    s, t = serial(5.0), streams(5.0)
    out = run(s, t)
    assert (1, 0) in s.calls and (1, 0) not in t.calls  # the streams' one camera is the serial run
    shared = [e for e in out["tried"] if e.get("same_run_as")]
    assert shared and shared[0]["mechanism"] == STREAMS and shared[0]["same_run_as"] == SERIAL


def test_a_mechanism_that_does_not_apply_is_recorded_with_why():
    out = run(serial(5.0), Way(BATCHED, "one call of batch N", None, None, "a static batch-1 export"))
    assert out["mechanisms"][BATCHED] == {
        "words": "one call of batch N", "applies": False, "why_not": "a static batch-1 export", "value": None,
    }  # fmt: skip


def test_an_open_bound_is_repeated_at_longer_durations_until_it_is_decided():
    """At 4 cameras the p90 (31 ms) is within the frame time but LoadGen's early-stopping bound (35 ms) is not:
    repeated at twice the queries its bound tightens (32.5 ms) and the run decides; the answer is decided."""
    w = way(SERIAL, lambda n: 7.75 * n, width=lambda n, level: 4.0 / 2**level)  # 4 cameras: 31 ms; 5: 38.75
    out = run(w)
    assert out["value"] == 4 and out["decided"] is True and out.get("possibly") is None
    repeats = [e for e in out["tried"] if e["level"] > 0]
    assert repeats and {e["cameras"] for e in repeats} == {4} and (4, 1) in w.calls
    assert out["bound"]["passes"]["verdict"] == "pass" and out["bound"]["passes"]["level"] >= 1


def test_an_undecided_bound_is_reported_as_undecided():
    """At 5 cameras the p90 (34 ms) misses the frame time by less than any repeat can resolve: the answer is 4,
    possibly 5, undecided at this duration, never a side picked by one short run."""
    per = {1: 6.0, 2: 12.0, 3: 18.0, 4: 24.0, 5: 34.0, 6: 44.0, 8: 60.0}
    w = way(SERIAL, lambda n: per.get(n, 10.0 * n), width=lambda n, level: 3.0 if n == 5 else 1.0)
    out = run(w)
    assert out["value"] == 4 and out["possibly"] == 5 and out["decided"] is False
    assert out["interval"] == [4, 5] and "undecided at this duration" in out["undecided"]
    assert [lvl for n, lvl in w.calls if n == 5] == [0, 1, 2]  # repeated up to x4 the queries
    cap = Capacity(4, 5, "search", "", SERIAL, possibly=5, deploy="one worker, frames in turn")
    assert cap.text(FPS) == (
        "4 cameras, possibly 5, at 30 FPS by one worker, frames in turn (passes at 4; 5 undecided at this duration)"
    )


def test_a_last_passing_count_that_fails_on_evidence_moves_the_bound_down():
    """The point estimate at 4 cameras passes (32 ms) but a longer run puts even its lower bound over the frame
    time: the answer is 3, and says the bound moved."""
    state = {"long": False}

    def per(n):
        return 7.0 * n if n != 4 else (32.0 if not state["long"] else 36.0)

    def width(n, level):
        if n == 4 and level >= 1:
            state["long"] = True
            return 1.0
        return 3.0 if n == 4 else 1.0

    out = run(way(SERIAL, per, width=width))
    assert out["value"] == 3 and out["interval"][0] == 3 and out["decided"] is True
    assert any("moves down" in m for m in out["bound"].get("moves", []))


def test_the_search_spends_at_most_its_budgets_and_says_what_it_cost():
    clock = FakeClock()
    ways = [way(k, lambda n: 2.0 * n, clock, width=lambda n, level: 5.0) for k in (SERIAL, STREAMS, SPLIT)]
    out = run(*ways, clock=clock, screen_budget_s=10.0, bound_budget_s=4.0)
    cost = out["cost"]
    # a run under way finishes: the screen and the bisection stop at most one run over theirs
    assert cost["screen_s"] + cost["bisect_s"] <= 10.0 + 4.3 and cost["bound_s"] <= 4.0
    assert cost["seconds"] == pytest.approx(clock.t) and cost["runs"] == len(
        [e for e in out["tried"] if not e.get("same_run_as")]
    )
    assert "stopped" in cost


def test_a_runner_that_misses_at_one_camera_gives_a_nearest_miss_never_zero_cameras():
    out = run(serial(40.0), streams(40.0))
    assert out["value"] is None and out["valid"] is False and out["interval"] == [None, 1]
    assert out["nearest_miss"]["cameras"] == 1 and "even one camera fails" in out["reason"]
    # and the other way: a runner within the frame at one camera is answered
    assert run(serial(20.0))["value"] == 1


def test_an_invalid_loadgen_verdict_fails_the_n_whatever_its_latency():
    out = run(way(SERIAL, lambda n: 1.0 * n, valid=lambda n: n < 6))
    assert out["interval"][1] == 6 and out["value"] <= 5


def test_a_multi_stream_result_is_judged_at_its_percentile_with_its_verdict_and_keeps_its_logs():
    def result(n: int) -> dict:
        p90 = 12.0 * n
        return {"percentile": 0.9, "p90": p90, "p90_guaranteed": p90 + 1, "p90_interval": [p90 - 1, p90 + 1],
                "p99": p90 + 9, "valid": True, "loadgen": {"logs": f"n{n}"}}  # fmt: skip

    out = run(Way(STREAMS, "one stream per camera", lambda n, lvl: trial_of(result(n), n, FRAME, STREAMS, lvl),
                  lambda n: Plan(n, 2, 1, words=f"{n} streams")))  # fmt: skip
    assert out["value"] == 2 and out["interval"] == [2, 3]  # p90 24 ms passes at 2; 36 ms fails at 3
    assert out["loadgen"] == {"logs": "n2"}  # the run that decided: the last passing N
    invalid = trial_of(
        {"percentile": 0.9, "p90": 5.0, "valid": False, "reason": "too few queries"}, 1, FRAME, STREAMS
    )
    assert not invalid.ok and invalid.entry["reason"] == "too few queries" and invalid.verdict == "undecided"


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
        "by mechanism: one stream per camera: 2; one batched call of every camera's frame: 5"
        in out.answer.winner.numbers
    )
    # the other way: the streams won, and the figure says so
    lost = {**won, "interval": [2, 3], "mechanism": "streams", "mechanisms": both}
    assert "by one stream per camera" in _decide(_rec("torch-eager", search_result=lost)).answer.winner.figure
    # each mechanism's deployment beside its answer, said once where its words already name the mechanism
    said = {
        "serial": {"value": 4, "interval": [4, 5], "deploy": "one worker, frames in turn, 2 threads"},
        "split": {"value": 6, "interval": [6, 7], "deploy": "2 InferenceSessions x 1 thread"},
    }
    split = {**won, "interval": [6, 7], "mechanism": "split", "deploy": "2 InferenceSessions x 1 thread",
             "mechanisms": said}  # fmt: skip
    winner = _decide(_rec("onnxruntime", search_result=split)).answer.winner
    assert "6 cameras at 30 FPS by 2 InferenceSessions x 1 thread (passes at 6, fails at 7)" in winner.figure
    assert (
        "by mechanism: one worker, frames in turn, 2 threads: 4; "
        "the thread budget split between workers: 6 (2 InferenceSessions x 1 thread)" in winner.numbers
    )


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
    """Two answers: the most accurate configuration serving one camera (openvino yolo26n 640, published COCO; only
    one stream ran for it), and the most cameras (multi-stream at 2 passed at 320, accuracy not known)."""
    index = render_report([SAMPLE], tmp_path)
    screen = _first_screen(index)
    assert (
        "most cameras: onnxruntime yolo26n 320 fp32 (at least 2 cameras at 30 FPS (multi-stream at 2"
        in screen
    )
    entry = _capacity_entry(index)
    assert entry["most_cameras"]["interval"] == [2, None]
    assert entry["pick"]["interval"] == [1, None] and entry["pick"]["accuracy_source"].startswith("published")
    assert (
        entry["pick"]["configuration"]["shape"] == "640"
        and "320 instead of 640" in entry["most_cameras_gives_up"]
    )


def test_the_committed_default_run_with_the_search_gets_its_searched_interval_on_the_first_screen(tmp_path):
    """The README's main command at 19221c7 (results/samples/2026-11-26-cpu-2core-default): the search ran."""
    index = render_report([SEARCHED_SAMPLE], tmp_path)
    assert "1 camera at 30 FPS by one stream per camera (passes at 1, fails at 2)" in _first_screen(index)
    pick = _capacity_entry(index)["pick"]
    assert pick["interval"] == [1, 2] and pick["figure_source"] == "search" and pick["mechanism"] == STREAMS


# -- the mechanisms on a real runner -------------------------------------------------------------------------------
@pytest.mark.timing  # LoadGen keeps a real clock: run under load by scripts/flaky_check.sh
@pytest.mark.skipif(loadgen.missing() is not None, reason=str(loadgen.missing()))
def test_a_torch_eager_runner_is_searched_by_every_mechanism_it_declares(tmp_path):
    """PyTorch eager declares one worker taking the frames in turn, one stream per camera and, since it takes any
    batch, one call of batch N (LoadGen still issues N samples per query); one camera is one run for all three.
    Which mechanism wins is the machine's, so only what ran is asserted."""
    cell = Cell("n", "detect", "e2e", "torch-eager", "cpu", Shape(64, 64))
    runner = backends.get("torch-eager").load(STANDIN, cell, {})
    cfg = ScenarioConfig(threads=2, camera_fps=50.0)
    target = Target(streams_for(runner, cell, cfg), 2, 1, tmp_path / "loadgen", tmp_path, SHORT, 0)
    ways = ways_for(runner, cell, cfg, target, 1.0)
    assert [w.key for w in ways] == [SERIAL, STREAMS, BATCHED] and all(w.at is not None for w in ways)
    out = camera_capacity(target, 50.0, 1.0, ways, screen_budget_s=8.0, bound_budget_s=2.0)
    assert set(out["mechanisms"]) == {SERIAL, STREAMS, BATCHED}
    assert out["cost"]["seconds"] <= 8.0 + 2.0 + 5.0  # a run under way finishes
    by = {m: [t for t in out["tried"] if t["mechanism"] == m and t["cameras"] > 1] for m in out["mechanisms"]}
    ones = [t for t in out["tried"] if t["cameras"] == 1]
    assert len([t for t in ones if not t.get("same_run_as")]) == 1  # one worker at one camera: one run
    assert all("batch of" in t["how"] for t in by[BATCHED]) and not any(
        "batch of" in t["how"] for t in by[SERIAL]
    )
    assert all("in turn" in t["how"] for t in by[SERIAL])
    if out["value"]:
        assert out["deploy"] and out["value"] == out["mechanisms"][out["mechanism"]]["value"]
    # LoadGen issued N samples per query to the one batched call, and to the one worker
    for t in by[BATCHED] + by[SERIAL]:
        detail = read_detail((tmp_path / t["loadgen"]["logs"]).parent / DETAIL)
        assert detail["effective_samples_per_query"] == t["cameras"]


def test_every_runner_declares_one_worker_and_says_why_a_mechanism_does_not_apply():
    """The base runner (a static export's, not safe from several threads) declares one worker taking the frames in
    turn; the stream per camera does not apply (its calls are serialised by a lock) nor the batched call."""

    class Fixed(Runner):
        def run(self, prepared):
            return prepared

        def outputs(self, result):
            return [result]

    ms = {m.key: m for m in Fixed().mechanisms(2)}
    assert set(ms) == {SERIAL, STREAMS, BATCHED}
    assert ms[SERIAL].make is not None and ms[SERIAL].plan(3).words == "one worker, frames in turn, 2 threads"
    one = ms[SERIAL].make(3)
    assert len(one.calls) == 1 and one.calls[0]("x") == "x" and one.plan.workers == 1
    assert ms[STREAMS].make is None and "serialised by a lock" in ms[STREAMS].why_not
    assert ms[BATCHED].make is None and "static" in ms[BATCHED].why_not


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


# -- the backends' own mechanisms on real runners (yolo26n at 160, exported through the session's cache) -----------
@pytest.mark.slow
@pytest.mark.export
@pytest.mark.parametrize(
    "backend, words",
    [
        ("onnxruntime", "2 InferenceSessions x 1 thread"),
        ("openvino", "OpenVINO 2 streams x 1 thread"),
        ("executorch-xnnpack", "2 method instances on one 2-thread pool"),
    ],
)
def test_a_backends_split_mechanism_runs_the_model_as_its_plan_says(cache_dir, backend, words):
    """Each declared mechanism's calls give the loaded runner's outputs, at once from their worker threads; the plan
    says what a user deploys (sessions, compiled streams, method instances, with their thread counts)."""
    import threading

    import numpy as np

    from harness import threads
    from harness.backends.base import INSTANCES
    from tests.conftest import shared_export

    be = backends.get(backend)
    why = be.probe("cpu")
    if why:
        pytest.skip(why)
    cell = Cell("n", "detect", "e2e", backend, "cpu", Shape(160, 160))
    exported = shared_export(cache_dir, backend, Shape(160, 160))
    saved = os.environ.get(threads.ENV)
    os.environ[threads.ENV] = "2"
    try:
        runner = be.load(Path(exported.artifact), cell, exported.info)
    finally:
        if saved is None:
            os.environ.pop(threads.ENV, None)
        else:
            os.environ[threads.ENV] = saved
    ms = {m.key: m for m in runner.mechanisms(2)}
    key = INSTANCES if backend == "executorch-xnnpack" else SPLIT
    assert ms[key].make is not None, ms[key].why_not
    assert ms[key].plan(2).words == words and ms[key].plan(1).words == "one worker, frames in turn, 2 threads"
    x = runner.prepare(np.random.default_rng(0).random((1, 3, 160, 160), dtype=np.float32))
    want = runner.outputs(runner.run(x))
    streams = ms[key].make(3)  # 3 cameras: 2 workers
    assert len(streams.calls) == 2 and streams.plan is not None and streams.plan.instances == 2
    got: list = [None, None]

    def work(i: int) -> None:
        got[i] = [runner.outputs(streams.calls[i](x)) for _ in range(3)][-1]

    ts = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for outs in got:
        assert len(outs) == len(want)
        for a, b in zip(outs, want, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-3)
    if backend == "executorch-xnnpack":
        assert "budget cannot be split" in ms[SPLIT].why_not
    runner.close()
