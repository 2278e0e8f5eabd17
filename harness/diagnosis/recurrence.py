"""Which failures may not recur: those of the machine or the moment (a full disk, memory, a kill, a timeout, a
crash), not of the model, the exporter or the runtime. The one rule the export cache (never stores them, so a run
with more room exports again) and `--resume` (runs them again, where the others are kept) both follow.
"""

from __future__ import annotations

#: statuses of an attempt that ended without a verdict of its own: how the attempt ended, not what the cell does
RERUN_STATUSES = ("crashed", "timeout")
#: failure classes (harness/diagnosis/patterns.yaml) that depend on the machine or the moment, and why each may
#: not recur
TRANSIENT_CLASSES: dict[str, str] = {
    "environment": "the machine's disk or filesystem failed, not the cell",
    "out_of_memory": "memory ran out, which depends on the limit and on what else ran",
    "killed": "the process was killed, from outside or by an interrupted run",
    "timeout": "a timeout, which depends on the machine's load",
    "crash": "the process crashed",
}


def rerun_reason(status: str, failure_class: str | None) -> str | None:
    """Why `--resume` runs a recorded cell again (`recorded as export_failed (environment: ...)`), or None when its
    record is kept: a status that is no verdict (crashed, timeout), or a failure of a class that may not recur."""
    if status in RERUN_STATUSES:
        return f"recorded as {status}"
    if failure_class in TRANSIENT_CLASSES:
        return f"recorded as {status} ({failure_class}: {TRANSIENT_CLASSES[failure_class]})"
    return None


def kept_words(status: str, failure_class: str | None) -> str:
    """What `--resume` says of a recorded cell it keeps: `as skipped`, `as export_failed (unsupported_op: a failure
    of the cell, which would recur)`."""
    if failure_class and status != "ok":
        return f"as {status} ({failure_class}: a failure of the cell, which would recur)"
    return f"as {status}"
