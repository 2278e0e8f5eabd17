"""A pytest plugin for the SIGKILL probe: the suite's process SIGKILLs its own process group at the moment one cell's
stage starts (YOLO26_TEST_KILL_AT="BACKEND:STAGE", e.g. "openvino:scenarios"), from inside that stage: no sleep,
nothing to race with. A SIGKILL cannot be caught, so whatever the run had not written by then is lost, as it is
when the kernel's OOM killer or a CI runner's hard kill ends a run.

Loaded into a suite run with `-p tests.kill_at_stage`. Before it kills, the hook writes YOLO26_TEST_KILL_NOTE (a
JSON file): the cell whose stage it was, and the cell ids cells.jsonl held at that moment, so a test can tell the
moment it killed at. The process group is killed only where the suite's process leads its own (the test starts it
with `start_new_session=True`); else only the process itself, never the test that started it.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

ENV = "YOLO26_TEST_KILL_AT"
NOTE_ENV = "YOLO26_TEST_KILL_NOTE"


def _kill(cell_id: str, run_dir: Path) -> None:
    jsonl = run_dir / "cells.jsonl"
    lines = jsonl.read_text().splitlines() if jsonl.exists() else []
    note = {"cell_id": cell_id, "recorded": [json.loads(line)["cell_id"] for line in lines if line.strip()]}
    path = os.environ.get(NOTE_ENV)
    if path:
        with open(path, "w") as f:
            json.dump(note, f)
            f.flush()
            os.fsync(f.fileno())
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpgrp(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """Wrap the named stage's function where the run's pipeline looks it up when the stage runs."""
    at = os.environ.get(ENV)
    if not at:
        return
    backend, _, stage = at.partition(":")
    from harness.execute import stages

    original = getattr(stages, stage, None)
    if not callable(original):
        raise pytest.UsageError(f"{ENV}: harness.execute.stages has no stage function {stage!r}")

    def killing(s, *args, **kwargs):
        if s.cell.backend == backend and s.attempt.remedy is None:
            _kill(s.attempt.cell_id, s.run_dir)
        return original(s, *args, **kwargs)

    setattr(stages, stage, killing)
