"""Turn how a step ended (an isolated outcome or an in-process exception) into the record's `failure` dict."""

from __future__ import annotations

import logging
import traceback as tb_mod

from harness.diagnosis.outcome import ExportOutcome

log = logging.getLogger(__name__)

OUTCOME_STATUS_CLASS = {"timeout": "timeout", "crashed": "crash"}


def first_line(msg: str | None) -> str | None:
    if not msg:
        return None
    for line in str(msg).splitlines():
        if line.strip():
            return line.strip()[:500]
    return None


def _classify(message, traceback, exception_type, stage, signal, status) -> dict:
    try:
        from harness.diagnosis.classify import classify
    except ImportError:  # the classifier is optional for the core; without it the class is unknown
        return {
            "class": OUTCOME_STATUS_CLASS.get(status or "", "unknown"),
            "stage": stage,
            "message": first_line(message),
            "ops": [],
            "guards": [],
            "suggested_fix": None,
            "exception_type": exception_type,
            "log": None,
        }
    return classify(
        message, traceback=traceback, exception_type=exception_type, stage=stage, signal=signal, status=status
    )


def parity_failure(reason: str) -> dict:
    """The `failure` dict of a cell whose outputs disagree with the reference beyond its tolerance."""
    return {
        "class": "numerical_mismatch",
        "stage": "parity",
        "message": reason,
        "ops": [],
        "guards": [],
        "suggested_fix": None,
        "exception_type": None,
        "log": None,
    }


def failure_from_outcome(outcome: ExportOutcome, stage: str, log_rel: str | None) -> dict:
    f = _classify(
        outcome.message, outcome.traceback, outcome.exception_type, stage, outcome.signal, outcome.status
    )
    f["signal"] = outcome.signal
    f["log"] = log_rel
    if outcome.fault:
        # where a native crash happened, whose code it was and which step (export, load, run) called it: a crash
        # inside a runtime's own loader is the runtime's, not the model's
        f.update(outcome.fault)
    return f


def failure_from_exception(exc: BaseException, stage: str, log_rel: str | None) -> dict:
    tb = "".join(tb_mod.format_exception(exc))
    etype = f"{type(exc).__module__}.{type(exc).__qualname__}"
    f = _classify(str(exc), tb, etype, stage, None, None)
    f["log"] = log_rel
    return f
