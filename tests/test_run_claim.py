"""harness.core.run_claim: a refused run names the holder even when it looks between the holder's lock and the
holder's details (a real flock held by another open file in this process; the details written a moment later)."""

from __future__ import annotations

import fcntl
import json
import os
import threading

import pytest

from harness.core import run_claim
from harness.core.run_claim import LOCK, RunClaimed, claim


def hold(run_dir, details: dict | None, after_s: float) -> tuple[int, threading.Timer | None]:
    """Lock `run_dir`'s claim as a holder would, and write `details` into it `after_s` later (None: never)."""
    run_dir.mkdir(parents=True)
    fd = os.open(run_dir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    timer = None
    if details is not None:
        timer = threading.Timer(after_s, lambda: os.pwrite(fd, json.dumps(details).encode(), 0))
        timer.start()
    return fd, timer


def test_a_refused_run_waits_for_the_holders_details(tmp_path):
    details = {
        "pid": 4242,
        "host": "elsewhere",
        "since": "2026-11-28T22:00:00+00:00",
        "command": "pytest suites/",
    }
    fd, timer = hold(tmp_path / "same-id", details, after_s=0.3)
    try:
        with pytest.raises(RunClaimed) as e:
            claim(tmp_path / "same-id")
        assert (
            "being written by pid 4242 on elsewhere since 2026-11-28T22:00:00+00:00 (pytest suites/)"
            in str(e.value)
        )
    finally:
        timer.join()
        os.close(fd)
    # the claim is free again once the holder is gone; the new holder's details are its own
    mine = claim(tmp_path / "same-id")
    try:
        assert json.loads((tmp_path / "same-id" / LOCK).read_text())["pid"] == os.getpid()
    finally:
        mine.release()


def test_a_holder_that_never_writes_is_said_to_have_recorded_none(tmp_path, monkeypatch):
    monkeypatch.setattr(run_claim, "DETAILS_WAIT_S", 0.2)
    fd, _ = hold(tmp_path / "same-id", None, after_s=0.0)
    try:
        with pytest.raises(RunClaimed, match=r"another process \(it recorded no details\)"):
            claim(tmp_path / "same-id")
    finally:
        os.close(fd)
