"""An attempt's record: opened when the attempt starts, a harness crash said in it, and written when it finishes.

Every attempt writes exactly one record as soon as it finishes, whatever failed, so a crash in one cell never loses
the records of the others.
"""

from __future__ import annotations

import logging
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path

from harness.core.memory_order import enforce_memory_order
from harness.core.null_reasons import fill_null_reasons
from harness.core.record import CellRecord, new_record
from harness.core.results_dir import RecordWriter
from harness.diagnosis.failure import failure_from_exception
from harness.execute.state import Attempt, AttemptState

log = logging.getLogger(__name__)


def start(a: Attempt, run_id: str, run_dir: Path) -> AttemptState:
    """The state of a new attempt, its record opened (and its clock started)."""
    rec = new_record(run_id, a.cell, weights="unknown")
    rec.cell_id, rec.remedy, rec.remedy_of = a.cell_id, a.remedy, a.remedy_of
    rec.started_at = datetime.now(UTC).isoformat(timespec="seconds")
    return AttemptState(a, rec, run_dir / "logs" / f"{a.cell_id}.log", run_dir, t0=time.perf_counter())


def crashed(s: AttemptState, e: Exception) -> None:
    """The harness itself failed in this attempt: the record says so, the traceback goes to its log."""
    log.exception("cell %s crashed in the harness", s.attempt.cell_id)
    try:
        with open(s.log_path, "a") as f:
            f.write(traceback.format_exc())
    except OSError:  # a full disk: the record still gets written (or its write stops the run)
        log.warning("could not write the traceback to %s", s.log_path)
    s.rec.status = "crashed"
    s.rec.reason = f"harness error: {type(e).__name__}: {e}"
    s.rec.log = s.rel(s.log_path)
    s.rec.failure = failure_from_exception(e, "harness", s.rec.log)


def finish(s: AttemptState, writer: RecordWriter) -> CellRecord:
    """The attempt's record completed (duration, the GPU memory order, null reasons) and written; returns it as
    written."""
    s.rec.duration_s = round(time.perf_counter() - s.t0, 3)
    enforce_memory_order(
        s.rec
    )  # the trackers keep it; whatever else filled the section, no contradictory pair
    fill_null_reasons(s.rec)
    s.rec = writer.write(s.rec)
    return s.rec
