"""pytest plugin: matrix options, one parametrized test per cell, records, progress and the end-of-run summary.

Registered by the repository's conftest.py. Options are parsed once into a `BenchSession` (validated before any
work starts: a bad value is one `ERROR:` line); `pytest_generate_tests` parametrizes the `cell` argument of the
suites with structured Cell objects (ids read like the cell).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import NoReturn

import pytest

from harness import threads
from harness.backends._shared.fake_cuda import DEFAULT_TARGET
from harness.core import allocator, axes, cpu_quota, envinfo, locations, run_claim
from harness.core.axes import SelectionError
from harness.core.record import TRACED_STATUSES, CellRecord
from harness.core.results_dir import (
    INCOMPLETE_KEY,
    SUPERSEDED_SUFFIX,
    RecordWriteError,
    incomplete_note,
    read_env,
    recorded_cells,
    recorded_records,
    write_env,
)
from harness.core.run_claim import RunClaim
from harness.diagnosis import recurrence
from harness.execute import interrupt
from harness.execute.config import DECISION
from harness.execute.isolate import kill_live_workers
from harness.execute.runner import CellRunner, RunConfig, slowdown_factors
from harness.execute.workload import group_labels, mates_of, workload_label
from harness.measure.corrupt import corruptions
from harness.plan.budget import NightPlan, merge_plans
from harness.plan.estimate import fmt_duration
from harness.plan.expected import ExpectedStatus
from harness.plan.matrix import PlannedCell, build, profile_names
from harness.plan.screen_budget import RESERVE_SHARE, time_budget
from harness.pytest_plugin import eta, options, replan_session
from harness.pytest_plugin.finish import END_FAILED, _render_report, end_failures
from harness.pytest_plugin.options import scenario_budget
from harness.yolo.models import WeightsError, allow_unsafe_weights

log = logging.getLogger(__name__)

BENCH_KEY = pytest.StashKey["BenchSession"]()
CLAIM_KEY = pytest.StashKey["RunClaim"]()
EXPECTED_FILE = Path(__file__).resolve().parents[2] / "suites" / "expected_status.yaml"


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("yolo26-bench", "YOLO26 benchmark matrix")
    g.addoption(
        "--profile",
        default="default",
        help="named matrix: quick, default (the default), tasks (every task of yolo26n on the CPU "
        "backends), families (YOLO26 beside YOLO11 at n and s, 640, the CPU backends), claims, nightly",
    )
    g.addoption("--sizes", help="comma-separated model sizes: n,s,m,l,x")
    g.addoption("--tasks", help="comma-separated tasks: detect,seg,pose,obb,cls")
    g.addoption("--heads", help="e2e (NMS-free end-to-end head), raw (one-to-many head, external NMS)")
    g.addoption("--backends", help="comma-separated backend names (docs/extending.md, Backends)")
    g.addoption("--devices", help="comma-separated devices: cpu,cuda,gpu")
    g.addoption("--shapes", help="comma-separated shapes: 640, 384x640, dynamic")
    g.addoption("--batches", help="comma-separated batch sizes")
    g.addoption("--precisions", help="comma-separated precisions: fp32,fp16,int8")
    g.addoption(
        "--families",
        help="model families timed beside YOLO26, each cell paired with its YOLO26 cell: yolo11, yolov8 (all: both; "
        "YOLO26 always runs)",
    )
    g.addoption(
        "--force-shapes",
        action="store_true",
        help=f"allow shape sides outside {axes.MIN_SIDE}..{axes.MAX_SIDE} and batches above {axes.MAX_BATCH}",
    )
    g.addoption(
        "--results-dir",
        default=None,  # locations.results_dir() when the session starts (`_validate`), not when this is declared
        help=f"where results/<run_id>/ is written (default ${locations.RESULTS_DIR_ENV}, else "
        f"{locations.RESULTS_DIR})",
    )
    g.addoption(
        "--reports-dir",
        help="where the report is rendered (default: reports/ with the default --results-dir, else "
        "RESULTS_DIR/reports)",
    )
    g.addoption(
        "--cache-dir",
        default=None,  # locations.cache_dir() when the session starts
        help=f"export and checkpoint cache (default ${locations.CACHE_DIR_ENV}, else {locations.CACHE_DIR})",
    )
    g.addoption(
        "--weights-dir",
        help="directory holding yolo26{size}[-task].pt (and yolo11{size}.pt, ... with --families); default: seeded "
        "random init",
    )
    g.addoption(
        "--allow-unsafe-weights",
        action="store_true",
        help="load weights files that need full unpickling (a .pt file can run code: only for files you trust)",
    )
    g.addoption("--seed", default=0, help="random-init seed (default 0)")
    g.addoption(
        "--no-standin",
        action="store_true",
        help="seeded random init for yolo26n detect too, instead of the committed stand-in weights",
    )
    g.addoption(
        "--data",
        help="your dataset YAML (ultralytics layout): accuracy on its val split and int8 calibration on its calib "
        "(else val) split; default: the generated synthetic dataset",
    )
    g.addoption("--no-accuracy", action="store_true", help="do not score each cell's mAP")
    g.addoption(
        "--fake-cuda",
        action="store_true",
        help="where no CUDA device is, trace the CUDA cells' exports (executorch-cuda, aoti) on a fake CUDA device "
        "for a stated sm_90 target, up to the step that needs a GPU: status traced or trace_failed, never a GPU "
        "measurement (docs/gpu.md, 'Without a GPU')",
    )
    g.addoption("--accuracy-images", default=32, help="val images each cell's mAP is scored on (default 32)")
    g.addoption(
        "--run-id", help="run id: letters, digits, '.', '_', '-' (default: UTC timestamp and host name)"
    )
    g.addoption(
        "--rounds",
        help="exactly this many timed rounds per cell (default: until the p50's 95%% interval is within "
        "+-2%%, at least 10 rounds, at most --max-time)",
    )
    g.addoption(
        "--max-time",
        default=3.0,
        help="seconds of timed rounds per cell at most, unless its minimum (10 rounds, 20 trials) takes longer "
        "(default 3)",
    )
    g.addoption(
        "--timing-episodes",
        default=3,
        help="spread each workload's timed rounds over this many episodes across the timing phase, so its trials "
        "sample machine states minutes apart (default 3; 1: each workload timed in one go)",
    )
    g.addoption(
        "--export-workers",
        help="exports and probes run at once in the export phase ahead of timing (default: the physical cores)",
    )
    g.addoption(
        "--no-e2e",
        action="store_true",
        help="do not time each cell end to end (pre-processing, copies, model, post-processing by stage)",
    )
    g.addoption(
        "--scenarios",
        help="which cells run the use-case scenarios (single-stream, server, offline, the camera search; "
        "multi-stream and the camera check with all): decision (the default: after the workloads, the scenario "
        "each answer reads, on the configurations the decision names, decided again until every answer is "
        "measured or --scenario-budget is spent), n640 (every scenario on yolo26n at 640, batch 1), all (every "
        "scenario on every cell; the nightly default), none",
    )
    g.addoption(
        "--scenario-budget",
        help="seconds the scenario phase of --scenarios decision may spend (default 240; within --time-budget, "
        "never more than the budget has left)",
    )
    g.addoption(
        "--server-bound-ms",
        default=100.0,
        help="the server scenario's latency bound in ms: it reports the highest Poisson rate MLPerf LoadGen calls "
        "VALID under it (default 100; p90 with short durations, p99 with mlperf)",
    )
    g.addoption(
        "--scenario-durations",
        help="MLPerf LoadGen's minimum durations and query counts in the scenarios: short (seconds per scenario, "
        "the default) or mlperf (MLPerf's own: 600 s per scenario, p99 for multi-stream and server)",
    )
    options.add_report_options(g)
    g.addoption("--no-canary", action="store_true", help="do not time the drift canary between workloads")
    g.addoption("--warmup", default=1, help="warm-up rounds per cell (default 1)")
    g.addoption(
        "--threads",
        help="CPU threads every CPU runtime (and export process) gets (default: the machine's physical cores)",
    )
    g.addoption(
        "--malloc",
        help="heap policy of the run's processes: retain (default: memory a call frees stays in the process for "
        "the next call, as a caching allocator does) or system (the C library's defaults)",
    )
    g.addoption("--export-timeout", default=1200.0, help="seconds per export (default 1200)")
    g.addoption(
        "--probe-timeout",
        default=600.0,
        help="seconds for a fresh artifact's load and first runs in its probe process (default 600); a probe that "
        "outlasts it prints its stack and is a timeout (AOTInductor's loader hung for minutes on a GPU)",
    )
    g.addoption("--export-memory-gb", help="memory limit of each export process")
    g.addoption("--refresh-cache", action="store_true", help="re-export even when the cache has the artifact")
    g.addoption(
        "--time-budget",
        help="run only what fits this long (6h, 90m, 3600s; none: no budget). The default profile plans within "
        "15m unless told otherwise, the cells of the report's first screen first, then the size ladder, then the "
        "rest (harness.plan.screen_budget); the other profiles take regressed, failed and missing cells first, "
        "then cells the change since the last run touches, then the cells measured longest ago "
        "(harness.plan.budget). The plan is printed and kept in env.json; with pytest-split's --splits N, per "
        "shard",
    )
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
        self.config = config
        self._validate(config.getoption)
        opt = self.opt  # the numeric options parsed by their declarations
        self.run_config = RunConfig(
            run_id=self.run_id,
            results_dir=self.results_dir,
            cache_dir=self.cache_dir,
            weights_dir=self.weights_dir,
            seed=opt("seed"),
            standin=options.use_standin(bool(opt("no_standin")), self.planned),
            accuracy=not opt("no_accuracy"),
            fake_cuda=DEFAULT_TARGET if opt("fake_cuda") else None,
            accuracy_images=opt("accuracy_images"),
            data=self.data,
            warmup=opt("warmup"),
            rounds=opt("rounds"),
            max_time_s=opt("max_time"),
            episodes=opt("timing_episodes"),
            export_workers=opt("export_workers") or threads.physical_cores(),
            canary=not opt("no_canary"),
            export_timeout_s=opt("export_timeout"),
            probe_timeout_s=opt("probe_timeout"),
            export_memory_gb=opt("export_memory_gb"),
            refresh_cache=opt("refresh_cache"),
            threads=self.threads,
            e2e=not opt("no_e2e"),
            scenarios=self.scenarios,
            scenario_phase=self.scenarios == DECISION and not hasattr(config, "workerinput"),
            scenario_budget_s=scenario_budget(opt("scenario_budget")),
            server_bound_ms=opt("server_bound_ms"),
            camera_fps=opt("camera_fps"),
            scenario_durations=self.scenario_durations,
        )
        earlier = existing_run(config, self.run_config.run_dir, bool(opt("resume")))
        self.recorded = {cell_id: r.status for cell_id, r in earlier.items()}
        #: --resume: the recorded cells it runs again, and why (harness.diagnosis.recurrence); the others are kept
        self.rerun = {
            c: why for c, r in earlier.items() if (why := recurrence.rerun_reason(r.status, _class(r)))
        }
        self.kept = {
            c: recurrence.kept_words(r.status, _class(r)) for c, r in earlier.items() if c not in self.rerun
        }
        self.previously_recorded = set(self.recorded)  # --resume: the cells the run held before this session
        self.stopped: str | None = None  # why the run stopped early (a record could not be written)
        self.expected = ExpectedStatus(Path(opt("expected_file")))
        self.update_command = " ".join(["pytest", *config.invocation_params.args, "--update-expected"])
        self._runner: CellRunner | None = None
        self.records: list[CellRecord] = []  # every record written (cells, remedies, sweep shapes)
        self.primary: list[CellRecord] = []  # one per parametrized cell
        self.selected: list[PlannedCell] = []  # the cells this session runs (set at collection)
        #: records of timed workloads' cells not yet reported by their test
        self.done: dict[str, list[CellRecord]] = {}
        self.prepared = False
        self.t0 = time.perf_counter()
        self.clock: eta.RunClock | None = None  # the remaining-time estimate, from the first cell on
        self.clock_started = False
        self.report_path: Path | None = None
        self.wall_s: float | None = None
        self.night_plan: NightPlan | None = None  # --time-budget: the plan, set at collection
        self.skip_reasons: dict[str, str | None] = {}  # cell id -> its skip reason here, found by the plan
        self.plan_order: list[str] = []  # the plan's cells in the order it took them (nightplan.apply)
        self.left_for_later: dict[str, str] = {}  # cell id -> why a re-plan left it (harness.plan.replan)

    def _validate(self, opt) -> None:
        """Every option checked before any work (harness.pytest_plugin.options): one error line otherwise."""
        from harness.plan.matrix import all_devices

        self.profile = opt("profile")
        if self.profile not in profile_names():
            raise SelectionError(f"--profile: unknown {self.profile!r}; valid: {', '.join(profile_names())}")
        self.selection = options.selection(opt, tuple(_backend_names()), all_devices())
        self.opt = options.with_numbers(opt, options.numbers(opt))
        self.report_constraints = options.report_constraints(self.opt)
        self.scenarios = options.scenario_mode(opt, self.profile)
        self.scenario_durations = options.scenario_durations(opt)
        slowdown_factors()  # validate the testing knob up front
        corruptions()  # ... and the parity-check knob (a CorruptionError is a SelectionError: one usage error)
        self.threads, self.threads_source = options.thread_budget(opt)
        self.malloc = options.malloc_policy(opt)
        self.run_id = options.the_run_id(opt)
        self.weights_dir = options.weights_dir(opt)
        self.data = options.dataset(opt)
        # The defaults as they are when the session starts: a conftest.py (the tests') may move them after this
        # plugin declared its options; read then, the tests' controller claimed a run in the clone's results/.
        self.results_dir = Path(opt("results_dir") or locations.results_dir())
        options.check_writable(self.results_dir, "--results-dir")
        self.reports_dir = options.reports_dir(opt, self.results_dir)
        if not opt("no_report"):
            options.check_writable(self.reports_dir, "--reports-dir")
        self.cache_dir = Path(opt("cache_dir") or locations.cache_dir())
        options.check_writable(self.cache_dir, "--cache-dir")
        options.expected_file(opt)  # --update-expected rewrites it at the end: checked now, as every -o is
        budget = time_budget(opt, self.profile, self.selection, hasattr(self.config, "workerinput"))
        self.time_budget_text, self.time_budget_s = budget.text, budget.seconds
        self.default_budget, self.budget_order = budget.default, budget.order
        self.planned: list[PlannedCell] = build(self.profile, self.selection)
        options.warn_if_large(self.planned)
        if opt("allow_unsafe_weights"):
            allow_unsafe_weights()  # this process and, through the environment, its export and probe workers
        # One budget per run: this process's runtimes, and its export/probe subprocesses through the environment
        # (set before the weights check imports torch and ultralytics).
        threads.set_budget(self.threads)
        allocator.set_policy(self.malloc)  # ... and one heap policy, recorded in env.json
        options.check_weights(self.planned, self.weights_dir, allow_unsafe=bool(opt("allow_unsafe_weights")))

    @property
    def runner(self) -> CellRunner:
        if self._runner is None:
            try:
                runner = CellRunner(self.run_config, progress=self.progress)
                runner.writer.notify = self.notice  # a torn line moved aside is said even under -q
                runner.preload([p.cell for p in self.planned if not p.excluded])
                from harness.measure import machine

                env = envinfo.collect(
                    self.run_id, facts=machine.facts(threads=self.threads, threads_source=self.threads_source)
                )
                # Marked incomplete until the run ends normally: a run killed outright (SIGKILL, power) keeps it.
                if self.night_plan is not None:  # with --resume, united with the earlier sessions' plans
                    env["plan"] = merge_plans(
                        nightplan_of(self.run_config.run_dir) if self.config.getoption("resume") else None,
                        self.night_plan.to_env(),
                    )
                env[INCOMPLETE_KEY] = {
                    "reason": "the run had not ended (still running, or killed)",
                    "cells_recorded": None,
                    "cells_planned": len(self.planned_ids()),
                }
                envinfo.write(self.run_config.run_dir, env)
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

    def planned_ids(self) -> set[str]:
        """The cells the run means to hold: this session's and, with --resume, those recorded before it."""
        return {p.cell.id for p in self.selected} | self.previously_recorded

    def notice(self, msg: str) -> None:
        """A line the user must see whatever the verbosity (-q hides progress lines, never these)."""
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        capman = self.config.pluginmanager.get_plugin("capturemanager")
        if tr is not None:
            if capman is not None:
                with capman.global_and_fixture_disabled():
                    tr.write_line(f"[yolo26-bench] {msg}", yellow=True)
            else:
                tr.write_line(f"[yolo26-bench] {msg}", yellow=True)
        log.warning("%s", msg)

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


