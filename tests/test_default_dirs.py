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


#: the run id the child session of `test_the_test_command_opens_no_run_in_the_clones_results` names
CHILD_RUN_ENV = "YOLO26_TEST_CHILD_RUN_ID"


def test_this_session_opens_no_run_in_the_clones_results(request):
    """The process this test runs in has its run directory (the one every pytest session with the plugin claims)
    under the session's own results directory, and none of the clone's results/ holds it."""
    from harness.pytest_plugin.plugin import BENCH_KEY

    bench = request.config.stash[BENCH_KEY]
    assert REPO not in bench.run_config.run_dir.resolve().parents, bench.run_config.run_dir
    assert not (REPO / "results" / bench.run_id).exists()
    if os.environ.get(CHILD_RUN_ENV):  # the child session below: its controller's run id
        assert not (REPO / "results" / os.environ[CHILD_RUN_ENV]).exists()


@pytest.mark.process
def test_the_test_command_opens_no_run_in_the_clones_results(tmp_path):
    """Issue 66: while the README's test command ran, the clone's results/ held a run directory with only a
    `.run.lock`: pytest-xdist's controller read the plugin's --results-dir default when the plugin declared it,
    before tests/conftest.py moved the defaults, and claimed its run there. Here a session started as the README
    starts it (two processes, from the clone's root, no directory variable set) checks from inside."""
    run_id = f"test-command-{os.getpid()}"
    env = {
        k: v for k, v in os.environ.items() if k not in (locations.RESULTS_DIR_ENV, locations.CACHE_DIR_ENV)
    }
    env.update(PYTHONPATH=str(REPO), **{CHILD_RUN_ENV: run_id})
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/test_default_dirs.py", "-k", "this_session_opens_no_run",
         "-n", "1", "-p", "no:randomly", "-p", "no:cacheprovider", "-q", "--run-id", run_id],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "1 passed" in p.stdout, p.stdout[-2000:]
    assert not (REPO / "results" / run_id).exists()
