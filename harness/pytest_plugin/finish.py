"""The end of a benchmark session: import the run into the history, then render the report.

Both are extras on top of the records, which are safe on disk by then: a failure here is one line in the terminal
summary, never a lost run.
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


def _history_db(session: BenchSession) -> Path:
    """The run's history database: the same rule (store.default_db_path) that `python -m harness compare
    --results-dir DIR` follows, so compare finds the run the suite imported."""
    from harness.history.store import default_db_path  # imported late: plugin import stays cheap

    return default_db_path(session.results_dir)


def _render_report(session: BenchSession, tr) -> Path | None:
    """Import the run into the history (for trends and regressions), then render the report; its path, or None
    when there is none."""
    history = None
    if not session.config.getoption("no_history"):
        try:
            from harness.history import import_run_dir, report_data

            db = _history_db(session)
            import_run_dir(db, session.run_config.run_dir)
            history = report_data(db, session.run_id)
            tr.write_line(f"history: imported into {db}")
        except Exception as e:  # the records are safe on disk; history is an extra
            tr.write_line(f"history: not imported ({type(e).__name__}: {e})")
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
    except Exception as e:  # the records are safe on disk; a report bug must not hide them
        tr.write_line(f"report: rendering failed ({type(e).__name__}: {e}); records are intact")
        return None