def nightplan_of(run_dir: Path) -> dict | None:
    """The plan an earlier session of this run wrote to its env.json, None without one."""
    try:
        return json.loads((run_dir / "env.json").read_text(encoding="utf-8")).get("plan")
    except (OSError, ValueError, AttributeError):
        return None


def _backend_names() -> list[str]:
    from harness import backends

    return list(backends.names())


def pytest_configure(config: pytest.Config) -> None:
    for name, text in (
        ("gpu", "needs an NVIDIA GPU"),
        ("cell", "a benchmark matrix cell"),
        ("xdist_group(name)", "pytest-xdist --dist loadgroup: tests of one group run on one worker"),
    ):
        config.addinivalue_line("markers", f"{name}: {text}")
    # Validate every option before any work starts: a bad value is one `ERROR:` line and exit status 4.
    if not config.option.help:
        _session(config)
        if not hasattr(config, "workerinput"):
            # SIGINT and SIGTERM (a CI cancel, `kill`) end the session alike: the run is marked incomplete and its
            # workers end with it (by default Python dies of SIGTERM at once, with no chance to say so)
            interrupt.install(on_signal=_end_workers)


def _end_workers() -> None:
    """At a signal: end the running workers, saying which signal (their records say the harness killed them)."""
    kill_live_workers(f"the run was interrupted by {interrupt.received() or 'a signal'}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """Between two cells, a safe point: a signal whose KeyboardInterrupt was lost on the way (raised in a finalizer,
    say) still stops the session here, before the next cell, as interrupted (harness.execute.interrupt)."""
    result = yield
    why = interrupt.received()
    if why is not None and not item.session.shouldstop:
        item.session.shouldstop = f"interrupted by {why}"
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session: pytest.Session):
    """After the last cell's test: the scenario phase (--scenarios decision), which decides on the run's records
    and measures what the answers lack (harness.execute.scenario_phase). Not after a stop, a signal or -x; a
    signal during it ends the session as interrupted, as during a cell."""
    result = yield
    bench = session.config.stash.get(BENCH_KEY, None)
    if bench is not None and not (
        session.shouldstop or session.shouldfail or session.config.option.collectonly
    ):
        run_scenario_phase(bench)
    return result


def run_scenario_phase(bench: BenchSession) -> None:
    """The scenario phase of the session's run, where it has one and holds records; its budget: --scenario-budget,
    within --time-budget what the budget has left (less the run's end), never more than --scenario-budget."""
    cfg = bench.run_config
    if not cfg.scenario_phase or bench.stopped or interrupt.received() is not None:
        return
    if not recorded_cells(cfg.run_dir):
        return
    budget = cfg.scenario_budget_s
    if bench.time_budget_s is not None:
        left = bench.time_budget_s - (time.perf_counter() - bench.t0) - RESERVE_SHARE * bench.time_budget_s
        # what the budget has left, never more: the re-plans kept the plan's share for it (harness.plan.replan)
        budget = min(budget, max(0.0, left))
    t0 = time.perf_counter()
    try:
        bench.runner.measure_decision(bench.report_constraints, max(0.0, budget))
    except RecordWriteError as e:
        bench.stop(e)
    except Exception as e:
        # the records are whole: a phase that fails leaves their answers unmeasured, said so
        log.exception("scenario phase failed")
        bench.notice(f"scenario phase failed ({type(e).__name__}: {e}); the records are intact")
    tick(bench, "scenario_phase_done", time.perf_counter() - t0)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int):
    """The end of the session (the run's end written to env.json, the history import, the report) is not cut by a
    signal: one that arrives now is noted, the summary reads the note at its safe points (the run is then
    incomplete and not imported), and the session ends with exit status 2 (interrupted). A history import or a
    report that failed fails the session too (finish.END_FAILED), its line already in the summary."""
    with interrupt.deferred():
        result = yield
    bench = session.config.stash.get(BENCH_KEY, None)
    if interrupt.received() is not None and bench is not None:
        session.exitstatus = pytest.ExitCode.INTERRUPTED
    elif end_failures(bench) and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        session.exitstatus = END_FAILED
    return result


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
    labels = group_labels([p.cell for p in session.planned])
    for p in session.planned:
        # a workload's cells are timed together: pytest-xdist's --dist loadgroup keeps them on one worker
        marks = [pytest.mark.cell, pytest.mark.xdist_group(labels[p.cell.id])]
        if p.cell.device in ("cuda", "gpu"):
            marks.append(pytest.mark.gpu)
        params.append(pytest.param(p, id=p.cell.id, marks=marks))
    metafunc.parametrize("cell", params)


@pytest.fixture(scope="session")
def bench_session(request: pytest.FixtureRequest) -> BenchSession:
    return _session(request.config)


class ReplayClock:
    """pytest-benchmark's clock while it takes in a cell's rounds: each start/end pair of calls advances by one
    recorded round, so its table and JSON show exactly the rounds of the record.

    The rounds were timed by the harness (interleaved with the workload's other backends, harness.measure.
    interleave), usually before this cell's test ran; pytest-benchmark has no public way to add rounds measured
    elsewhere, so its pedantic mode runs a no-op once per round with this clock in place of its timer.
    """

    def __init__(self, samples_ms: list[float]) -> None:
        self.rounds = [v / 1000.0 for v in samples_ms]
        self.now = 0.0
        self.calls = 0

    def __call__(self) -> float:
        if self.calls % 2 == 1:  # the end of a round
            self.now += self.rounds[self.calls // 2]
        self.calls += 1
        return self.now

    def __repr__(self) -> str:
        return "yolo26-bench rounds (perf_counter_ns, replayed)"

    __name__ = "yolo26_bench_rounds"


def replay_rounds(benchmark, samples_ms: list[float] | None) -> None:
    """Hand the record's rounds to pytest-benchmark (its table, --benchmark-json, its comparisons)."""
    if not samples_ms or getattr(benchmark, "disabled", False) or not hasattr(benchmark, "_timer"):
        return
    original = benchmark._timer
    benchmark._timer = ReplayClock(samples_ms)
    try:
        benchmark.pedantic(_no_op, rounds=len(samples_ms), iterations=1, warmup_rounds=0)
    finally:
        benchmark._timer = original


def _no_op() -> None:
    return None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    """--time-budget: the collected cells cut to the night's plan (harness.pytest_plugin.nightplan)."""
    bench = config.stash.get(BENCH_KEY, None)
    if bench is None or bench.time_budget_s is None:
        return
    from harness.pytest_plugin import nightplan

    done = frozenset(c for c in bench.recorded if c not in bench.rerun)
    nightplan.apply(config, items, _planned_of, bench, done)


def pytest_collection_finish(session: pytest.Session) -> None:
    """The cells this session runs (after -k, -m and --resume), for the export phase and the workloads."""
    bench = session.config.stash.get(BENCH_KEY, None)
    if bench is None:
        return
    bench.selected = _planned_of(session.items)


def _planned_of(items: list) -> list[PlannedCell]:
    """The planned cells of the collected test items, in order."""
    return [
        item.callspec.params["cell"]
        for item in items
        if hasattr(item, "callspec") and isinstance(item.callspec.params.get("cell"), PlannedCell)
    ]


def pytest_report_collectionfinish(config: pytest.Config, items: list) -> list[str] | None:
    """Under --collect-only: each selected cell's fate here, a skip with its reason or "runs here"
    (harness.pytest_plugin.preview), so a GPU run can be rehearsed on a machine without a GPU."""
    if BENCH_KEY not in config.stash or not config.option.collectonly:
        return None
    from harness.pytest_plugin.preview import preview_lines

    session = config.stash[BENCH_KEY]
    return preview_lines(_planned_of(items), session.skip_reasons, session.run_config.fake_cuda)


def _timed_cells(session: BenchSession) -> list[PlannedCell]:
    """Selected cells that are timed in workloads: not excluded, not dynamic, not already recorded (--resume), not
    left for later by a re-plan."""
    return [
        p
        for p in session.selected
        if not p.excluded
        and not p.cell.shape.dynamic
        and (p.cell.id not in session.recorded or p.cell.id in session.rerun)
        and p.cell.id not in session.left_for_later
    ]


def workload_records(session: BenchSession, planned: PlannedCell) -> list[CellRecord]:
    """The cell's records: its workload is timed (all its selected cells together) when its first cell's test
    runs; the others' tests then report what was recorded for them.

    The export phase runs at the first such test: every selected cell exported and probed ahead of timing (under
    pytest-xdist each worker prepares each workload as it comes, since it runs only some of them).
    """
    cell = planned.cell
    if cell.id in session.done:
        return session.done.pop(cell.id)
    cells = [p.cell for p in _timed_cells(session)]
    if not session.prepared:
        session.prepared = True
        if not hasattr(session.config, "workerinput"):
            t0 = time.perf_counter()
            session.runner.prepare(cells)
            tick(session, "export_phase_done", time.perf_counter() - t0, session.runner.prepared)
            cells = [p.cell for p in _timed_cells(session)]  # less what a re-plan left for later
            t0 = time.perf_counter()
            session.runner.time_all(cells)
            tick(session, "timing_phase_done", time.perf_counter() - t0)
    cells = [c for c in cells if c.id not in session.left_for_later]
    if cell.id in session.left_for_later:  # the test that ran the phases: a re-plan left its own cell
        pytest.skip(session.left_for_later[cell.id])
    mates = mates_of(cell, cells)
    for m in mates:  # --resume: every mate's earlier crashed/timed-out records go aside before the group runs
        resume_cell(session, m.id)
    if hasattr(session.config, "workerinput"):
        session.runner.prepare(mates)
    t0 = time.perf_counter()
    out = session.runner.run_workload(mates)
    tick(
        session, "workload_done", workload_label(cell), time.perf_counter() - t0, [v[0] for v in out.values()]
    )
    session.done.update({k: v for k, v in out.items() if k != cell.id})
    return out[cell.id]


def run_cell_test(planned: PlannedCell, session: BenchSession, benchmark) -> CellRecord:
    """Body of a suite test: run the cell (with its workload), keep its record, map its status to a pytest
    outcome."""
    cell = planned.cell
    benchmark.group = f"{cell.model}-{cell.head}-{cell.shape.label}-b{cell.batch}"
    interrupt.check()  # a safe point: no cell starts once the run was told to stop
    resume_cell(session, cell.id)
    if cell.id in session.left_for_later:  # not a record: --resume runs it
        pytest.skip(session.left_for_later[cell.id])
    start_clock(session)
    try:
        if planned.excluded or cell.shape.dynamic:
            t0 = time.perf_counter()
            recs = session.runner.run_cell_all(cell, skip_reason=planned.excluded)
            tick(session, "alone_done", cell.id, time.perf_counter() - t0)
        else:
            recs = workload_records(session, planned)
    except RecordWriteError as e:
        session.stop(e)
    rec = recs[0]
    session.records.extend(recs)
    session.primary.append(rec)
    replay_rounds(benchmark, rec.samples_ms)
    benchmark.extra_info.update(cell_id=cell.id, status=rec.status, weights=rec.weights)
    if rec.paired:
        benchmark.extra_info.update(paired=rec.paired["ratio"], paired_reference=rec.paired["reference"])
    if rec.status == "skipped":
        pytest.skip(rec.reason)
    if rec.status in TRACED_STATUSES:  # not run here: a fake-device trace is neither a GPU pass nor a failure
        pytest.skip(f"{rec.status}: {rec.reason}")
    verdict = session.expected.judge(rec, session.update_command)
    if session.config.getoption("update_expected"):
        return rec  # the file is rewritten at the end of the session; outcomes follow the new file
    if verdict.outcome == "xfail":
        pytest.xfail(verdict.message)
    if verdict.outcome in ("fail", "xpass"):
        pytest.fail(verdict.message, pytrace=False)
    return rec


def start_clock(session: BenchSession) -> None:
    """The remaining-time estimate, at the first cell (after the runner has probed every backend): printed now,
    then after each part of the run (harness.pytest_plugin.eta). Not under pytest-xdist (each worker runs a share
    it does not know in advance)."""
    if session.clock_started or hasattr(session.config, "workerinput"):
        return
    session.clock_started = True
    timed = [p.cell for p in _timed_cells(session)]
    alone = [
        p.cell
        for p in session.selected
        if (p.excluded or p.cell.shape.dynamic)
        and (p.cell.id not in session.recorded or p.cell.id in session.rerun)
    ]
    try:
        session.runner  # noqa: B018 (the runner probes every planned backend first: the estimate reuses that)
        session.clock = eta.plan_of(session, timed, alone)
        session.clock.say_start()
    except pytest.exit.Exception:
        # a stop (the results disk full while env.json took the plan) is the run's own: never an estimate failure
        raise
    except Exception as e:  # an estimate never stops a run
        log.exception("estimate failed")
        session.progress(f"estimate: not available ({type(e).__name__}: {e})")


def tick(session: BenchSession, event: str, *args) -> None:
    """Tell the clock that a part of the run ended (an estimate failure is logged, never raised)."""
    if session.clock is None:
        return
    try:
        getattr(session.clock, event)(*args)
    except pytest.exit.Exception:
        raise
    except Exception:
        log.exception("estimate: %s failed", event)
    replan_session.check(session, event, *args)  # past the budget now: the lowest-ranked cells wait


def _write_canary(session: BenchSession, tr) -> None:
    """env.json's `canary`: how the machine's speed moved through the run (harness.measure.canary)."""
    runner = session._runner
    if runner is None:
        return
    from harness.measure.canary import no_canary

    try:
        env = read_env(session.run_config.run_dir) or {}
        env["canary"] = runner.canary.summary() if runner.canary else no_canary(runner.canary_reason())
        write_env(session.run_config.run_dir, env)
    except (OSError, ValueError, RecordWriteError) as e:
        tr.write_line(f"canary: not written to env.json ({e})")
        return
    c = env["canary"]
    if c.get("median") is not None:
        tr.write_line(
            f"drift canary: median {c['median']:.3f} ms, min {c['min']:.3f}, max {c['max']:.3f} "
            f"(max/min {c['max_over_min']:.2f}) over {len(c['readings'])} readings"
        )


def _shard(config: pytest.Config) -> str | None:
    """This session's pytest-split group ('group-K-of-N'), when it is one shard of a run; else None."""
    splits, group_ = config.getoption("splits", None), config.getoption("group", None)
    return f"group-{group_}-of-{splits}" if splits and group_ else None


def claim_run(config: pytest.Config, run_dir: Path) -> RunClaim:
    """Claim the run directory for this session's life (harness.core.run_claim): a second run on the same id,
    resume or not, is refused with one error line naming the holder."""
    try:
        return run_claim.claim(run_dir, shard=_shard(config))
    except run_claim.RunClaimed as e:
        raise SelectionError(f"--run-id {run_dir.name}: {e}") from None
    except OSError as e:
        raise SelectionError(f"--run-id {run_dir.name}: cannot claim {run_dir}: {e}") from None


def existing_run(config: pytest.Config, run_dir: Path, resume: bool) -> dict[str, CellRecord]:
    """The cells `run_dir` has recorded (cell id -> record) when --resume goes on with it; refuses (one error line)
    a run id that already holds a run without --resume, so no run appends duplicates to another in silence.
    The directory is claimed first (`claim_run`), so no other run can start on it between this check and the
    end of the session."""
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: the controller checked before workers started
        return recorded_records(run_dir) if resume else {}
    claim = claim_run(config, run_dir)
    config.stash[CLAIM_KEY] = claim
    if not run_claim.holds_a_run(run_dir):
        return {}
    try:
        recorded = recorded_records(run_dir)
    except (OSError, ValueError) as e:
        release_claim(config)
        raise SelectionError(f"--run-id: {run_dir} holds records that cannot be read ({e})") from None
    if not resume:
        release_claim(config)
        raise SelectionError(
            f"--run-id {run_dir.name}: {run_dir} already holds a run ({len(recorded)} cells recorded); pass "
            "--resume to run only the cells it lacks, or choose another --run-id"
        )
    return recorded


def release_claim(config: pytest.Config) -> None:
    """Give up this session's claim on its run directory (harness.core.run_claim)."""
    claim = config.stash.get(CLAIM_KEY, None)
    if claim is not None:
        claim.release()
        del config.stash[CLAIM_KEY]


def pytest_unconfigure(config: pytest.Config) -> None:
    try:
        final_line(config)
    finally:
        release_claim(config)


def resume_cell(session: BenchSession, cell_id: str) -> None:
    """--resume: skip a cell the run has recorded; one whose failure may not recur (crashed, timed out, or of a
    class such as environment or out_of_memory: harness.diagnosis.recurrence) runs again, said in a progress line,
    its earlier records moved to cells.jsonl.superseded so the run never holds two verdicts for one cell."""
    if cell_id not in session.recorded:
        return
    why = session.rerun.get(cell_id)
    if why is None:
        pytest.skip(f"already recorded in run {session.run_id} {session.kept[cell_id]} (--resume)")
    try:
        moved = session.runner.writer.set_aside(cell_id)
    except RecordWriteError as e:
        session.stop(e)
    session.recorded.pop(cell_id)  # set aside once (a workload sets its cells' aside before it runs)
    session.rerun.pop(cell_id)
    session.progress(
        f"{cell_id}: {why}; running it again ({moved} earlier records moved to cells.jsonl{SUPERSEDED_SUFFIX})"
    )


def _class(rec: CellRecord) -> str | None:
    """The failure class a record holds, if any."""
    cls = (rec.failure or {}).get("class") if isinstance(rec.failure, dict) else None
    return cls if isinstance(cls, str) else None


def mark_run_end(session: BenchSession, exitstatus: int, tr) -> str | None:
    """Say in env.json whether the run ended whole: the `incomplete` mark written at its start is removed, or
    completed with why and how many cells it holds (interrupted by SIGINT or SIGTERM, stopped by a failed write).
    Returns the incomplete note, or None when the run ended normally."""
    run_dir = session.run_config.run_dir
    # No env.json: the run never started. Under pytest-xdist the workers wrote it (this controller ran no cell):
    # the controller, which outlives them, still says how the run ended.
    if not (run_dir / "env.json").is_file():
        return None
    signalled = interrupt.received()
    interrupted = exitstatus == pytest.ExitCode.INTERRUPTED or bool(session.stopped) or signalled is not None
    env: dict = {INCOMPLETE_KEY: {"reason": "interrupted"}} if interrupted else {}
    try:
        env = read_env(run_dir) or {}
        if interrupted:
            why = (
                f"stopped: {session.stopped}"
                if session.stopped
                else f"interrupted by {signalled or 'SIGINT'}"
            )
            planned = session.planned_ids() or {
                p.cell.id for p in session.planned
            }  # xdist: none collected here
            env[INCOMPLETE_KEY] = {
                "reason": why,  # whole: a reason cut at 300 characters ended mid-sentence
                "cells_recorded": len(planned & set(recorded_cells(run_dir))),
                "cells_planned": len(planned),
            }
        else:
            env.pop(INCOMPLETE_KEY, None)
        cpu_quota.env_at_end(env)  # the CPU quota's throttle counters at the run's end
        write_env(run_dir, env)
    except (OSError, ValueError) as e:
        tr.write_line(f"env.json: the run's end not recorded ({e})")
    return incomplete_note(env) if interrupted else None


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    session = config.stash.get(BENCH_KEY, None)
    if session is None:
        return
    incomplete = mark_run_end(session, exitstatus, terminalreporter)
    if incomplete:
        _say_incomplete(session, incomplete, terminalreporter)
    if not session.records:
        return
    tr = terminalreporter
    tr.section("yolo26-bench summary")
    width = max(len(r.cell_id) for r in session.records)
    tr.write_line(
        f"{'cell':<{width}}  {'status':<14} {'p50 ms':>9} {'95% CI':>17} {'rounds':>6} {'vs ref':>7}  reason"
    )
    for r in session.records:
        lat = r.latency_ms
        p50 = f"{lat.p50:.2f}" if lat else "-"
        ci = lat.p50_ci if lat else None
        ci_text = f"{ci[0]:.2f}-{ci[1]:.2f}" if ci else "-"
        rounds = (str(lat.rounds) if lat else "-") + ("!" if lat and lat.unstable else "")
        ratio = (r.paired or {}).get("ratio")
        vs = f"{ratio:.3f}" if isinstance(ratio, float) else "-"
        reason = (r.reason or "")[:80]
        tr.write_line(
            f"{r.cell_id:<{width}}  {r.status:<14} {p50:>9} {ci_text:>17} {rounds:>6} {vs:>7}  {reason}"
        )
    counts: dict[str, int] = {}
    for r in session.records:
        counts[r.status] = counts.get(r.status, 0) + 1
    tr.write_line(", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    tr.write_line(f"records: {session.run_config.run_dir / 'cells.jsonl'}")
    if incomplete or _signalled_at_the_end(session, tr):
        return  # interrupted or stopped: the history and the report would read a partial run as whole
    t0 = time.perf_counter()
    _write_canary(session, tr)
    if config.getoption("update_expected"):
        added, removed = session.expected.update(session.primary)
        tr.write_line(
            f"expected status: {added} entries added or changed, {removed} removed in {session.expected.path}"
        )
    if _signalled_at_the_end(session, tr):
        return
    session.report_path = _render_report(session, tr)
    if session.clock is not None:
        try:
            session.wall_s = session.clock.finish(time.perf_counter() - t0)
        except Exception:
            log.exception("estimate: the timeline was not written")


def _signalled_at_the_end(session: BenchSession, tr) -> bool:
    """A safe point of the end-of-run summary (signals are deferred through it): a signal that came after the run's
    end was written as whole, and before the history import, makes it incomplete after all."""
    if interrupt.received() is None:
        return False
    incomplete = mark_run_end(session, pytest.ExitCode.INTERRUPTED, tr)
    if incomplete:
        _say_incomplete(session, incomplete, tr)
    return True


def _say_incomplete(session: BenchSession, incomplete: str, tr) -> None:
    tr.write_line(
        f"yolo26-bench: run {session.run_id} is {incomplete}; marked so in env.json, not imported into the "
        "history and no report rendered (`python -m harness import` and the report label it incomplete)",
        yellow=True,
    )


def final_line(config: pytest.Config) -> None:
    """The run's last line, after pytest's own summary: where the report is, and the start estimate beside the
    time the run took."""
    session = config.stash.get(BENCH_KEY, None)
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if session is None or tr is None or not session.records or hasattr(config, "workerinput"):
        return
    took = ""
    if session.clock is not None and session.wall_s is not None:
        took = (
            f"took {fmt_duration(session.wall_s)} from the first estimate (which said "
            f"{fmt_duration(session.clock.at_start_s)}); "
        )
    where = (
        f"report: {session.report_path}"
        if session.report_path
        else f"records: {session.run_config.run_dir / 'cells.jsonl'} (no report)"
    )
    tr.write_line(f"yolo26-bench: {took}{where}")
