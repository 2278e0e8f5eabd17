"""A pytest plugin for the interrupted-run probe: the suite's process sends itself a real signal (SIGINT, as Ctrl-C
does, or SIGTERM, as a CI cancel does) at one chosen moment of the run, from a hook that runs at that moment: no
sleep, nothing to race with.

Loaded into a suite run with `-p tests.interrupt_after`; YOLO26_TEST_INTERRUPT names the signal and
YOLO26_TEST_INTERRUPT_AT the moment (default `between`):

  between   the first cell's test has ended (its last report logged) and the next one has not started
  finalizer the same moment, but the signal is handled inside a finalizer (`__del__`), where Python prints the
            KeyboardInterrupt as "Exception ignored" and drops it
  skip      pytest is turning the first cell's skip into its report
  summary   the end-of-run summary has begun (every cell has run)
  ended     the run's end has just been written to env.json, as whole; the history import has not begun
  worker    the first worker process has just been started (in the export phase's thread), not yet registered
  scenario:KIND
            a LoadGen test of the scenario KIND (single-stream, multi-stream, offline, server) is running: sent from
            its system under test's issue callback (LoadGen's issuing thread, the main one) once it has issued 3
            queries (Offline: its one query), so the workers are running queries when it comes; the first such test
  search    the same, in the camera-capacity search's first LoadGen test (MultiStream under camera-capacity/)
  camera    the camera check (the harness's own, no LoadGen) is running queries: sent from its third frame's query

YOLO26_TEST_TINY_SCENARIOS=1 shortens the scenarios' `short` durations (harness.scenarios.settings) to a fraction
of a second per LoadGen test, one offline round and one server step, so a run reaches its last scenario in
seconds; the record then names durations it did not run (a test run, not a measurement).

A signal a process sends itself from its main thread is handled before os.kill returns. From another thread
(`worker`) the hook then waits on an event that the process's handler sets once it has run (a wrapper around it),
so the harness goes on only after the signal was handled. YOLO26_TEST_INTERRUPT_LOG names a file that gets the pid
of every worker the run started, one a line.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path

import pytest

ENV = "YOLO26_TEST_INTERRUPT"
AT_ENV = "YOLO26_TEST_INTERRUPT_AT"
LOG_ENV = "YOLO26_TEST_INTERRUPT_LOG"
TINY_ENV = "YOLO26_TEST_TINY_SCENARIOS"
SCENARIO_KINDS = ("single-stream", "multi-stream", "offline", "server")
MOMENTS = (
    "between",
    "finalizer",
    "skip",
    "summary",
    "ended",
    "worker",
    *(f"scenario:{k}" for k in SCENARIO_KINDS),
    "search",
    "camera",
)
#: the issue (LoadGen's IssueQuery callback) of a test at which a `scenario:` or `search` moment sends its signal
SEND_AT_ISSUE = 3
#: how long the `worker` hook waits for the handler before going on (only reached when no handler runs at all)
HANDLED_WAIT_S = 120.0

_sent: list[bool] = []
_handled = threading.Event()


def _signal() -> signal.Signals | None:
    name = os.environ.get(ENV)
    return getattr(signal, name) if name else None


def _at(moment: str) -> bool:
    return _signal() is not None and os.environ.get(AT_ENV, "between") == moment


def _send() -> None:
    """Send the signal once per run."""
    sig = _signal()
    if sig is not None and not _sent:
        _sent.append(True)
        os.kill(os.getpid(), sig)


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """After the harness has taken its signals: note when the handler has run; patch the moments inside it."""
    sig = _signal()
    if sig is None:
        return
    if os.environ.get(AT_ENV, "between") not in MOMENTS:
        raise pytest.UsageError(f"{AT_ENV}: one of {', '.join(MOMENTS)}")
    current = signal.getsignal(sig)
    if callable(current):

        def noted(signum, frame):
            try:
                current(signum, frame)
            finally:
                _handled.set()

        signal.signal(sig, noted)
    if _at("ended"):
        from harness.pytest_plugin import plugin

        mark_run_end = plugin.mark_run_end

        def then_signal(*args, **kwargs):
            try:
                return mark_run_end(*args, **kwargs)
            finally:
                _send()

        plugin.mark_run_end = then_signal
    if _at("worker") or os.environ.get(LOG_ENV):
        from harness.execute import isolate

        isolate.subprocess = _Subprocess()  # type: ignore[assignment]
    if os.environ.get(TINY_ENV):
        _tiny_durations()
    moment = os.environ.get(AT_ENV, "between")
    if moment.startswith("scenario:") or moment == "search":
        _send_in_loadgen(moment)
    if moment == "camera":
        _send_in_camera_check()


def _tiny_durations() -> None:
    """The `short` durations cut to tenths of a second per LoadGen test (YOLO26_TEST_TINY_SCENARIOS)."""
    import dataclasses

    from harness.scenarios import settings

    settings.DURATIONS["short"] = dataclasses.replace(
        settings.SHORT,
        single_ms=200,
        single_queries=20,
        multi_ms=200,
        multi_queries=16,
        server_ms=300,
        server_queries=20,
        offline_ms=100,
        offline_rounds=1,
        server_steps=1,
    )


def _kind(settings, outdir: str) -> str:
    """The moment a LoadGen test is: `scenario:KIND`, or `search` for the camera-capacity search's tests."""
    import mlperf_loadgen as lg

    if "camera-capacity" in Path(outdir).parts:
        return "search"
    return (
        "scenario:"
        + {
            lg.TestScenario.SingleStream: "single-stream",
            lg.TestScenario.MultiStream: "multi-stream",
            lg.TestScenario.Offline: "offline",
            lg.TestScenario.Server: "server",
        }[settings.scenario]
    )


