"""Records of exports made outside a cell's attempt: the ExecuTorch CUDA exports that benchmarks/gpu_check.py runs
(full and backbone-only, one command's budget on a GPU), as records the claims check reads like any other.

A plain cell's attempt records an export-only backend as `exported` or `export_failed` (harness.execute.exporting);
these are the same two statuses with the same fields (the failure's class, message and operators from
harness.diagnosis.failure, the lowered operators' counts in `ops`), so the seed claims about ExecuTorch CUDA get
verdicts from them (harness/report/claims.yaml: index_put and topk not lowerable, the backbone-only remedy). The
backbone-only export is a remedy attempt of the full cell (`remedy: backbone-only`, `remedy_of`: the full cell's
id), as the ladder would have labelled it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from harness.backends._shared.ultralytics_export import artifact_bytes
from harness.core.cell import Cell
from harness.core.null_reasons import fill_null_reasons
from harness.core.record import CellRecord, new_record
from harness.diagnosis.failure import failure_from_outcome, first_line
from harness.diagnosis.outcome import ExportOutcome


def export_record(
    cell: Cell,
    outcome: ExportOutcome,
    run_id: str,
    weights: str,
    *,
    remedy: str | None = None,
    remedy_of: str | None = None,
    log_rel: str | None = None,
    not_run: str | None = None,
) -> CellRecord:
    """The record of one isolated export of `cell`: `exported` (why it was not run: `not_run`) with its artifact,
    export time and lowered operators, or the outcome's failure status with the classified failure."""
    rec = _new(cell, run_id, weights, remedy, remedy_of)
    rec.started_at = datetime.now(UTC).isoformat(timespec="seconds")
    rec.log = log_rel
    rec.export_s = outcome.export_s
    rec.cache_hit = outcome.wall_s is None
    rec.export_origin = "exported in this attempt (benchmarks/gpu_check.py, an isolated export)"
    rec.duration_s = outcome.wall_s
    if outcome.status == "ok":
        info = outcome.info or {}
        rec.status = "exported"
        rec.reason = not_run or "export only: the export is the finding here; nothing was loaded"
        rec.artifact = outcome.artifact
        if outcome.artifact and Path(outcome.artifact).exists():
            rec.artifact_bytes = artifact_bytes(Path(outcome.artifact))
        rec.ops = info.get("ops")
    else:
        rec.status = outcome.status
        rec.reason = first_line(outcome.message) or outcome.status
        rec.failure = failure_from_outcome(outcome, "export", log_rel)
    fill_null_reasons(rec)
    return rec


def skipped_record(
    cell: Cell,
    reason: str,
    run_id: str,
    weights: str,
    *,
    remedy: str | None = None,
    remedy_of: str | None = None,
) -> CellRecord:
    """The record of an export that could not run here (no CUDA device, no executorch): skipped, with why."""
    rec = _new(cell, run_id, weights, remedy, remedy_of)
    rec.status, rec.reason = "skipped", reason
    fill_null_reasons(rec)
    return rec


def _new(cell: Cell, run_id: str, weights: str, remedy: str | None, remedy_of: str | None) -> CellRecord:
    """A new record of `cell`, named as the remedy's record (`<cell id>+<remedy>`) when there is one."""
    rec = new_record(run_id, cell, weights)
    if remedy:
        rec.cell_id, rec.remedy, rec.remedy_of = (
            f"{remedy_of or cell.id}+{remedy}",
            remedy,
            remedy_of or cell.id,
        )
    return rec
