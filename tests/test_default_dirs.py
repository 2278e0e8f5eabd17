"""The harness's default directories (harness.core.locations) and the rule that keeps the tests off a clone's own:
every test session points them at its own temporary directories (tests/conftest.py), so the README's test command
passes the same after the main job as on a fresh clone, and leaves the clone's results, reports and cache alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core import locations

REPO = Path(__file__).resolve().parent.parent


def test_defaults_without_the_variables(monkeypatch):
    monkeypatch.delenv(locations.RESULTS_DIR_ENV, raising=False)
    monkeypatch.delenv(locations.CACHE_DIR_ENV, raising=False)
    assert locations.results_dir() == "results"
    assert locations.cache_dir() == ".cache/yolo26-bench"
    monkeypatch.setenv(locations.CACHE_DIR_ENV, "")  # empty is unset
    assert locations.cache_dir() == ".cache/yolo26-bench"


def test_the_variables_move_the_defaults(monkeypatch, tmp_path):
    from harness.history.store import default_db_path
    from harness.yolo.dataset import default_root

    monkeypatch.setenv(locations.RESULTS_DIR_ENV, str(tmp_path / "r"))
    monkeypatch.setenv(locations.CACHE_DIR_ENV, str(tmp_path / "c"))
    monkeypatch.delenv("YOLO26_BENCH_HISTORY", raising=False)
    assert default_db_path() == tmp_path / "r" / "history.sqlite"
    assert default_root() == tmp_path / "c" / "dataset"


def test_this_session_does_not_use_the_clones_defaults():
    """What conftest set for this session: directories of its own, never the clone's."""
    for value in (locations.results_dir(), locations.cache_dir()):
        path = Path(value).resolve()
        assert path.is_absolute() and REPO not in path.parents, path


@pytest.mark.process
@pytest.mark.slow
@pytest.mark.export
def test_a_suite_run_without_dir_options_writes_only_under_the_sessions_defaults():
    """A suite run from the clone's root naming no --results-dir or --cache-dir: its records, report and cache go
    to the session's directories; nothing appears under the clone's results/, reports/ or .cache/."""
    run_id = f"default-dirs-{os.getpid()}"
    results, cache = Path(locations.results_dir()), Path(locations.cache_dir())
    before = {p: p.exists() for p in (REPO / "results" / run_id, REPO / "reports" / run_id)}
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "suites/", "--benchmark-only", "-p", "no:randomly", "-q",
         "--sizes", "n", "--backends", "onnxruntime", "--shapes", "64", "--rounds", "3", "--no-accuracy",
         "--scenarios", "none", "--no-history", "--run-id", run_id],
        cwd=REPO, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert (results / run_id / "cells.jsonl").is_file()
    assert (
        results / "reports" / run_id / "index.html"
    ).is_file()  # beside a results dir that is not the default
    assert any((cache / "exports").glob("yolo26n-detect-e2e-onnxruntime-cpu-64x64-*"))
    assert before == {p: p.exists() for p in before} and not any(before.values())
