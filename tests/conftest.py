"""Shared fixtures for the harness's own tests: one export cache per test session, real yolo26n exports."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


#: an export cache kept across test sessions (scripts/flaky_check.sh sets it, so repeated passes export once)
TEST_CACHE_ENV = "YOLO26_BENCH_TEST_CACHE"


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    """Export/checkpoint cache shared by every test of the session, so each real export happens once; with
    $YOLO26_BENCH_TEST_CACHE, that directory, shared by sessions too."""
    import os

    if os.environ.get(TEST_CACHE_ENV):
        path = Path(os.environ[TEST_CACHE_ENV])
        path.mkdir(parents=True, exist_ok=True)
        return path
    return tmp_path_factory.mktemp("bench-cache")


@pytest.fixture(scope="session", autouse=True)
def _run_heap_policy():
    """The heap policy a run applies (harness.core.allocator), here too: the tests that time runners in this
    process (CellRunner, pipelines) then measure as a run does, not with torch eager faulting its activations in."""
    from harness.core import allocator

    allocator.set_policy(allocator.DEFAULT)
    yield


@pytest.fixture(scope="session", autouse=True)
def _shared_eval_dataset(tmp_path_factory):
    """One generated evaluation dataset (val and calib splits) for every run of the session, subprocesses too."""
    import os

    from harness.execute.runner import DATASET_DIR_ENV

    old = os.environ.get(DATASET_DIR_ENV)
    os.environ[DATASET_DIR_ENV] = str(tmp_path_factory.mktemp("eval-dataset"))
    yield
    if old is None:
        os.environ.pop(DATASET_DIR_ENV, None)
    else:
        os.environ[DATASET_DIR_ENV] = old
