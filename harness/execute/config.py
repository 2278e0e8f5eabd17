"""Session-wide settings of a run (from the pytest options, or built directly by tests and benchmarks)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.threads import physical_cores
from harness.yolo.dynamic import DEFAULT_RANGE, SWEEP


@dataclass(frozen=True)
class RunConfig:
    """Session-wide settings of a run."""

    run_id: str
    results_dir: Path
    cache_dir: Path
    weights_dir: Path | None = None
    seed: int = 0
    warmup: int = 2
    rounds: int | None = None  # None: as many as fit in min_time, within [min_rounds, max_rounds]
    min_time_s: float = 2.0
    min_rounds: int = 5
    max_rounds: int = 200
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

    @property
    def run_dir(self) -> Path:
        return Path(self.results_dir) / self.run_id

    def plan_rounds(self, estimate_ms: float) -> int:
        if self.rounds is not None:
            return self.rounds
        n = math.ceil(self.min_time_s * 1000.0 / max(estimate_ms, 1e-3))
        return max(self.min_rounds, min(self.max_rounds, n))
