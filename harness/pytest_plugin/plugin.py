"""pytest plugin: matrix options, one parametrized test per cell, records, progress and the end-of-run summary.

Registered by the repository's conftest.py. Options are parsed once into a `BenchSession` (validated before any
work starts: a bad value is one `ERROR:` line); `pytest_generate_tests` parametrizes the `cell` argument of the
suites with structured Cell objects (ids read like the cell).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import NoReturn

import pytest

from harness.core import axes, envinfo, threads
from harness.core.axes import SelectionError
from harness.core.results_dir import SUPERSEDED_SUFFIX, RecordWriteError, recorded_cells
from harness.execute.attempt import CellRunner, RunConfig, loop_timer, slowdown_factors
from harness.measure.corrupt import corruptions
from harness.plan.expected import ExpectedStatus
from harness.plan.matrix import PlannedCell, build, profile_names
from harness.pytest_plugin import options
from harness.pytest_plugin.finish import _render_report
from harness.yolo.models import WeightsError, allow_unsafe_weights

log = logging.getLogger(__name__)

BENCH_KEY = pytest.StashKey["BenchSession"]()
#: statuses of a recorded cell that --resume runs again: how the attempt ended, not what the cell does
RERUN_STATUSES = ("crashed", "timeout")
EXPECTED_FILE = Path(__file__).resolve().parents[2] / "suites" / "expected_status.yaml"


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("yolo26-bench", "YOLO26 benchmark matrix")
    g.addoption("--profile", default="default", help="named matrix: quick, default (the default), nightly")
    g.addoption("--sizes", help="comma-separated model sizes: n,s,m,l,x")
    g.addoption("--tasks", help="comma-separated tasks: detect,seg,pose,obb,cls")
    g.addoption("--heads", help="e2e (NMS-free end-to-end head), raw (one-to-many head, external NMS)")
    g.addoption("--backends", help="comma-separated backend names (see README)")
    g.addoption("--devices", help="comma-separated devices: cpu,cuda,gpu")
    g.addoption("--shapes", help="comma-separated shapes: 640, 384x640, dynamic")
    g.addoption("--batches", help="comma-separated batch sizes")
    g.addoption("--precisions", help="comma-separated precisions: fp32,fp16,int8")
    g.addoption(
        "--force-shapes",
        action="store_true",
        help=f"allow shape sides outside {axes.MIN_SIDE}..{axes.MAX_SIDE} and batches above {axes.MAX_BATCH}",
    )
    g.addoption(
        "--results-dir",
        default=options.DEFAULT_RESULTS_DIR,
        help="where results/<run_id>/ is written (default results)",
    )
    g.addoption(
        "--reports-dir",
        help="where the report is rendered (default: reports/ with the default --results-dir, else "
        "RESULTS_DIR/reports)",
    )
    g.addoption("--cache-dir", default=".cache/yolo26-bench", help="export and checkpoint cache")
    g.addoption("--weights-dir", help="directory holding yolo26{size}[-task].pt; default: seeded random init")
    g.addoption(
        "--allow-unsafe-weights",
        action="store_true",
        help="load weights files that need full unpickling (a .pt file can run code: only for files you trust)",
    )
    g.addoption("--seed", type=int, default=0, help="random-init seed (default 0)")
    g.addoption(
        "--run-id", help="run id: letters, digits, '.', '_', '-' (default: UTC timestamp and host name)"
    )
    g.addoption("--rounds", type=int, help="timed rounds per cell (default: as many as fit in --min-time)")
    g.addoption("--min-time", type=float, default=2.0, help="seconds of timed rounds per cell (default 2)")
    g.addoption("--warmup", type=int, default=2, help="warm-up rounds per cell (default 2)")
    g.addoption(
        "--threads",
        help="CPU threads every CPU runtime (and export process) gets (default: the machine's physical cores)",
    )
    g.addoption("--export-timeout", type=float, default=1200.0, help="seconds per export (default 1200)")
    g.addoption("--export-memory-gb", type=float, help="memory limit of each export process")
    g.addoption("--refresh-cache", action="store_true", help="re-export even when the cache has the artifact")
    g.addoption("--no-report", action="store_true", help="do not render the HTML report at the end")
    g.addoption(
        "--expected-file",
        default=str(EXPECTED_FILE),
        help="known failing cells (default suites/expected_status.yaml)",
    )
    g.addoption(
        "--update-expected",
        action="store_true",
        help="rewrite the expected-status file from this run's failures and passes",
    )
    g.addoption(
        "--no-history",
        action="store_true",
        help="do not import the run into the history database (RESULTS_DIR/history.sqlite, or "
        "$YOLO26_BENCH_HISTORY) at the end",
    )
    g.addoption(
        "--resume",
        action="store_true",
        help="go on with an existing --run-id: skip the cells it has recorded (a crashed or timed-out cell runs "
        "again) and append the rest; without it an existing run id is refused. Shards of one run pass it too",
    )


class BenchSession:
    """Options of one pytest session, validated, plus the runner that writes its records."""

    def __init__(self, config: pytest.Config) -> None:
        opt = config.getoption
        self.config = config
        self._validate(opt)
        self.run_config = RunConfig(
            run_id=self.run_id,
            results_dir=self.results_dir,
            cache_dir=self.cache_dir,
            weights_dir=self.weights_dir,
            seed=opt("seed"),
            warmup=opt("warmup"),
            rounds=opt("rounds"),
            min_time_s=opt("min_time"),
            export_timeout_s=opt("export_timeout"),
            export_memory_gb=opt("export_memory_gb"),
            refresh_cache=opt("refresh_cache"),
            threads=self.threads,
        )
        self.recorded = existing_run(config, self.run_config.run_dir, bool(opt("resume")))
        self.stopped: str | None = None  # why the run stopped early (a record could not be written)
        self.expected = ExpectedStatus(Path(opt("expected_file")))
        self.update_command = " ".join(["pytest", *config.invocation_params.args, "--update-expected"])
        self._runner: CellRunner | None = None
        self.records: list[dict] = []  # every record written (cells, remedies, sweep shapes)
        self.primary: list[dict] = []  # one per parametrized cell
        self.t0 = time.perf_counter()

    def _validate(self, opt) -> None:
        """Every option checked before any work (harness.pytest_plugin.options): one error line otherwise."""
        from harness.plan.matrix import all_devices

        self.profile = opt("profile")
        if self.profile not in profile_names():
            raise SelectionError(f"--profile: unknown {self.profile!r}; valid: {', '.join(profile_names())}")
        self.selection = options.selection(opt, tuple(_backend_names()), all_devices())
        options.check_numbers(opt)
        slowdown_factors()  # validate the testing knob up front
        corruptions()  # ... and the parity-check knob (a CorruptionError is a SelectionError: one usage error)
        self.threads, self.threads_source = options.thread_budget(opt)
        self.run_id = options.the_run_id(opt)
        self.weights_dir = options.weights_dir(opt)
        self.results_dir = Path(opt("results_dir"))
        options.check_writable(self.results_dir, "--results-dir")
        self.reports_dir = options.reports_dir(opt, self.results_dir)
        if not opt("no_report"):
            options.check_writable(self.reports_dir, "--reports-dir")
        self.cache_dir = Path(opt("cache_dir"))
        options.check_writable(self.cache_dir, "--cache-dir")
        self.planned: list[PlannedCell] = build(self.profile, self.selection)
        if opt("allow_unsafe_weights"):
            allow_unsafe_weights()  # this process and, through the environment, its export and probe workers
        # One budget per run: this process's runtimes, and its export/probe subprocesses through the environment
        # (set before the weights check imports torch and ultralytics).
        threads.set_budget(self.threads)
        options.check_weights(self.planned, self.weights_dir, allow_unsafe=bool(opt("allow_unsafe_weights")))

    @property
    def runner(self) -> CellRunner:
        if self._runner is None:
            try:
                runner = CellRunner(self.run_config, progress=self.progress)
                runner.preload([p.cell for p in self.planned if not p.excluded])
                envinfo.write(
                    self.run_config.run_dir,
                    envinfo.collect(self.run_id, threads=self.threads, threads_source=self.threads_source),
                )
            except OSError as e:  # the run directory cannot be written: nothing could be recorded
                self.stop(
                    e
                    if isinstance(e, RecordWriteError)
                    else f"cannot start the run in {self.run_config.run_dir}: {e}"
                )
            self._runner = runner
            self.progress(f"run {self.run_id}: {len(self.planned)} cells -> {self.run_config.run_dir}")
        return self._runner

    def stop(self, why: object) -> NoReturn:
        """End the session now, with one line: a record (or env.json) could not be written, so every further cell
        would be measured for nothing. Exit status 2 (interrupted); the summary skips history and report."""
        self.stopped = str(why)
        pytest.exit(f"yolo26-bench stopped: {why}", returncode=pytest.ExitCode.INTERRUPTED)

    def progress(self, msg: str) -> None:
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        elapsed = time.perf_counter() - self.t0
        line = f"[yolo26-bench {elapsed:7.1f}s] {msg}"
        if tr is not None and self.config.getoption("verbose") >= 0:
            capman = self.config.pluginmanager.get_plugin("capturemanager")
            if capman is not None:  # show progress live, even while the test's output is captured
                with capman.global_and_fixture_disabled():
                    tr.write_line(line)
            else:
                tr.write_line(line)
        log.info("%s", msg)


def _backend_names() -> list[str]:
    from harness import backends

    return list(backends.names())


def pytest_configure(config: pytest.Config) -> None:
    for name, text in (
        ("gpu", "needs an NVIDIA GPU"),
        ("cell", "a benchmark matrix cell"),
    ):
        config.addinivalue_line("markers", f"{name}: {text}")
    # Validate every option before any work starts: a bad value is one `ERROR:` line and exit status 4.
    if not config.option.help:
        _session(config)


def _session(config: pytest.Config) -> BenchSession:
    if BENCH_KEY not in config.stash:
        try:
            config.stash[BENCH_KEY] = BenchSession(config)
        except (SelectionError, WeightsError) as e:
            raise pytest.UsageError(str(e)) from None
    return config.stash[BENCH_KEY]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "cell" not in metafunc.fixturenames:
        return
    session = _session(metafunc.config)
    params = []
    for p in session.planned:
        marks = [pytest.mark.cell]
        if p.cell.device in ("cuda", "gpu"):
            marks.append(pytest.mark.gpu)
        params.append(pytest.param(p, id=p.cell.id, marks=marks))
    metafunc.parametrize("cell", params)


@pytest.fixture(scope="session")
def bench_session(request: pytest.FixtureRequest) -> BenchSession:
    return _session(request.config)


def benchmark_timer(benchmark):
    """A harness timer that runs the timed rounds through pytest-benchmark's pedantic mode.

    The harness still owns the clock: each round is also timed by the harness (perf_counter_ns), and those samples
    are the record's; pytest-benchmark's own table and JSON show the same rounds. pytest-benchmark allows one
    measurement per test, so further attempts of the same test (remedies, dynamic sweep shapes) are timed by the
    harness's plain loop.
    """
    used = False

    def timer(call, rounds: int) -> list[float]:
        nonlocal used
        if used:
            return loop_timer(call, rounds)
        used = True
        samples: list[float] = []

        def target():
            t0 = time.perf_counter_ns()
            call()
            samples.append((time.perf_counter_ns() - t0) / 1e6)

        benchmark.pedantic(target, rounds=rounds, iterations=1, warmup_rounds=0)
        if getattr(benchmark, "disabled", False):
            return []
        return samples

    return timer


def run_cell_test(planned: PlannedCell, session: BenchSession, benchmark) -> dict:
    """Body of a suite test: run the cell, keep its record, map its status to a pytest outcome."""
    cell = planned.cell
    benchmark.group = f"{cell.model}-{cell.head}-{cell.shape.label}-b{cell.batch}"
    resume_cell(session, cell.id)
    try:
        recs = session.runner.run_cell_all(cell, benchmark_timer(benchmark), skip_reason=planned.excluded)
    except RecordWriteError as e:
        session.stop(e)
    rec = recs[0]
    session.records.extend(recs)
    session.primary.append(rec)
    benchmark.extra_info.update(cell_id=cell.id, status=rec["status"], weights=rec["weights"])
    if rec["status"] == "skipped":
        pytest.skip(rec["reason"])
    verdict = session.expected.judge(rec, session.update_command)
    if session.config.getoption("update_expected"):
        return rec  # the file is rewritten at the end of the session; outcomes follow the new file
    if verdict.outcome == "xfail":
        pytest.xfail(verdict.message)
    if verdict.outcome in ("fail", "xpass"):
        pytest.fail(verdict.message, pytrace=False)
    return rec


def existing_run(config: pytest.Config, run_dir: Path, resume: bool) -> dict[str, str]:
    """The cells `run_dir` has recorded (cell id -> status) when --resume goes on with it; refuses (one error line)
    a run id that already holds a run without --resume, so no run appends duplicates to another in silence."""
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: the controller checked before workers started
        return recorded_cells(run_dir) if resume else {}
    if not (run_dir.is_dir() and any(run_dir.iterdir())):
        return {}
    try:
        recorded = recorded_cells(run_dir)
    except (OSError, ValueError) as e:
        raise SelectionError(f"--run-id: {run_dir} holds records that cannot be read ({e})") from None
    if not resume:
        raise SelectionError(
            f"--run-id {run_dir.name}: {run_dir} already holds a run ({len(recorded)} cells recorded); pass "
            "--resume to run only the cells it lacks, or choose another --run-id"
        )
    return recorded


def resume_cell(session: BenchSession, cell_id: str) -> None:
    """--resume: skip a cell the run has recorded; one recorded as crashed or timed out runs again, its earlier
    records moved to cells.jsonl.superseded so the run never holds two verdicts for one cell."""
    status = session.recorded.get(cell_id)
    if status is None:
        return
    if status not in RERUN_STATUSES:
        pytest.skip(f"already recorded in run {session.run_id} as {status} (--resume)")
    try:
        moved = session.runner.writer.set_aside(cell_id)
    except RecordWriteError as e:
        session.stop(e)
    session.progress(
        f"{cell_id}: recorded as {status}; running it again ({moved} earlier records moved to "
        f"cells.jsonl{SUPERSEDED_SUFFIX})"
    )


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    session = config.stash.get(BENCH_KEY, None)
    if session is None or not session.records:
        return
    tr = terminalreporter
    tr.section("yolo26-bench summary")
    width = max(len(r["cell_id"]) for r in session.records)
    tr.write_line(f"{'cell':<{width}}  {'status':<14} {'p50 ms':>9} {'p99 ms':>9}  reason")
    for r in session.records:
        lat = r.get("latency_ms") or {}
        p50 = f"{lat['p50']:.2f}" if lat else "-"
        p99 = f"{lat['p99']:.2f}" if lat else "-"
        reason = (r.get("reason") or "")[:80]
        tr.write_line(f"{r['cell_id']:<{width}}  {r['status']:<14} {p50:>9} {p99:>9}  {reason}")
    counts: dict[str, int] = {}
    for r in session.records:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    tr.write_line(", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    tr.write_line(f"records: {session.run_config.run_dir / 'cells.jsonl'}")
    if session.stopped:  # a write failed: the history and the report would read an incomplete run
        return
    if config.getoption("update_expected"):
        added, removed = session.expected.update(session.primary)
        tr.write_line(
            f"expected status: {added} entries added or changed, {removed} removed in {session.expected.path}"
        )
    _render_report(session, tr)
