"""Out of memory named as such: an export or first run that cannot fit --export-memory-gb is `out_of_memory`, with
the limit in its words ("ran out of memory at 0.3 GB"), never a crash; a crash that is not one stays a crash.

The worker's result carries an exception where one reached Python (ExecuTorch's MemoryError, which the worker
writes with what it imported when it started: importing under the limit would fail a second time); a native
std::bad_alloc aborts the process (SIGABRT), and only its log says why (harness.execute.isolate reads it).
"""

from __future__ import annotations

import os

import pytest

from harness import backends
from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.diagnosis.classify import classify
from harness.execute.isolate import run_export
from harness.execute.runner import CellRunner, RunConfig
from tests.conftest import LEAN_RUN, REPO
from tests.test_isolation import request as export_request

#: far below what importing torch and building yolo26n needs, so every export under it fails, and fast
LIMIT_GB = 0.3


def _classified(outcome) -> dict:
    return classify(
        outcome.message,
        outcome.traceback,
        outcome.exception_type,
        signal=outcome.signal,
        status=outcome.status,
    )


@pytest.fixture
def _importable_tests(monkeypatch):
    # the worker imports tests.fault_backends
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH")))))


@pytest.mark.slow
@pytest.mark.export
@pytest.mark.process
@pytest.mark.parametrize("backend", ["openvino", "executorch-xnnpack"])
def test_an_export_that_cannot_fit_the_memory_limit_is_out_of_memory_at_that_limit(tmp_path, backend):
    """yolo26n at 160 under 0.3 GB: OpenVINO's worker aborts on std::bad_alloc (SIGABRT), ExecuTorch's raises
    MemoryError. Before: both `crashed (crash)`; ExecuTorch's worker died again importing what writes its result."""
    why = backends.get(backend).probe("cpu")
    if why:
        pytest.skip(f"{backend}: {why}")
    cfg = RunConfig(
        run_id="oom",
        results_dir=tmp_path / "results",
        cache_dir=tmp_path
        / "cache",  # its own: the session's shared cache may hold this export already (a hit)
        export_memory_gb=LIMIT_GB,
        max_time_s=0.1,
        rounds=3,
        **LEAN_RUN,
    )
    messages: list[str] = []
    rec = CellRunner(cfg, progress=messages.append).run_cell(
        Cell("n", "detect", "e2e", backend, "cpu", Shape(160, 160))
    )
    log = (cfg.run_dir / rec.log).read_text(errors="replace")[-3000:] if rec.log else ""
    assert rec.status in ("crashed", "export_failed"), (rec.status, rec.reason, log)
    assert rec.failure["class"] == "out_of_memory", (rec.failure, log)
    assert "ran out of memory at 0.3 GB (the --export-memory-gb limit)" in rec.reason, rec.reason
    assert (
        "--export-memory-gb" in rec.failure["suggested_fix"] or "memory limit" in rec.failure["suggested_fix"]
    )
    # the progress line a user reads names the class, which is what the remedy ladder matches its rungs on
    assert any(f"{rec.status} (out_of_memory): " in m for m in messages), messages
    if rec.status == "export_failed":  # the worker wrote its result: what ran out is Python's MemoryError
        assert rec.failure["exception_type"] == "builtins.MemoryError"
        assert "SystemError" not in log and "write_result" not in log, log


@pytest.mark.process
def test_a_runaway_export_under_the_limit_names_the_limit(tmp_path, _importable_tests):
    outcome = run_export(
        export_request("test-oom", tmp_path / "out"),
        tmp_path / "test-oom.log",
        timeout_s=120,
        memory_limit_gb=1.0,
        imports=("tests.fault_backends",),
    )
    assert _classified(outcome)["class"] == "out_of_memory", outcome
    assert "ran out of memory at 1 GB (the --export-memory-gb limit)" in outcome.message, outcome.message


@pytest.mark.process
def test_an_abort_that_is_not_out_of_memory_stays_a_crash(tmp_path, _importable_tests):
    # the other way: SIGABRT under a memory limit, but nothing in the log says an allocation failed
    outcome = run_export(
        export_request("test-abort", tmp_path / "out"),
        tmp_path / "test-abort.log",
        timeout_s=60,
        memory_limit_gb=4.0,
        imports=("tests.fault_backends",),
    )
    assert outcome.status == "crashed" and outcome.signal == "SIGABRT", outcome
    assert "out of memory" not in outcome.message, outcome.message
    assert _classified(outcome)["class"] == "crash"


def test_the_log_line_that_says_an_allocation_failed():
    from harness.diagnosis.classify import evidence_line

    log = "\n".join(
        [
            "[worker] exporting openvino n/detect/e2e 160x160",
            "UserWarning: out of memory would be bad",  # a warning line is noise, never evidence
            "terminate called after throwing an instance of 'std::bad_alloc'",
            "  what():  std::bad_alloc",
        ]
    )
    assert (
        evidence_line(log, "out_of_memory")
        == "terminate called after throwing an instance of 'std::bad_alloc'"
    )
    assert evidence_line("Traceback (most recent call last):\nMemoryError", "out_of_memory") == "MemoryError"
    assert evidence_line("Segmentation fault in libfoo.so\nFatal Python error", "out_of_memory") is None


def test_a_crash_message_that_says_out_of_memory_is_classed_so():
    said = "export process ran out of memory at 0.3 GB (the --export-memory-gb limit): its log says 'x'; killed by SIGABRT"
    assert classify(said, signal="SIGABRT", status="crashed")["class"] == "out_of_memory"
    assert (
        classify("export process killed by SIGABRT", signal="SIGABRT", status="crashed")["class"] == "crash"
    )
