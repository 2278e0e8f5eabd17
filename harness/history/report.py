"""History data for the report stage: per-cell trends and the regressions table. Reads the database only."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

from harness.core.results_dir import HistoryError
from harness.history import query
from harness.history.compare import BaselineSpec, Comparison, Thresholds, compare_run
from harness.history.store import open_readonly

log = logging.getLogger(__name__)

# Points per trend sparkline.
TREND_LIMIT = 30


def trend_key(cell_id: str, machine: str, multi_machine: bool) -> str:
    """The key of a cell in report_data's dicts: the cell id, or 'cell_id@machine' for a merged run."""
    return f"{cell_id}@{machine}" if multi_machine else cell_id


def history_view(
    conn: sqlite3.Connection, comparisons: list[Comparison], *, limit: int = TREND_LIMIT
) -> dict | None:
    """The report's dict (see report_data) for comparisons already made; None when none had history."""
    multi = len({c.machine for c in comparisons}) > 1
    out: dict = {
        "trends": {},
        "regressions": [],
        "improvements": [],
        "new_cells": [],
        "vanished_cells": [],
        "series": {},
        "last_measured": {},
    }
    for c in comparisons:
        if not c.has_history:
            continue
        out["series"][c.machine] = c.series_label
        out["regressions"] += [f.to_dict() for f in c.regressions]
        out["improvements"] += [f.to_dict() for f in c.improvements]
        out["new_cells"] += [trend_key(cell, c.machine, multi) for cell in c.new_cells]
        out["vanished_cells"] += [trend_key(cell, c.machine, multi) for cell in c.vanished_cells]
        (run,) = query.resolve_run(conn, c.run_id, c.machine)
        for cell_id, at in last_measured(conn, run.series_id):
            out["last_measured"][trend_key(cell_id, c.machine, multi)] = at
        history = query.series_cells(conn, run, include_run=True)
        for cell_id in sorted(query.run_cells(conn, run)):
            out["trends"][trend_key(cell_id, c.machine, multi)] = [
                {
                    "run_id": row.run_id,
                    "started_at": row.started_at,
                    "p50": row.p50 if row.status == "ok" else None,
                    "status": row.status,
                    "machine": row.machine,
                }
                for row in reversed(history.get(cell_id, [])[:limit])
            ]
    return out if out["series"] else None


def last_measured(conn: sqlite3.Connection, series_id: str) -> list[tuple[str, str]]:
    """(cell id, the start of the newest run of the series that measured it): a skip is not a measurement. The
    report's coverage section reads it for the cells a night's plan left out."""
    return conn.execute(
        "SELECT c.cell_id, MAX(r.started_at) FROM cells c"
        " JOIN runs r ON r.run_id = c.run_id AND r.machine = c.machine"
        " WHERE r.series_id = ? AND c.status != 'skipped' AND json_extract(c.record, '$.remedy_of') IS NULL"
        " GROUP BY c.cell_id",
        (series_id,),
    ).fetchall()


def report_data(db_path: Path, run_id: str, *, limit: int = TREND_LIMIT) -> dict | None:
    """Trends and regressions of `run_id` for the report, or None without a database or an earlier run.

    Returns {"trends": {key: [{"run_id", "started_at", "p50", "status", "machine"}, ... oldest first]},
    "regressions": [{"cell_id", "kind", "baseline", "current", "change_pct", "detail", "machine"}],
    "improvements": [...same shape...], "new_cells": [key], "vanished_cells": [key], "series": {machine: label},
    "last_measured": {key: started_at of the newest run that measured the cell}}.
    `p50` is null where the cell was not ok in that run. The baseline is the default `window:5`.
    Keys are cell ids; for a merged run spanning several machines they are "cell_id@machine" (see trend_key).
    The run must have been imported (`import_run_dir`); this function only reads the database.
    """
    db_path = Path(db_path)
    if not db_path.is_file():
        return None
    try:
        conn = open_readonly(db_path)
    except HistoryError as e:
        log.warning("history not used: %s", e)
        return None
    try:
        runs = query.resolve_run(conn, run_id)
        return history_view(
            conn, [compare_run(conn, r, BaselineSpec(), Thresholds()) for r in runs], limit=limit
        )
    finally:
        conn.close()
