"""The roofline stage, after parity: an ok cell's counted work against the run's measured peaks.

The work is the reference model's, counted on the forward pass parity ran (harness.measure.parity.References.work:
no second model, no second export); the peaks are the run's env.json `peaks`, measured when the run started
(harness.measure.peaks, through harness.measure.machine.facts) and read again beside each workload, each figure the
best of every reading (harness.measure.peak_readings); the figures are
harness.core.roofline's, the same arithmetic the report and `yolo26-bench check` apply. Never ends the attempt.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from harness import threads as thread_budget
from harness.core.record import Roofline, set_null
from harness.core.results_dir import read_env, write_env
from harness.core.roofline import PEAK_DEVICES, PEAK_LEVELS, figures, precision_of
from harness.diagnosis.failure import first_line
from harness.execute.state import AttemptState
from harness.measure import peak_readings
from harness.measure.parity import References

log = logging.getLogger(__name__)

#: why a cell of a run without env.json has no peaks
NO_ENV = (
    "the run has no env.json (the peaks are measured when a suite run starts: harness.measure.machine.facts)"
)


class RunPeaks:
    """The run's measured peaks (env.json `peaks`), read from the run directory once, when the first ok cell needs
    them (the plugin writes env.json before any cell runs), then read again beside each workload (its first ok
    cell's roofline, right after its timing), each figure the best of every reading (harness.measure.peak_readings):
    a reading taken while another process loaded a shared machine does not set the roof of the run. The best so far
    is written back to env.json's `peaks`. `again` reads them (tests pass a fake)."""

    def __init__(self, run_dir: Path, threads: int | None = None, again=None) -> None:
        self._run_dir = Path(run_dir)
        self._threads = threads
        self._again = again
        self._lock = threading.Lock()
        self._read = False
        self._peaks: dict | None = None
        self._why = NO_ENV
        self._run_id = ""
        self._took = None
        self._beside: set[tuple] = set()

    def get(self, cell=None, precision: str | None = None) -> tuple[dict | None, str, str]:
        """(the peaks or None, why there are none, where they come from); with `cell`, read again first when it is
        its workload's first at `precision`."""
        with self._lock:
            if not self._read:
                self._read = True
                try:
                    env = read_env(self._run_dir)
                except ValueError as e:
                    env, self._why = None, f"the run's env.json cannot be read: {first_line(str(e))}"
                if env is not None:
                    peaks = env.get("peaks")
                    self._peaks = peaks if isinstance(peaks, dict) else None
                    self._run_id = str(env.get("run_id"))
                    self._took = self._peaks.get("measured_in_s") if self._peaks is not None else None
                    if self._peaks is None:
                        self._why = "the run's env.json has no `peaks` (written without them)"
            if self._peaks is None:
                return None, self._why, ""
            kind = PEAK_DEVICES.get(str(cell.device)) if cell is not None else None
            if kind is not None and isinstance(self._peaks.get(kind), dict) and precision in PEAK_LEVELS:
                self._beside_workload(cell, kind, precision)
            return self._peaks, self._why, self._source(kind)

    def _beside_workload(self, cell, kind: str, precision: str) -> None:
        levels = tuple(p for p in PEAK_LEVELS[precision] if kind == "cuda" or p != "tf32")
        # once per workload (its cells differ only in the backend) and set of precisions
        key = (cell.size, cell.task, cell.head, cell.device, cell.shape.label, cell.batch, kind, levels)
        if key in self._beside:
            return
        self._beside.add(key)
        again = self._again or peak_readings.read_again
        reading = again(self._peaks, kind, levels, self._threads or thread_budget.budget())
        at = f"the workload of {cell.id}"
        self._peaks = peak_readings.best_of(self._peaks, reading, at)
        try:  # the best so far in env.json too: the report's roofs, a run killed later
            env = read_env(self._run_dir) or {}
            env["peaks"] = self._peaks
            write_env(self._run_dir, env)
        except (OSError, ValueError) as e:
            log.warning("the peaks read beside %s not written to env.json: %s", at, e)

    def _source(self, kind: str | None) -> str:
        took = f", measured in {self._took} s when it started" if self._took is not None else ""
        out = f"env.json peaks of run {self._run_id}{took}"
        n = peak_readings.readings_of(self._peaks or {}, kind) if kind else 1
        if n > 1:
            out += (
                f"; each figure the best of {n} readings, at the run's start and beside {n - 1} workload(s), "
                "this cell's last (harness.measure.peak_readings)"
            )
        return out


def roofline(s: AttemptState, references: References, peaks: RunPeaks) -> bool:
    """Fill the record's `roofline` section for an ok cell (only ok cells carry one: harness.core.record's
    OPTIONAL_FIELDS)."""
    rec, cell = s.rec, s.cell
    if rec.status != "ok":
        return True
    h, w = cell.shape.height, cell.shape.width
    work, work_why = None, "the model's work was not counted"
    if not h or not w:
        work_why = "the dynamic probe has no one shape (its sweep records have the work of theirs)"
    else:
        try:
            work = references.work(s.mat, cell, h, w, s.attempt.export_options)
        except Exception as e:  # a figure that cannot be counted is a null with its reason, never a lost cell
            log.exception("counting the work of %s failed", s.attempt.cell_id)
            work_why = f"the count failed: {type(e).__name__}: {first_line(str(e))}"
    found, why_none, source = peaks.get(cell, precision_of(rec.precision_executed, rec.precision_requested))
    p50 = rec.latency_ms.p50 if rec.latency_ms is not None else None
    values, reasons = figures(
        work,
        p50,
        rec.device,
        rec.precision_executed,
        rec.precision_requested,
        found,
        rec.precision_detail,
        work_why,
        why_none,
    )
    rec.roofline = Roofline(
        **values,
        work_source=str(work.get("how", "")) if work else "",
        peaks_source=source,
    )
    for key, why in reasons.items():
        set_null(rec, f"roofline.{key}", why)
    return True
