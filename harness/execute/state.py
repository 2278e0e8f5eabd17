"""What one attempt of a cell is (`Attempt`) and what it knows so far (`AttemptState`), and how a stage ends it.

The state flows through the stages (harness.execute.stages): each reads what earlier ones left and adds its own.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from harness.core.cell import Cell
from harness.core.record import CellRecord
from harness.diagnosis.failure import failure_from_exception, failure_from_outcome, first_line
from harness.diagnosis.outcome import ExportOutcome
from harness.measure.base import Tracker
from harness.measure.interleave import Interleaved


@dataclass
class Attempt:
    """One recorded attempt: the cell that runs, how its record is labelled, and what differs from the plain cell."""

    cell: Cell
    cell_id: str
    remedy: str | None = None
    remedy_of: str | None = None
    export_options: dict = field(default_factory=dict)
    #: how the backend loads the artifact (a remedy's load_options): not part of the export, so no re-export
    load_options: dict = field(default_factory=dict)
    export_cell: Cell | None = None  # the cell whose export is reused (dynamic sweeps run one artifact)
    skip_reason: str | None = None
    prebuilt: ExportOutcome | None = None  # an export made outside this attempt (the dynamic artifact)


@dataclass
class AttemptState:
    """What one attempt knows so far; each stage reads what earlier ones left and adds its own."""

    attempt: Attempt
    rec: CellRecord
    log_path: Path
    #: the run's results directory: the record's paths (its log) are relative to it
    run_dir: Path
    backend: Any = None
    mat: Any = None
    artifact: Path | None = None
    export_info: dict = field(default_factory=dict)
    fresh: bool = False
    outcome: ExportOutcome | None = None
    runner: Any = None
    prepared: Any = None
    outputs: list[np.ndarray] | None = None
    call: Callable[[], None] | None = None
    trackers: list[Tracker] = field(default_factory=list)
    samples: list[float] = field(default_factory=list)
    #: the fastest warm-up round (ms): how long a round takes, for blocking the timed rounds
    estimate_ms: float | None = None
    #: the timing of this attempt's rounds, interleaved with its workload's other runners or alone; set by the
    #: workload (harness.execute.workload) before the timed-rounds stage when the attempt is timed with others
    timed: Interleaved | None = None
    #: the canary readings around the timing (harness.measure.canary.around)
    canary: dict | None = None
    #: index into the stages of the next stage to run (an attempt can be advanced in parts: harness.execute.workload)
    next_stage: int = 0
    #: the content of a cached artifact that failed to load: the export stage asks for it to be exported again
    replace_digest: str | None = None
    #: why this attempt re-exported a cached artifact (said in the record); set once, so it retries only once
    reexported: str | None = None
    #: the end-to-end rounds (harness.execute.usecase), or why they could not run
    e2e: Any = None
    e2e_error: str | None = None
    #: the end-to-end pairs its workload timed at least (harness.execute.usecase.e2e_min_pairs)
    e2e_min_pairs: int = 20
    #: its end-to-end p50 over each other cell's whose end-to-end rounds were interleaved with its own: cell id ->
    #: {ratio, ratio_ci, trials} (harness.execute.usecase.time_e2e_together), for the record's `paired_e2e`
    e2e_paired: dict | None = None
    #: when the attempt's clock started (time.perf_counter()): its record's duration_s runs from here
    t0: float = 0.0
    #: the seconds its export phase took, when the attempt is advanced in parts (harness.execute.workload)
    prep_s: float = 0.0
    #: the libstdc++ preload the probes checked (harness.execute.isolate.run_probe), for the record's `loader`
    preload: dict | None = None

    @property
    def cell(self) -> Cell:
        return self.attempt.cell

    def rel(self, path: Path | str) -> str:
        """`path` relative to the run's results directory, as the record names it."""
        return str(Path(path).relative_to(self.run_dir))


def fail(
    s: AttemptState, status: str, stage: str, exc: BaseException, progress: Callable[[str], None]
) -> bool:
    """End the attempt on an exception raised in `stage`: status, reason, diagnosis, full traceback in the log."""
    with open(s.log_path, "a") as f:
        f.write(f"=== {stage} failed\n{traceback.format_exc()}")
    s.rec.status = status
    s.rec.reason = first_line(str(exc)) or type(exc).__name__
    s.rec.log = s.rel(s.log_path)
    s.rec.failure = failure_from_exception(exc, stage, s.rec.log)
    progress(f"{s.rec.cell_id}: {status}: {s.rec.reason}")
    return False


def fail_outcome(
    s: AttemptState, outcome: ExportOutcome, stage: str, progress: Callable[[str], None]
) -> bool:
    """End the attempt on an isolated step (export or probe) that did not end ok."""
    s.rec.status = outcome.status
    s.rec.reason = first_line(outcome.message) or outcome.status
    s.rec.log = s.rel(outcome.log) if outcome.log else s.rec.log
    failure = failure_from_outcome(outcome, stage, s.rec.log)
    s.rec.failure = failure
    progress(f"{s.rec.cell_id}: {outcome.status} ({failure['class']}): {s.rec.reason}")
    return False
