"""Shared fixtures for the harness's own tests: one export cache per test session, real yolo26n exports."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import pytest

from harness.core import locations
from harness.execute import interrupt

REPO = Path(__file__).resolve().parent.parent

# The pytest processes the tests start (suite runs, the console command's runs) leave hypothesis' pytest plugin out:
# only the test extras install hypothesis, so a user's run never loads it, and loading it cost each such process
# 0.45-1.81 s of CPU (median 1.07 s, four interleaved pairs; docs/journal/2026-11-27-test-suite-xeon.md). Added
# to whatever PYTEST_ADDOPTS holds; this process has parsed its own options already, and the tests that use
# hypothesis import it themselves.
_NO_HYPOTHESIS_PLUGIN = "-p no:hypothesispytest"
_addopts = os.environ.get("PYTEST_ADDOPTS", "")
if _NO_HYPOTHESIS_PLUGIN not in _addopts:
    os.environ["PYTEST_ADDOPTS"] = f"{_addopts} {_NO_HYPOTHESIS_PLUGIN}".strip()


#: an export cache kept across test sessions (scripts/flaky_check.sh sets it, so repeated passes export once)
TEST_CACHE_ENV = "YOLO26_BENCH_TEST_CACHE"

# No test reads or writes the clone's default cache, results or reports (a main job run in this clone before the
# tests must change nothing in them): the harness's defaults (harness.core.locations) point at this session's own
# directories, in this process and every process it starts (suite runs, console commands). A test that names
# --cache-dir or --results-dir itself is unaffected. With $YOLO26_BENCH_TEST_CACHE the default cache is that one.
_DEFAULTS_DIR = Path(tempfile.mkdtemp(prefix="yolo26-test-defaults-"))
os.environ[locations.RESULTS_DIR_ENV] = str(_DEFAULTS_DIR / "results")
os.environ[locations.CACHE_DIR_ENV] = os.environ.get(TEST_CACHE_ENV) or str(_DEFAULTS_DIR / "cache")

#: RunConfig fields for a run whose tests read status, timing, parity, memory or the cache: no accuracy, end-to-end
#: pairs or LoadGen scenarios (each costs seconds to minutes per cell and such tests read none of them)
LEAN_RUN = {"accuracy": False, "e2e": False, "scenarios": "none"}


def _session_dir(tmp_path_factory, name: str) -> Path:
    """A directory for the whole test session: under pytest-xdist one for both workers (their basetemps share a
    parent), else a fresh one."""
    if not XDIST_WORKER:
        return tmp_path_factory.mktemp(name)
    path = tmp_path_factory.getbasetemp().parent / name
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    """Export/checkpoint cache shared by every test of the session, so each real export happens once; with
    $YOLO26_BENCH_TEST_CACHE, that directory, shared by sessions too. Under pytest-xdist (`-n 2`) the workers share
    one: the export cache takes turns on an entry across processes (tests/test_reliability_probe.py p11), so an
    export one worker made is a hit for the other."""
    import os

    if not os.environ.get(TEST_CACHE_ENV):
        return _session_dir(tmp_path_factory, "bench-cache")
    path = Path(os.environ[TEST_CACHE_ENV])
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def handlers():
    """This process's SIGINT/SIGTERM handlers and the interruption's note, restored after the test (the session
    must not read a test's signal as the user's)."""
    saved = {sig: signal.getsignal(sig) for sig in interrupt.SIGNALS}
    callbacks = list(interrupt._on_signal)
    interrupt.reset()
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)
    interrupt._on_signal[:] = callbacks
    interrupt.reset()


_SHARED_EXPORTS: dict[tuple, object] = {}


def shared_export(cache_dir: Path, backend: str, shape, head: str = "e2e"):
    """The fp32 export of yolo26n detect (the stand-in weights a run uses) for `backend` at `shape`, made as a run
    makes it: through the harness's export cache, in an isolated worker. A test module that needs an artifact then
    shares the one a run elsewhere in the session made (or makes it for them), instead of exporting its own.
    Returns an ExportResult (the checkpoint, for a backend without an export step).

    The process's thread budget is left as it was (opening a run sets it; the thread tests set their own), and the
    answer is kept for the process, so asking again opens nothing."""
    from harness import backends, threads
    from harness.backends.base import ExportResult
    from harness.core.cell import Cell
    from harness.execute.runner import CellRunner, RunConfig

    key = (str(cache_dir), backend, shape, head)
    if key in _SHARED_EXPORTS:
        return _SHARED_EXPORTS[key]
    saved_env = {var: os.environ.get(var) for var in (threads.ENV, *threads.OMP_VARS)}
    torch = sys.modules.get("torch")
    saved_torch = torch.get_num_threads() if torch is not None else None
    try:
        cfg = RunConfig(
            run_id=f"shared-export-{os.getpid()}",
            results_dir=Path(cache_dir) / "shared-export-runs",
            cache_dir=cache_dir,
            canary=False,
        )
        svc = CellRunner(cfg, progress=lambda m: None)
        cell, be = Cell("n", "detect", head, backend, "cpu", shape), backends.get(backend)
        mat = svc.materialize(cell)
        if be.exports:
            out = svc.export(be, cell, mat, cfg.run_dir / "logs" / f"{cell.id}.log", {})
            assert out.status == "ok", out.message
            result = ExportResult(str(out.artifact), dict(out.info or {}))
        else:
            result = ExportResult(str(mat.checkpoint), {})
    finally:
        for var, value in saved_env.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value
        torch = sys.modules.get("torch")
        if torch is not None and saved_torch is not None:
            torch.set_num_threads(saved_torch)
    _SHARED_EXPORTS[key] = result
    return result


@pytest.fixture(scope="session", autouse=True)
def _shared_eval_dataset(tmp_path_factory):
    """One generated evaluation dataset (val and calib splits) for every run of the session, subprocesses too; under
    pytest-xdist one for both workers (generating it takes ~50 s; harness.yolo.dataset.generate holds a file lock
    while one process writes it, and the others then find it current)."""
    import os

    from harness.execute.runner import DATASET_DIR_ENV

    old = os.environ.get(DATASET_DIR_ENV)
    os.environ[DATASET_DIR_ENV] = str(_session_dir(tmp_path_factory, "eval-dataset"))
    yield
    if old is None:
        os.environ.pop(DATASET_DIR_ENV, None)
    else:
        os.environ[DATASET_DIR_ENV] = old


# -- which tests start processes or send signals ------------------------------------------------------------------
#: YOLO26_TEST_PROCESS_AUDIT=FILE: the tests that start a process (a suite run, a worker, any subprocess) or send a
#: signal without the `process` marker are written to FILE, one node id a line, and named in the summary; so the
#: marker that scripts/flaky_check.sh selects can be checked complete on any part of the suite.
AUDIT_ENV = "YOLO26_TEST_PROCESS_AUDIT"
AUDITED_EVENTS = frozenset(
    {"subprocess.Popen", "os.kill", "os.killpg", "os.fork", "os.posix_spawn", "os.spawn"}
)
_running: list[str] = []
_started: dict[str, str] = {}
_unmarked: dict[str, str] = {}


def _audit(event: str, args: tuple) -> None:
    if event in AUDITED_EVENTS and _running:
        _started.setdefault(_running[-1], event)


#: pytest-xdist's variables in a worker's environment: a suite run a test starts from a worker would inherit them
#: and take itself for an xdist worker (pytest-benchmark then refuses --benchmark-only), so a worker drops them
XDIST_ENV = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID")
XDIST_WORKER: str | None = None  # this process's worker id under pytest-xdist


def pytest_configure(config: pytest.Config) -> None:
    global XDIST_WORKER
    if hasattr(config, "workerinput"):
        XDIST_WORKER = config.workerinput.get("workerid")
        for name in XDIST_ENV:
            os.environ.pop(name, None)
    if os.environ.get(AUDIT_ENV):
        sys.addaudithook(_audit)  # for the life of the process: an audit hook cannot be removed
    # The heap policy a run applies (harness.core.allocator), here too: the tests that time runners in this process
    # (CellRunner, pipelines) then measure as a run does, not with torch eager faulting its activations in. Here and
    # not in a session fixture: applying it starts `ldconfig -p` (ctypes.util.find_library), which the process
    # audit above would charge to whichever test happens to run first.
    from harness.core import allocator

    allocator.set_policy(allocator.DEFAULT)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    if not os.environ.get(AUDIT_ENV):
        return (yield)
    _running.append(item.nodeid)
    try:
        return (yield)
    finally:
        _running.pop()
        event = _started.get(item.nodeid)
        if event and item.get_closest_marker("process") is None:
            _unmarked[item.nodeid] = event


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(_DEFAULTS_DIR, ignore_errors=True)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Under pytest-xdist each worker audits its own tests: it leaves them in FILE.<worker> for the controller."""
    path = os.environ.get(AUDIT_ENV)
    if path and XDIST_WORKER:
        Path(f"{path}.{XDIST_WORKER}").write_text(json.dumps({"started": _started, "unmarked": _unmarked}))


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    path = os.environ.get(AUDIT_ENV)
    if not path or XDIST_WORKER:
        return
    started, unmarked = dict(_started), dict(_unmarked)
    for part in sorted(Path(path).parent.glob(f"{Path(path).name}.gw*")):  # the workers' shares
        share = json.loads(part.read_text())
        started.update(share["started"])
        unmarked.update(share["unmarked"])
        part.unlink()
    Path(path).write_text("".join(f"{nodeid}\t{event}\n" for nodeid, event in sorted(unmarked.items())))
    terminalreporter.write_line(
        f"process audit: {len(started)} tests started a process or sent a signal; {len(unmarked)} without the "
        f"`process` marker (listed in {path})"
    )
