"""The run's interruption (harness.execute.interrupt), in this process: a real signal sent to itself, the handler
noting it, raising at once or, in a deferred section, at the next safe point.

The suite runs interrupted at each moment of a run are probe 5 of tests/test_reliability_probe.py.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest

from harness.execute import interrupt
from tests.conftest import REPO


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.process
def test_a_signal_raises_at_once_and_is_noted(handlers, sig):
    assert interrupt.install()
    interrupt.check()  # the other way: nothing received, nothing raised
    assert interrupt.received() is None
    with pytest.raises(KeyboardInterrupt, match=f"interrupted by {sig.name}"):
        os.kill(os.getpid(), sig)
    assert interrupt.received() == sig.name
    with pytest.raises(KeyboardInterrupt, match=f"interrupted by {sig.name}"):
        interrupt.check()  # and at every safe point after, even if the first KeyboardInterrupt was lost


@pytest.mark.process
def test_a_deferred_section_is_not_cut_and_the_next_safe_point_raises(handlers):
    ended = []
    interrupt.install(on_signal=lambda: ended.append("workers"))
    with interrupt.deferred():
        os.kill(os.getpid(), signal.SIGTERM)
        done = "the section went on"
    assert done and interrupt.received() == "SIGTERM"
    assert ended == ["workers"], "the workers are ended even while the section goes on"
    with pytest.raises(KeyboardInterrupt):
        interrupt.check()


@pytest.mark.process
def test_another_threads_section_does_not_defer_the_main_thread(handlers):
    interrupt.install()
    inside, leave = threading.Event(), threading.Event()

    def section() -> None:
        with interrupt.deferred():
            inside.set()
            leave.wait(30)

    t = threading.Thread(target=section)
    t.start()
    try:
        assert inside.wait(30)
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    finally:
        leave.set()
        t.join(30)


def test_an_inherited_ignore_is_taken_over_and_a_handler_of_someone_elses_is_kept(handlers):
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a shell starts a background job

    def theirs(signum, frame) -> None:
        pass

    signal.signal(signal.SIGTERM, theirs)
    interrupt.install()
    assert signal.getsignal(signal.SIGINT) is interrupt._handler
    assert signal.getsignal(signal.SIGTERM) is theirs


def test_only_the_main_thread_installs(handlers):
    out = []
    t = threading.Thread(target=lambda: out.append(interrupt.install()))
    t.start()
    t.join(30)
    assert out == [False]


@pytest.mark.process
def test_no_worker_starts_once_the_run_was_told_to_stop(handlers, tmp_path, monkeypatch):
    from tests.test_isolation import export

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH")))))
    ok = export("test-ok", tmp_path / "before", timeout_s=120)
    assert ok.status == "ok"  # the other way: before the signal, the worker runs
    interrupt.install()
    with interrupt.deferred():
        os.kill(os.getpid(), signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt, match="interrupted by SIGTERM"):
        export("test-ok", tmp_path / "after", timeout_s=120)
    assert not list((tmp_path / "after").rglob(Path(ok.artifact).name)), "no export process ran"
