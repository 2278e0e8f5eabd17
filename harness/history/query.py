"""Read-side queries on the history database: resolving runs, series and the cells of earlier runs."""

from __future__ import annotations

import json
import logging
import sqlite3
from dataclasses import dataclass

from harness.core.results_dir import HistoryError, incomplete_note

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunRef:
    """One imported run of one machine, with its series and start time."""

    run_id: str
    machine: str
    series_id: str
    series_label: str
    started_at: str


@dataclass(frozen=True)
class CellRow:
    """The comparable facts of one cell in one run (raw rounds are fetched separately, only when needed)."""

    run_id: str
    machine: str
    started_at: str
    cell_id: str
    status: str
    timing_scope: str | None
    p50: float | None
    mem_mb: float | None
    mem_source: str | None
    #: the drift canary's readings around the cell's timing (record `canary_ms.mean`), None before the canary
    canary_ms: float | None = None


_RUN_SELECT = (
    "SELECT r.run_id, r.machine, r.series_id, s.label, r.started_at FROM runs r"
    " JOIN series s ON s.series_id = r.series_id"
)
_CELL_SELECT = (
    "SELECT c.run_id, c.machine, r.started_at, c.cell_id, c.status, c.timing_scope, c.p50, c.mem_mb,"
    " c.mem_source, json_extract(c.record, '$.canary_ms.mean')"
    " FROM cells c JOIN runs r ON r.run_id = c.run_id AND r.machine = c.machine"
)


def resolve_run(conn: sqlite3.Connection, run_id: str, machine: str | None = None) -> list[RunRef]:
    """The runs a run id names: the run on each machine that has it, or the sources of a merged run."""
    rows = conn.execute(f"{_RUN_SELECT} WHERE r.run_id = ? ORDER BY r.machine", (run_id,)).fetchall()
    if not rows:
        rows = conn.execute(
            f"{_RUN_SELECT} JOIN merges m ON m.run_id = r.run_id AND m.machine = r.machine"
            " WHERE m.merged_run_id = ? ORDER BY r.machine",
            (run_id,),
        ).fetchall()
    refs = [RunRef(*row) for row in rows]
    if machine is not None:
        refs = [r for r in refs if r.machine == machine]
    return refs


def newest_run_id(conn: sqlite3.Connection) -> str | None:
    """The run id with the latest start time (the default RUN of `compare`)."""
    row = conn.execute(
        "SELECT run_id FROM runs ORDER BY started_at DESC, imported_at DESC LIMIT 1"
    ).fetchone()
    return row[0] if row else None


def earlier_runs(conn: sqlite3.Connection, run: RunRef) -> list[RunRef]:
    """Runs of the same series that started before `run`, newest first."""
    rows = conn.execute(
        f"{_RUN_SELECT} WHERE r.series_id = ? AND r.started_at < ? ORDER BY r.started_at DESC, r.machine",
        (run.series_id, run.started_at),
    ).fetchall()
    return [RunRef(*row) for row in rows]


def find_baseline_run(conn: sqlite3.Connection, run: RunRef, baseline_run_id: str) -> RunRef:
    """The named baseline run in the series of `run`, preferring the same machine."""
    candidates = resolve_run(conn, baseline_run_id)
    if not candidates:
        raise HistoryError(f"baseline run {baseline_run_id!r} is not in the history")
    same_series = [c for c in candidates if c.series_id == run.series_id]
    if not same_series:
        series = ", ".join(sorted({c.series_id for c in candidates}))
        raise HistoryError(
            f"baseline run {baseline_run_id!r} is in series {series}, run {run.run_id!r} ({run.machine}) is in "
            f"series {run.series_id}: runs are compared only within one series (same GPU, driver, CUDA, "
            "library versions and record schema)"
        )
    same_machine = [c for c in same_series if c.machine == run.machine]
    return (same_machine or same_series)[0]


def run_cells(conn: sqlite3.Connection, run: RunRef) -> dict[str, CellRow]:
    """The cells of one run, by cell id."""
    rows = conn.execute(
        f"{_CELL_SELECT} WHERE c.run_id = ? AND c.machine = ?", (run.run_id, run.machine)
    ).fetchall()
    return {row[3]: CellRow(*row) for row in rows}


def series_cells(
    conn: sqlite3.Connection, run: RunRef, *, include_run: bool = False
) -> dict[str, list[CellRow]]:
    """Every cell record of the series before `run` (and of `run` itself if asked), newest first, by cell id."""
    op = "<=" if include_run else "<"
    rows = conn.execute(
        f"{_CELL_SELECT} WHERE r.series_id = ? AND r.started_at {op} ? ORDER BY r.started_at DESC, c.machine",
        (run.series_id, run.started_at),
    ).fetchall()
    out: dict[str, list[CellRow]] = {}
    for row in rows:
        cell = CellRow(*row)
        if not include_run and (cell.run_id, cell.machine) == (run.run_id, run.machine):
            continue
        out.setdefault(cell.cell_id, []).append(cell)
    return out


def run_canary(conn: sqlite3.Connection, run: RunRef) -> float | None:
    """The run's drift canary median (env.json `canary.median`, ms), None when it has none."""
    row = conn.execute(
        "SELECT json_extract(env, '$.canary.median') FROM runs WHERE run_id = ? AND machine = ?",
        (run.run_id, run.machine),
    ).fetchone()
    return float(row[0]) if row and isinstance(row[0], int | float) else None


def run_heap_policy(conn: sqlite3.Connection, run: RunRef) -> str:
    """The heap policy the run's processes ran under (env.json `allocator`, harness.core.allocator): `retain` where
    it was applied, else `system` (runs from before --malloc ran with the C library's defaults)."""
    row = conn.execute(
        "SELECT json_extract(env, '$.allocator.policy'), json_extract(env, '$.allocator.applied') FROM runs "
        "WHERE run_id = ? AND machine = ?",
        (run.run_id, run.machine),
    ).fetchone()
    return "retain" if row and row[0] == "retain" and row[1] else "system"


def run_incomplete(conn: sqlite3.Connection, run: RunRef) -> str | None:
    """'incomplete: N of M cells (why)' when the run did not finish (env.json `incomplete`), else None."""
    row = conn.execute(
        "SELECT json_extract(env, '$.incomplete') FROM runs WHERE run_id = ? AND machine = ?",
        (run.run_id, run.machine),
    ).fetchone()
    if not row or not row[0]:
        return None
    try:
        mark = json.loads(row[0])
    except (TypeError, ValueError):
        mark = row[0]
    return incomplete_note({"incomplete": mark})


def samples(conn: sqlite3.Connection, cell: CellRow) -> list[float]:
    """The raw timed rounds (ms) of one cell record; empty when none were stored."""
    row = conn.execute(
        "SELECT samples FROM cells WHERE run_id = ? AND machine = ? AND cell_id = ?",
        (cell.run_id, cell.machine, cell.cell_id),
    ).fetchone()
    return [float(v) for v in json.loads(row[0])] if row and row[0] else []
