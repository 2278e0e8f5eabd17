"""The roofline stage, after parity: an ok cell's counted work against the run's measured peaks.

The work is the reference model's, counted on the forward pass parity ran (harness.measure.parity.References.work:
no second model, no second export); the peaks are the run's env.json `peaks`, measured once when the run started
(harness.measure.peaks, through harness.measure.machine.facts), read here once per run; the figures are
harness.core.roofline's, the same arithmetic the report and `yolo26-bench check` apply. Never ends the attempt.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from harness.core.record import Roofline, set_null
from harness.core.results_dir import read_env
from harness.core.roofline import figures
from harness.diagnosis.failure import first_line
from harness.execute.state import AttemptState
from harness.measure.parity import References

log = logging.getLogger(__name__)

#: why a cell of a run without env.json has no peaks
NO_ENV = (
    "the run has no env.json (the peaks are measured when a suite run starts: harness.measure.machine.facts)"
)


class RunPeaks:
    """The run's measured peaks (env.json `peaks`), read from the run directory once, when the first ok cell needs
    them (the plugin writes env.json before any cell runs)."""

    def __init__(self, run_dir: Path) -> None:
        self._run_dir = Path(run_dir)
        self._lock = threading.Lock()
        self._read = False
        self._peaks: dict | None = None
        self._why = NO_ENV
        self._source = ""

    def get(self) -> tuple[dict | None, str, str]:
        """(the peaks or None, why there are none, where they come from)."""
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
                    if self._peaks is None:
                        self._why = "the run's env.json has no `peaks` (written without them)"
                    else:
                        took = self._peaks.get("measured_in_s")
                        self._source = f"env.json peaks of run {env.get('run_id')}" + (
                            f", measured in {took} s when it started" if took is not None else ""
                        )
            return self._peaks, self._why, self._source


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
    found, why_none, source = peaks.get()
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
