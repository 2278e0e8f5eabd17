"""An interruption (SIGINT, SIGTERM) during the use-case scenarios: LoadGen's test in progress ends early and whole
(its system under test stops working, its threads end before its objects go), its directory is marked incomplete
and never read as a result, no further test or search step starts, and the run ends as interrupted (exit status 2,
env.json's `incomplete`), never with a native crash.

Before the fix, a suite run sent SIGINT or SIGTERM once "scenarios through MLPerf" was logged died of a segmentation
fault in a `sut-stream` thread (exit 139) or of LoadGen's log writer's std::__ios_failure (exit 134): the handler's
KeyboardInterrupt unwound through LoadGen's issue callback and the SUT and QSL were destroyed under running threads.

Two levels: LoadGen's tests in this process with a sleep as the query and real signals (harness.execute.interrupt's
handler), and suite runs that send themselves the signal from inside a scenario (tests/interrupt_after.py).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from harness.backends.base import Plan
from harness.execute import interrupt
from harness.scenarios import camera, capacity, loadgen
from harness.scenarios import server as sv
from harness.scenarios import settings as st
from harness.scenarios.logs import (
    DETAIL,
    INCOMPLETE,
    SUMMARY,
    LoadgenLogError,
    LoadgenRun,
    incomplete,
    read_run,
)
from harness.scenarios.results import Target, multi_stream, offline_run, single_stream
from tests.reliability_helpers import child_env, suite

pytestmark = pytest.mark.skipif(loadgen.missing() is not None, reason=str(loadgen.missing()))

SIGNALS = ("SIGINT", "SIGTERM")
QUERY_S = 0.005
STREAMS = 2


class Stop:
    """A stop that a test sets (no signal): harness.scenarios.loadgen.Stop."""

    def __init__(self) -> None:
        self.name: str | None = None

    def received(self) -> str | None:
        return self.name

    def check(self) -> None:
        if self.name is not None:
            raise KeyboardInterrupt(f"interrupted by {self.name}")

    def deferred(self):
        import contextlib

        return contextlib.nullcontext()


def _target(tmp_path: Path, query, durations: st.Durations = st.SHORT) -> Target:
    return Target(
        lambda n: ([query] * n, "sleep"), 2, 1, tmp_path / "loadgen" / "cell", tmp_path, durations, 0
    )


class Signaller:
    """A sleep as the query that sends `sig` to this process from its `at`-th call (a worker thread, as a Ctrl-C
    comes from outside, at any moment); notes when the handler ran and when each query started."""

    def __init__(self, sig: str | None, at: int) -> None:
        self.sig, self.at = sig, at
        self.starts: list[float] = []
        self.sent: float | None = None
        self.handled: float | None = None
        self._lock = threading.Lock()

    def on_signal(self) -> None:
        self.handled = time.perf_counter()

    def __call__(self, _i) -> None:
        with self._lock:
            self.starts.append(time.perf_counter())
            send = len(self.starts) == self.at and self.sig is not None
        if send:
            self.sent = time.perf_counter()
            os.kill(os.getpid(), getattr(signal, self.sig))
        time.sleep(QUERY_S)


def _scenario(kind: str, target: Target) -> None:
    """Run LoadGen's `kind` test as the harness runs it (`_dir_of`: where it logs)."""
    if kind == st.SINGLE_STREAM:
        single_stream(target, expected_ms=QUERY_S * 500)
    elif kind == st.MULTI_STREAM:
        multi_stream(target, STREAMS, expected_ms=QUERY_S * 500)
    elif kind == st.OFFLINE:
        offline_run(target, STREAMS, 400.0, "c2-r1")
    else:
        sv.server_step(target, STREAMS, 100.0, 100.0, QUERY_S * 500)


def _dir_of(kind: str, target: Target) -> Path:
    return {
        st.SINGLE_STREAM: target.log_dir / st.SINGLE_STREAM,
        st.MULTI_STREAM: target.log_dir / st.MULTI_STREAM,
        st.OFFLINE: target.log_dir / st.OFFLINE / "c2-r1",
        st.SERVER: target.log_dir / st.SERVER / "rate-100",
    }[kind]


