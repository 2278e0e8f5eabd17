"""Isolated exports: a crash, a hang or memory exhaustion in the export process is recorded, never fatal."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from harness.backends.base import ExportRequest
from harness.diagnosis import classify
from harness.execute.isolate import run_export

REPO = Path(__file__).resolve().parents[1]
FAULTS = ("tests.fault_backends",)


@pytest.fixture(autouse=True)
def _importable_tests(monkeypatch):
    # The worker imports tests.fault_backends; make the repository importable whatever pytest's cwd is.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH")))))


def request(backend: str, out_dir: Path) -> ExportRequest:
    return ExportRequest(
        backend=backend,
        device="cpu",
        checkpoint="unused.pt",
        size="n",
        task="detect",
        head="raw",
        height=320,
        width=320,
        dynamic=False,
        batch=1,
        precision="fp32",
        out_dir=str(out_dir),
    )


def export(backend: str, tmp_path: Path, **kwargs):
    out = tmp_path / backend
    return run_export(request(backend, out), tmp_path / "logs" / f"{backend}.log", imports=FAULTS, **kwargs)


def assert_ok_export_still_works(tmp_path: Path) -> None:
    ok = export("test-ok", tmp_path, timeout_s=60)
    assert ok.status == "ok", (ok.message, Path(ok.log).read_text())
    assert Path(ok.artifact).read_text() == "test-ok 320x320\n"
    assert ok.info["pid"] != os.getpid()


@pytest.mark.process
def test_ok_backend_exports_in_a_child_process(tmp_path):
    assert_ok_export_still_works(tmp_path)


@pytest.mark.process
def test_segfault_is_recorded_as_crashed_with_its_signal(tmp_path):
    outcome = export("test-segv", tmp_path, timeout_s=60)
    assert outcome.status == "crashed"
    assert outcome.signal == "SIGSEGV"
    assert "SIGSEGV" in outcome.message
    failure = classify(
        outcome.message,
        outcome.traceback,
        outcome.exception_type,
        signal=outcome.signal,
        status=outcome.status,
    )
    assert failure["class"] == "crash"
    assert failure["signal"] == "SIGSEGV"
    assert_ok_export_still_works(tmp_path)


@pytest.mark.timing
@pytest.mark.process
def test_hang_is_killed_at_the_timeout(tmp_path):
    t0 = time.perf_counter()
    outcome = export("test-hang", tmp_path, timeout_s=3)
    elapsed = time.perf_counter() - t0
    assert outcome.status == "timeout"
    assert 3 <= elapsed < 30
    assert "3 s" in outcome.message
    assert "killed" in Path(outcome.log).read_text()  # the log says why it ends mid-export
    assert classify(outcome.message, status=outcome.status)["class"] == "timeout"
    assert_ok_export_still_works(tmp_path)


@pytest.mark.process
def test_memory_limit_stops_a_runaway_export(tmp_path):
    outcome = export("test-oom", tmp_path, timeout_s=120, memory_limit_gb=1.0)
    assert outcome.status in ("crashed", "export_failed"), outcome
    failure = classify(
        outcome.message,
        outcome.traceback,
        outcome.exception_type,
        signal=outcome.signal,
        status=outcome.status,
    )
    assert failure["class"] == "out_of_memory", (failure, Path(outcome.log).read_text()[-2000:])
    if outcome.status == "export_failed":
        assert outcome.exception_type == "builtins.MemoryError"
        assert "MemoryError" in outcome.traceback
    assert_ok_export_still_works(tmp_path)
