"""A pytest plugin for the interrupted-run probe: the suite's process sends itself a real signal (SIGINT, as
Ctrl-C does, or SIGTERM, as a CI cancel does) once its first cell's test has finished.

Loaded into a suite run with `-p tests.interrupt_after`; YOLO26_TEST_INTERRUPT names the signal.
"""

from __future__ import annotations

import os
import signal

ENV = "YOLO26_TEST_INTERRUPT"
_sent: list[bool] = []


def pytest_runtest_logreport(report) -> None:
    name = os.environ.get(ENV)
    if name and report.when == "teardown" and not _sent:
        _sent.append(True)
        os.kill(os.getpid(), getattr(signal, name))
