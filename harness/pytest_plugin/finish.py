"""The end of a benchmark session: import the run into the history, then render the report.

Both come after the records, which are safe on disk by then: a failure here never loses the run, but it fails the
session (exit status END_FAILED, where it would have been 0 or 1): CI and the nightly publish step read the exit
status, and a run whose report or import failed is not one to publish. Each failure is one line in the terminal
summary naming what failed, where, the error, and that the records are intact (with the command that does it
again from them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from harness.execute import interrupt


class BenchSession(Protocol):
    """What the end of a session reads of the plugin's session (harness.pytest_plugin.plugin.BenchSession, which
    calls this module: described here rather than imported, so that the two do not import each other)."""

    config: Any  # pytest.Config
    results_dir: Path
    reports_dir: Path
    run_id: str
    run_config: Any  # harness.execute.config.RunConfig: its run_dir
    #: what failed at the end of the session (set here; the plugin's pytest_sessionfinish reads it)
    end_failures: list[str]


#: the session's exit status when the history import or the report failed (the run's end broke; its records did not)
END_FAILED = 2


def _end_failed(session: BenchSession, tr, line: str) -> None:
    """Say what failed at the end of the session, in one line, and note it so that the session fails."""
    tr.write_line(line)
    failures = list(getattr(session, "end_failures", None) or [])
    session.end_failures = [*failures, line]


def end_failures(session: BenchSession | None) -> list[str]:
    """What failed at the end of `session` (empty when nothing did, or there is no session)."""
    return list(getattr(session, "end_failures", None) or [])


def _history_db(session: BenchSession) -> Path:
    """The run's history database: the same rule (store.default_db_path) that `python -m harness compare
    --results-dir DIR` follows, so compare finds the run the suite imported."""
    from harness.history.store import default_db_path  # imported late: plugin import stays cheap

    return default_db_path(session.results_dir)


def _render_report(session: BenchSession, tr) -> Path | None:
    """Import the run into the history (for trends and regressions), then render the report; its path, or None
    when there is none. A failure of either is one line and fails the session (END_FAILED); the report is rendered
    after a failed import all the same (without the history)."""
    records = session.run_config.run_dir / "cells.jsonl"
    history = None
    if not session.config.getoption("no_history"):
        try:
            from harness.history import import_run_dir, report_data

            db = _history_db(session)
            import_run_dir(db, session.run_config.run_dir)
            history = report_data(db, session.run_id)
            tr.write_line(f"history: imported into {db}")
        except Exception as e:  # the records are safe on disk: said, and the session fails
            _end_failed(
                session,
                tr,
                f"history: the import into {_history_db(session)} failed ({type(e).__name__}: {_one_line(e)}); "
                f"the records are intact in {records} (`python -m harness import {session.run_config.run_dir}` "
                "imports them again)",
            )
    if session.config.getoption("no_report"):
        return None
    signalled = interrupt.received()
    if signalled is not None:  # told to stop during the import: the run is whole, the report is an extra
        tr.write_line(f"report: not rendered (interrupted by {signalled}); the records are intact")
        return None
    try:
        from harness.report import render_report

        # --camera-fps, --accuracy-floor, --memory-cap, --min-shape, --server-bound-ms: as `python -m harness report`
        cons = getattr(session, "report_constraints", None)
        path = render_report([session.run_config.run_dir], session.reports_dir, history=history, cons=cons)
        tr.write_line(f"report: {path}")
        return Path(path)
    except Exception as e:  # the records are safe on disk: said, and the session fails
        _end_failed(
            session,
            tr,
            f"report: rendering into {session.reports_dir} failed ({type(e).__name__}: {_one_line(e)}); the "
            f"records are intact in {records} (`python -m harness report {session.run_config.run_dir} -o "
            f"{session.reports_dir}` renders it again)",
        )
        return None


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())
