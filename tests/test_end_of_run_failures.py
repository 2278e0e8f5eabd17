"""A report or a history import that fails at the end of a suite run fails the run: one line naming what failed,
where, and that the records are intact, and a non-zero exit status (CI and the nightly publish step read it).
Before: "report: rendering failed (OSError ... No space left on device); records are intact", exit 0, no path.

`python -m harness report RUN > /dev/full` says only its error, never "report written to" before it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core.results_dir import read_records
from tests.conftest import REPO
from tests.reliability_helpers import suite, tmpfs_prefix

#: the exit status of a run whose end failed (harness.pytest_plugin.finish.END_FAILED): above 1, "the run broke"
END_FAILED = 2
SAMPLE = REPO / "results" / "samples" / "2026-11-28-cpu-2core-claims"


def _cells(results: Path, run_id: str) -> list[str]:
    """Two onnxruntime CUDA cells: skipped on a machine without a GPU (records, no export), then the end of run."""
    return [
        "--sizes", "n", "--tasks", "detect", "--heads", "e2e", "--backends", "onnxruntime", "--devices", "cuda",
        "--shapes", "160,192", "--precisions", "fp32", "--results-dir", str(results),
        "--cache-dir", str(results / "cache"), "--run-id", run_id,
    ]  # fmt: skip


def _small_disk(tmp_path: Path) -> tuple[Path, list[str]]:
    mount = tmp_path / "small"
    mount.mkdir()
    prefix = tmpfs_prefix(mount, "16k")  # room for a directory or two, not for a report's pages or a database
    if prefix is None:
        pytest.skip("no private mount namespace here (unshare): no small disk to fill")
    return mount, prefix


@pytest.mark.slow
@pytest.mark.process
def test_a_report_that_cannot_be_written_fails_the_run_and_names_its_path(tmp_path):
    mount, prefix = _small_disk(tmp_path)
    reports = mount / "reports"
    p = suite(*_cells(tmp_path / "results", "r"), "--reports-dir", str(reports), prefix=prefix)
    out = p.stdout + p.stderr
    assert p.returncode == END_FAILED, out[-4000:]
    failed = [ln for ln in out.splitlines() if ln.startswith("report: ")]
    assert len(failed) == 1, out[-4000:]
    assert (
        f"report: rendering into {reports} failed (OSError: [Errno 28] No space left on device" in failed[0]
    )
    records = tmp_path / "results" / "r" / "cells.jsonl"
    assert f"the records are intact in {records}" in failed[0], failed[0]
    assert "history: imported into" in out  # the import before it held
    assert "Traceback" not in out
    assert len(read_records(records)) == 2


@pytest.mark.slow
@pytest.mark.process
def test_a_history_import_that_fails_fails_the_run(tmp_path):
    mount, prefix = _small_disk(tmp_path)
    db = mount / "history.sqlite"
    env = dict(os.environ, YOLO26_BENCH_HISTORY=str(db))
    p = suite(*_cells(tmp_path / "results", "r"), "--no-report", env=env, prefix=prefix)
    out = p.stdout + p.stderr
    assert p.returncode == END_FAILED, out[-4000:]
    failed = [ln for ln in out.splitlines() if ln.startswith("history: ")]
    assert len(failed) == 1 and f"history: the import into {db} failed (" in failed[0], out[-4000:]
    assert f"the records are intact in {tmp_path / 'results' / 'r' / 'cells.jsonl'}" in failed[0]
    # the other way: the same run with a database on a disk with room ends 0
    ok = suite(*_cells(tmp_path / "results", "r2"), "--no-report")
    assert ok.returncode == 0, (ok.stdout + ok.stderr)[-4000:]
    assert "history: imported into" in ok.stdout


@pytest.mark.process
def test_report_to_a_full_stdout_says_only_its_error(tmp_path):
    with open("/dev/full", "w") as full:
        p = subprocess.run(
            [sys.executable, "-m", "harness", "report", str(SAMPLE), "-o", str(tmp_path / "reports")],
            cwd=REPO,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
        )
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2, p.stderr
    assert lines == [
        "python -m harness report: error: cannot write to standard output: No space left on device"
    ], p.stderr
