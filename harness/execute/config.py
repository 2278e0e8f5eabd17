"""Session-wide settings of a run (from the pytest options, or built directly by tests and benchmarks)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.measure.interleave import RoundsPolicy
from harness.threads import physical_cores
from harness.yolo.dynamic import DEFAULT_RANGE, SWEEP

#: --scenarios' default: the scenario phase measures what the decision's answers name (harness.execute.scenario_phase)
DECISION = "decision"


@dataclass(frozen=True)
class RunConfig:
    """Session-wide settings of a run."""

    run_id: str
    results_dir: Path
    cache_dir: Path
    weights_dir: Path | None = None
    seed: int = 0
    #: the committed stand-in weights (weights/standin/, trained on the generated dataset) where one exists and no
    #: --weights-dir is given; other models keep the seeded random initialisation
    standin: bool = True
    #: mAP of each cell on a dataset's val split (harness.accuracy); --no-accuracy switches it off
    accuracy: bool = True
    #: trace the CUDA cells' exports on a fake CUDA device where no GPU is, for this stated target (--fake-cuda;
    #: harness.backends._shared.fake_cuda.TARGETS); None: such cells are skipped for want of a device
    fake_cuda: str | None = None
    #: val images per cell (the first ones by name)
    accuracy_images: int = 32
    #: a user's dataset YAML (ultralytics layout) for accuracy and int8 calibration; None: the generated dataset
    data: Path | None = None
    warmup: int = 1
    #: exactly this many timed rounds per cell (--rounds); None: until the p50's interval is within +-ci_target
    #: (at least min_rounds) or max_time_s per cell is spent (harness.measure.interleave)
    rounds: int | None = None
    min_rounds: int = 10
    #: trials at least (each backend's block in each): the paired ratios of yolo26m-x at 640, whose trials are one
    #: round each, moved by up to 6.5% between two default runs with 12-13 trials
    min_trials: int = 20
    #: ... except at the time cap, where this many suffice: a workload whose trial takes seconds (yolo26x at 640 on
    #: 2 cores: 2 s) would otherwise spend several times its cap on the 20 (harness.measure.interleave)
    min_trials_at_cap: int = 10
    ci_target: float = 0.02
    #: ... and every paired ratio's interval within +-ratio_target (harness.measure.interleave)
    ratio_target: float = 0.02
    max_time_s: float = 3.0
    #: each workload's timed rounds spread over this many episodes of the timing phase (--timing-episodes;
    #: harness.execute.workload.time_all); 1 with --rounds
    episodes: int = 3
    block_s: float = 0.1
    max_rounds: int = 10_000
    #: export (and probe) processes run at once in the export phase ahead of timing (default: the physical cores)
    export_workers: int = field(default_factory=physical_cores)
    #: time the drift canary between workloads (harness.measure.canary)
    canary: bool = True
    export_timeout_s: float = 1200.0
    export_memory_gb: float | None = None
    refresh_cache: bool = False
    remedies: bool = True
    isolate_first_run: bool = True
    #: host memory is measured in a fresh process over load, first run and this many runs, so a cell's figures do
    #: not depend on the cells before it; 0 measures it in the benchmark process instead (order-dependent)
    memory_rounds: int = 2
    #: limit of each probe process (load and a few runs; not an export, so not bound by export_timeout_s)
    probe_timeout_s: float = 600.0
    dynamic_range: tuple[int, int] = DEFAULT_RANGE
    #: CPU threads every CPU runtime gets (default: the machine's physical cores)
    threads: int = field(default_factory=physical_cores)
    sweep: tuple[int, ...] = SWEEP
    #: end-to-end timing (pre-processing, copies, model, post-processing) of every cell that runs; --no-e2e
    e2e: bool = True
    #: seconds of end-to-end pairs per runner at most (harness.execute.usecase.e2e_policy)
    e2e_max_time_s: float = 1.0
    #: seconds of end-to-end pairs per runner worth the 100 pairs p99 needs, at the measured cost of a pair (a GPU
    #: cell's pair costs a few ms: 100 fit; a CPU cell at 640 costs ~100 ms: they do not, and it times the p90's)
    #: (harness.execute.usecase.e2e_min_pairs)
    e2e_p99_budget_s: float = 2.0
    #: seconds of end-to-end pairs per runner worth the 20 pairs p90 needs; slower workloads time 10 pairs
    #: (harness.execute.usecase.e2e_min_pairs)
    e2e_p90_budget_s: float = 4.0
    #: which cells run the scenarios: "decision" (the scenario phase measures what the decision's answers name,
    #: harness.execute.scenario_phase), "n640" (yolo26n at 640, batch 1), "all", "none" (--scenarios)
    scenarios: str = "decision"
    #: whether the scenario phase runs after the workloads (the suite's session sets it; without it, "decision"
    #: runs the scenarios in the workload of yolo26n at 640, batch 1, as "n640" does)
    scenario_phase: bool = False
    #: the seconds the scenario phase may spend (a measurement under way finishes; --scenario-budget)
    scenario_budget_s: float = 240.0
    #: the server scenario's latency bound (--server-bound-ms), at the durations' percentile
    server_bound_ms: float = 100.0
    #: the frame rate of the camera-capacity search (--camera-fps): how many cameras a cell serves at it
    camera_fps: float = 30.0
    #: LoadGen's minimum durations and query counts: "short" (seconds, for a CPU matrix) or "mlperf" (MLPerf's own
    #: minimums; --scenario-durations; harness.scenarios.settings)
    scenario_durations: str = "short"

    @property
    def run_dir(self) -> Path:
        return Path(self.results_dir) / self.run_id

    def rounds_policy(self) -> RoundsPolicy:
        """How many rounds each cell times, and in which blocks."""
        return RoundsPolicy(
            min_rounds=self.min_rounds,
            min_trials=self.min_trials,
            min_trials_at_cap=self.min_trials_at_cap,
            ci_target=self.ci_target,
            ratio_target=self.ratio_target,
            max_time_s=self.max_time_s,
            block_s=self.block_s,
            max_rounds=self.max_rounds,
            fixed_rounds=self.rounds,
        )