# -- LoadGen's tests in this process, real signals -----------------------------------------------------------------
@pytest.mark.process
@pytest.mark.timing
@pytest.mark.parametrize("sig", SIGNALS)
@pytest.mark.parametrize("kind", st.LOADGEN_SCENARIOS)
def test_a_signal_during_a_loadgen_test_ends_it_early_marked_incomplete(tmp_path, handlers, kind, sig):
    """The signal comes from a worker while queries run; the handler notes it (deferred), the SUT stops running
    queries, LoadGen ends within its scenario's rest (Server: the rest of its 1 s schedule), the directory is marked
    and the interruption raised; no result is returned or readable."""
    query = Signaller(sig, at=1 if kind == st.OFFLINE else 5)
    interrupt.install(on_signal=query.on_signal)
    target = _target(tmp_path, query)
    with loadgen.stopping(interrupt), pytest.raises(KeyboardInterrupt, match=f"interrupted by {sig}"):
        _scenario(kind, target)
    ended = time.perf_counter()
    assert query.sent is not None and query.handled is not None, "the signal was sent and handled"
    assert query.handled - query.sent < 1.0, "handled at once, not when LoadGen's test ended"
    # LoadGen ended soon: Server runs out its schedule (SHORT: 1 s), the others end at once
    rest = st.SHORT.server_ms / 1000 if kind == st.SERVER else 0.0
    assert ended - query.handled < rest + 2.0, ended - query.handled
    # no query started once the stop was noted, but the one each stream had in hand
    late = [t for t in query.starts if t > query.handled]
    assert len(late) <= STREAMS, f"{len(late)} queries started after the signal was handled"
    where = _dir_of(kind, target)
    assert (where / SUMMARY).is_file(), "LoadGen ended its test and wrote its logs"
    assert incomplete(where) == f"interrupted by {sig}"
    marker = json.loads((where / INCOMPLETE).read_text())
    assert marker["scenario"] == kind and marker["samples_not_run"] >= 0
    with pytest.raises(LoadgenLogError, match="incomplete"):
        read_run(kind, where)
    # and nothing starts after: the next test is refused before LoadGen starts
    with loadgen.stopping(interrupt), pytest.raises(KeyboardInterrupt):
        _scenario(kind, _target(tmp_path / "next", Signaller(None, 0)))
    assert not (tmp_path / "next").exists()