def _send_in_loadgen(moment: str) -> None:
    """Send the signal from the issue callback of the first LoadGen test of `moment`: mlperf_loadgen's StartTest
    notes which test runs, its ConstructSUT wraps the harness's issue callback."""
    import mlperf_loadgen as lg

    running: list[str] = []
    construct, start = lg.ConstructSUT, lg.StartTestWithLogSettings

    def start_test(sut, qsl, settings, log_settings, *args):
        running[:] = [_kind(settings, log_settings.log_output.outdir)]
        try:
            return start(sut, qsl, settings, log_settings, *args)
        finally:
            running.clear()

    def construct_sut(issue, flush):
        issued = [0]

        def issue_then_send(samples):
            issue(samples)
            issued[0] += 1
            offline = running == ["scenario:offline"]
            if running == [moment] and issued[0] >= (1 if offline else SEND_AT_ISSUE):
                _send()

        return construct(issue_then_send, flush)

    lg.ConstructSUT, lg.StartTestWithLogSettings = construct_sut, start_test


def _send_in_camera_check() -> None:
    """Send the signal from the camera check's third query (harness.scenarios.camera.camera_run)."""
    from harness.scenarios import camera

    camera_run = camera.camera_run

    def run(query, *args, **kwargs):
        calls = [0]

        def query_then_send():
            out = query()
            calls[0] += 1
            if calls[0] == 3:
                _send()
            return out

        return camera_run(query_then_send, *args, **kwargs)

    camera.camera_run = run


class _Started(subprocess.Popen):
    """A worker's process: its pid logged; at the `worker` moment, the signal sent once it has started."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        log = os.environ.get(LOG_ENV)
        if log:
            with open(log, "a") as f:
                f.write(f"{self.pid}\n")
        if _at("worker") and not _sent:
            _send()
            if threading.current_thread() is not threading.main_thread():
                _handled.wait(HANDLED_WAIT_S)


class _Subprocess:
    """The subprocess module as harness.execute.isolate sees it, its Popen being `_Started`."""

    Popen = _Started

    def __getattr__(self, name: str):
        return getattr(subprocess, name)


class _SendsOnCollection:
    """An object whose finalizer sends the signal: the handler's KeyboardInterrupt is raised in `__del__`."""

    def __del__(self) -> None:
        _send()


def pytest_runtest_logfinish(nodeid: str, location) -> None:
    if _at("between"):
        _send()
    if _at("finalizer") and not _sent:
        _SendsOnCollection()  # dropped at once: its __del__ runs here


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if _at("skip") and call.when == "call" and report.skipped:
        _send()
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if _at("summary"):
        _send()


def started_workers(log: Path) -> list[int]:
    """The pids the run's workers had (the file YOLO26_TEST_INTERRUPT_LOG named)."""
    return [int(x) for x in log.read_text().split()] if log.exists() else []