@pytest.mark.process
@pytest.mark.timing
def test_an_interruption_raised_while_waiting_still_lets_loadgen_end(tmp_path, handlers):
    """Without the deferral (a handler that raises, as Python's default SIGINT handler): the KeyboardInterrupt comes
    in the thread that waits for LoadGen, never inside LoadGen; the SUT stops, LoadGen ends, then it is raised."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    query = Signaller("SIGINT", at=5)
    target = _target(tmp_path, query)
    with pytest.raises(KeyboardInterrupt):
        single_stream(target, expected_ms=QUERY_S * 500)
    where = target.log_dir / st.SINGLE_STREAM
    assert (where / SUMMARY).is_file() and "KeyboardInterrupt" in (incomplete(where) or "")


@pytest.mark.timing
def test_a_stopped_server_test_at_long_durations_ends_within_seconds(tmp_path):
    """A Server test issues on its schedule until its min duration whatever the SUT does; at long durations each
    test is capped in outstanding queries (server_max_async_queries), so once stopped the SUT holds its samples past
    the cap and LoadGen ends the schedule early: a 30 s test ends about a second after the stop."""
    d = dataclasses.replace(st.SHORT, server_ms=30_000, server_percentile=0.99)
    stop = Stop()
    calls = []

    def query(_i) -> None:
        calls.append(1)
        if len(calls) == 20:
            stop.name = "SIGTERM"
        time.sleep(QUERY_S)

    target = _target(tmp_path, query, d)
    cap = sv.outstanding_cap(d, 100.0, 100.0, STREAMS)
    assert cap == 30 + 30 + STREAMS + 8  # 1% of 3000 queries, 3 bounds of arrivals, the streams, 8
    t0 = time.perf_counter()
    with loadgen.stopping(stop), pytest.raises(KeyboardInterrupt, match="SIGTERM"):
        sv.server_step(target, STREAMS, 100.0, 100.0, QUERY_S * 500)
    assert time.perf_counter() - t0 < 10.0, "ended long before its 30 s schedule"
    where = target.log_dir / st.SERVER / "rate-100"
    detail = (where / DETAIL).read_text()
    assert f'"effective_max_async_queries", "value": {cap},' in detail
    assert "Too many outstanding queries" in detail
    assert incomplete(where) == "interrupted by SIGTERM"


@pytest.mark.timing
def test_the_outstanding_cap_ends_an_overloaded_long_server_test_early_and_invalid(tmp_path):
    """The other way: not stopped, the cap changes no verdict. A rate twice what the one stream serves fails the
    bound whatever; capped, its queue passes the cap within a second and LoadGen ends it early, INVALID. And the
    short durations set no cap at all (MLPerf's own Server runs have none)."""
    assert sv.outstanding_cap(st.SHORT, 100.0, 100.0, 2) == 0
    assert sv.outstanding_cap(st.MLPERF, 100.0, 100.0, 2) == 600 + 30 + 2 + 8
    d = dataclasses.replace(st.SHORT, server_ms=30_000, server_percentile=0.99)

    def query(_i) -> None:
        time.sleep(QUERY_S)

    t0 = time.perf_counter()
    step = sv.server_step(_target(tmp_path, query, d), 1, 400.0, 20.0, QUERY_S * 500)
    assert time.perf_counter() - t0 < 15.0, "ended long before its 30 s schedule"
    assert step.valid is False and step.entry["result"] == "INVALID", step.entry
    assert "Too many outstanding queries" in (tmp_path / step.entry["logs"]).with_name(DETAIL).read_text()


# -- the searches and the scenarios after a cut test do not start ------------------------------------------------
def test_no_search_step_starts_once_the_run_was_told_to_stop():
    stop = Stop()
    tried: list[float] = []

    def at(n, level):
        tried.append(n)
        stop.name = "SIGINT"
        return capacity.Trial(n, True, {"cameras": n, "mechanism": "serial"})

    def way(at):
        return capacity.Way("serial", "one worker", at, lambda n: Plan(1, 2, 1))

    with loadgen.stopping(stop), pytest.raises(KeyboardInterrupt, match="SIGINT"):
        capacity.search([way(at)], 30.0, 0.9)
    assert tried == [1]
    tried.clear()

    def at_rate(rate):
        tried.append(rate)
        stop.name = "SIGTERM"
        return sv.Step(rate, True, {"rate": rate})

    stop.name = None
    with loadgen.stopping(stop), pytest.raises(KeyboardInterrupt, match="SIGTERM"):
        sv.search(at_rate, 10.0, 8)
    assert tried == [10.0]
    # outside a run nothing stops a search (the other way)
    stop.name = None
    out = capacity.search(
        [way(lambda n, lvl: capacity.Trial(n, n <= 4, {"cameras": n, "mechanism": "serial"}, "pass" if n <= 4
                                           else "fail"))], 30.0, 0.9,
    )  # fmt: skip
    assert out["value"] == 4 and len(out["tried"]) > 1


def test_no_offline_round_starts_once_the_run_was_told_to_stop(tmp_path, monkeypatch):
    """The signal noted after a round's test ended whole (while its logs were read): the next round does not start."""
    stop = Stop()
    rounds: list[str] = []

    signal_after: list[str] = ["SIGINT"]

    def one_round(target, streams, expected_qps, name):
        rounds.append(name)
        stop.name = signal_after[0] if signal_after else None
        detail = {"result_validity": "VALID", "result_samples_per_second": 100.0}
        return LoadgenRun(st.OFFLINE, tmp_path / name, detail), "sleep"

    monkeypatch.setattr(sv, "offline_run", one_round)
    with loadgen.stopping(stop), pytest.raises(KeyboardInterrupt, match="SIGINT"):
        sv.offline_sweep(_target(tmp_path, None), (1, 2, 4), 100.0, 2)
    assert rounds == ["c1-r1"]
    signal_after.clear()  # the other way: not stopped, every round runs
    rounds.clear()
    stop.name = None
    with loadgen.stopping(stop):
        sv.offline_sweep(_target(tmp_path, None), (1, 2, 4), 100.0, 2, rounds=1)
    assert rounds == ["c1-r1", "c2-r1", "c4-r1"]


def test_the_camera_check_stops_between_frames():
    frames = []

    def check() -> None:
        if len(frames) >= 3:
            raise KeyboardInterrupt("interrupted by SIGTERM")

    with pytest.raises(KeyboardInterrupt):
        camera.camera_run(lambda: frames.append(1), 1000, 100, check=check)
    assert len(frames) == 3


def test_a_marked_directory_is_no_result_and_a_new_test_there_starts_afresh(tmp_path):
    """--resume runs a cell again into the same directories: the earlier cut test's marker goes when the new test
    starts, and its whole run is read."""
    target = _target(tmp_path, lambda _i: time.sleep(QUERY_S))
    res = single_stream(target, expected_ms=QUERY_S * 500)
    where = target.log_dir / st.SINGLE_STREAM
    assert res["valid"] is True and read_run(st.SINGLE_STREAM, where).valid
    (where / INCOMPLETE).write_text(json.dumps({"reason": "interrupted by SIGINT"}))
    with pytest.raises(LoadgenLogError, match=r"incomplete \(interrupted by SIGINT\): not a result"):
        read_run(st.SINGLE_STREAM, where)
    assert single_stream(target, expected_ms=QUERY_S * 500)["valid"] is True
    assert not (where / INCOMPLETE).exists()


# -- suite runs: the signal sent from inside each scenario (tests/interrupt_after.py) -----------------------------
#: the scenarios' LoadGen directories under loadgen/<cell>/, in the order the harness runs them
ORDER = ("single-stream", "multi-stream", "camera-capacity", "offline", "server")
#: moment -> the directory of the LoadGen test the signal cuts (None: the camera check, after every LoadGen test)
CUT = {
    "scenario:single-stream": "single-stream",
    "scenario:multi-stream": "multi-stream",
    "search": "camera-capacity/serial-1/multi-stream",
    "scenario:offline": "offline/c1-r1",
    "scenario:server": None,  # server/rate-<the start rate>
    "camera": None,
}
MOMENTS = [
    pytest.param(sig, at, id=f"{sig}-{at}")
    for at in CUT
    for sig in (SIGNALS if at != "camera" else ("SIGTERM",))
]


def _cells(results: Path, cache: Path) -> list[str]:
    """One yolo26n ONNX Runtime CPU cell at 160 with every scenario; no timing phase, accuracy or end-to-end pairs."""
    return [
        "--sizes", "n", "--tasks", "detect", "--heads", "e2e", "--backends", "onnxruntime", "--devices", "cpu",
        "--shapes", "160", "--precisions", "fp32", "--scenarios", "all", "--no-accuracy", "--no-e2e",
        "--rounds", "3", "--warmup", "1", "--no-canary", "--results-dir", str(results), "--cache-dir", str(cache),
        "--run-id", "cut", "--no-report", "--no-history",
    ]  # fmt: skip


@pytest.fixture(scope="module")
def cut_cache(cache_dir, tmp_path_factory) -> Path:
    """The cut runs' cache: the session's exports (a link to its exports/, so nothing is exported again) with a
    memory cache of this module's own. A cut run measures the cell's host memory before its scenarios and keeps it
    under <cache>/memory/; in the session's cache another module's run of the same cell (tests/test_runner.py's
    second run, which compares it with its first) would read this module's measurement as its own."""
    own = tmp_path_factory.mktemp("cut-cache")
    (cache_dir / "exports").mkdir(parents=True, exist_ok=True)
    (own / "exports").symlink_to(cache_dir / "exports", target_is_directory=True)
    return own


@pytest.mark.process
@pytest.mark.slow
@pytest.mark.parametrize(("sig", "at"), MOMENTS)
def test_a_signal_inside_a_scenario_ends_the_run_as_interrupted(tmp_path, cache_dir, cut_cache, sig, at):
    started = time.time()
    env = child_env(YOLO26_TEST_INTERRUPT=sig, YOLO26_TEST_INTERRUPT_AT=at, YOLO26_TEST_TINY_SCENARIOS="1")
    p = suite("-p", "tests.interrupt_after", *_cells(tmp_path, cut_cache), env=env)
    out = p.stdout + p.stderr
    for crash in ("Fatal Python error", "Segmentation fault", "terminate called", "Aborted"):
        assert crash not in out, out[-4000:]
    assert p.returncode == 2, out[-4000:]
    run = tmp_path / "cut"
    assert json.loads((run / "env.json").read_text())["incomplete"] == {
        "reason": f"interrupted by {sig}",
        "cells_recorded": 0,
        "cells_planned": 1,
    }
    assert f"run cut is incomplete: 0 of 1 cells (interrupted by {sig})" in p.stdout, out[-4000:]
    records = (run / "cells.jsonl").read_text().splitlines() if (run / "cells.jsonl").exists() else []
    assert records == [], "the cut cell has no record: none claims a scenario result"
    # its host memory, measured before the scenarios, is in this module's memory cache, not the session's
    assert any("measured by run cut" in f.read_text() for f in (cut_cache / "memory").glob("*.json"))
    assert not [
        f for f in (cache_dir / "memory").glob("*.json")
        if f.stat().st_mtime >= started and "measured by run cut" in f.read_text()
    ]  # fmt: skip
    [cell] = (run / "loadgen").iterdir()
    tests = sorted(d.parent.relative_to(cell).as_posix() for d in cell.rglob(SUMMARY))
    marked = sorted(d.parent.relative_to(cell).as_posix() for d in cell.rglob(INCOMPLETE))
    cut = CUT[at] or (next(t for t in tests if t.startswith("server/")) if at == "scenario:server" else None)
    if cut is None:  # the camera check: every LoadGen test ran whole before it
        assert marked == [] and {t.split("/")[0] for t in tests} == set(ORDER), tests
        return
    assert marked == [cut], f"marked {marked}, LoadGen tests {tests}"
    assert incomplete(cell / cut) == f"interrupted by {sig}"
    # the cut test was the last: no later step of its search and no later scenario started
    kind = cut.split("/")[0]
    assert [t for t in tests if t.split("/")[0] == kind] == [cut], tests
    assert not [t for t in tests if ORDER.index(t.split("/")[0]) > ORDER.index(kind)], tests
