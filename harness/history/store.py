"""The history database: an embedded SQLite file holding every imported run, keyed by run, machine and cell.

Concurrency: the database runs in WAL mode and every import is one `BEGIN IMMEDIATE` transaction, so two
processes importing at once serialise on the write lock (waiting up to `BUSY_TIMEOUT_S`) and readers never see a
half-imported run. Keep the file on a local disk: WAL needs shared memory, which network filesystems lack.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from harness.core import locations
from harness.core.record import CellRecord
from harness.core.record_codec import record_to_dict
from harness.core.results_dir import HistoryError, ImportRefused, SkippedLine, incomplete_note, skipped_words
from harness.core.safe_text import terminal_text
from harness.history.memory import memory_mib
from harness.history.rundir import RunData, load_run_dir

log = logging.getLogger(__name__)

DB_FILE = "history.sqlite"
DB_ENV_VAR = "YOLO26_BENCH_HISTORY"
# 2: stored env.json and records are record-schema 2 (db_schema 1 held schema-1 ones; connect() upgrades them).
DB_SCHEMA_VERSION = 2
BUSY_TIMEOUT_S = 120.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS series (
    series_id TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    label TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT NOT NULL,
    machine TEXT NOT NULL,
    series_id TEXT NOT NULL REFERENCES series(series_id),
    started_at TEXT NOT NULL,
    git_commit TEXT,
    env TEXT NOT NULL,
    digest TEXT NOT NULL,
    source TEXT NOT NULL,
    imported_at TEXT NOT NULL,
    PRIMARY KEY (run_id, machine)
);
CREATE INDEX IF NOT EXISTS runs_by_series ON runs (series_id, started_at);
CREATE TABLE IF NOT EXISTS cells (
    run_id TEXT NOT NULL,
    machine TEXT NOT NULL,
    cell_id TEXT NOT NULL,
    status TEXT NOT NULL,
    timing_scope TEXT,
    p50 REAL,
    samples TEXT,
    mem_mb REAL, -- MiB: the name predates the MiB field names, and renaming would rebuild the table
    mem_source TEXT,
    record TEXT NOT NULL,
    PRIMARY KEY (run_id, machine, cell_id),
    FOREIGN KEY (run_id, machine) REFERENCES runs (run_id, machine) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS cells_by_cell ON cells (cell_id);
CREATE TABLE IF NOT EXISTS merges (
    merged_run_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    machine TEXT NOT NULL,
    PRIMARY KEY (merged_run_id, run_id, machine)
);
"""


@dataclass(frozen=True)
class ImportResult:
    """What one import did: 'imported' (new run), 'replaced' (the run's content changed) or 'unchanged'."""

    run_id: str
    machine: str
    series_id: str
    cells: int
    action: str
    #: 'incomplete: N of M cells (why)' for a run that did not finish (env.json `incomplete`), else None
    incomplete: str | None = None
    #: cell ids the run recorded more than once (the last record of each was imported)
    duplicates: tuple[str, ...] = ()
    #: lines of the run's cells.jsonl the reading rule skipped (not imported; each named when it was read)
    skipped: tuple[SkippedLine, ...] = ()

    def describe(self) -> str:
        """One line: what the import did, with the run's warnings (incomplete, cells recorded twice); the run id,
        machine and cell ids (text from the run's files) escaped, so that it stays one line."""
        line = f"{self.action}: {self.run_id} ({self.machine}, {self.cells} cells, series {self.series_id})"
        if self.incomplete:
            line += f"; {self.incomplete}"
        if self.duplicates:
            shown = ", ".join(self.duplicates[:3]) + (" ..." if len(self.duplicates) > 3 else "")
            line += f"; {len(self.duplicates)} cell(s) recorded more than once ({shown}): kept the last record of each"
        if self.skipped:
            line += f"; {skipped_words(self.skipped)}: not imported"
        return terminal_text(line)


def default_db_path(results_dir: str | Path | None = None) -> Path:
    """The history database of a results directory: $YOLO26_BENCH_HISTORY when set, else
    <results_dir>/history.sqlite (default: harness.core.locations). The one rule the suite's end-of-run import and the CLI both follow, so that
    `compare --results-dir X` finds what `pytest --results-dir X` imported."""
    env = os.environ.get(DB_ENV_VAR)
    return Path(env) if env else Path(results_dir or locations.results_dir()) / DB_FILE


def _check_schema(conn: sqlite3.Connection, db_path: Path) -> None:
    row = conn.execute("SELECT value FROM meta WHERE key = 'db_schema'").fetchone()
    if row is None or int(row[0]) != DB_SCHEMA_VERSION:
        found = None if row is None else row[0]
        raise HistoryError(
            f"{db_path}: history schema {found!r}, this harness reads {DB_SCHEMA_VERSION}; "
            "use a new database file or re-import the results directories"
        )


def _set_wal(conn: sqlite3.Connection) -> None:
    """Switch to WAL, retrying while another process holds the file: two importers opening a new database at
    once can get "database is locked" from this pragma at once, without SQLite's busy handler waiting."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def open_db(db_path: str | Path, *, readonly: bool = False) -> sqlite3.Connection:
    """The one way every history command opens its database: for writing (created when needed, WAL, schema in
    place) or `readonly`. Every sqlite3 or OS error becomes a HistoryError of one line naming the file, what went
    wrong and what to do, never a traceback."""
    db_path = Path(db_path)
    try:
        return _open_readonly(db_path) if readonly else _connect(db_path)
    except HistoryError:
        raise
    except (sqlite3.Error, OSError) as e:
        raise HistoryError(db_error(db_path, e)) from None


#: what SQLite says of a database file whose pages are damaged (a torn copy, a bad disk, an edit)
DAMAGED = ("malformed", "corrupt")


def db_error(db_path: Path, e: BaseException) -> str:
    """One line for a sqlite3 or OS error on the history database: the file, the error, what to do."""
    if isinstance(e, OSError):
        what = f"[Errno {e.errno}] {e.strerror}" if e.errno is not None and e.strerror else str(e)
    else:
        what = f"{type(e).__name__}: {e}"
    if db_path.is_dir():
        hint = "it is a directory; pass a file path with --db (or $YOLO26_BENCH_HISTORY)"
    elif isinstance(e, sqlite3.DatabaseError) and "not a database" in str(e):
        hint = "it is not an SQLite history database; pass another --db or move the file away"
    elif isinstance(e, sqlite3.DatabaseError) and any(w in str(e) for w in DAMAGED):
        hint = (
            "the file is damaged; restore it from a backup, or move it away and import the runs again (their "
            "results directories hold every record)"
        )
    elif "locked" in str(e) or "busy" in str(e):
        hint = "another process holds it; try again when it is done"
    else:
        hint = (
            f"check that {db_path.parent} exists, is a directory and is writable, and that its disk has space "
            "(--db or $YOLO26_BENCH_HISTORY choose the file)"
        )
    return f"history database {db_path}: {what}; {hint}"


def connect(db_path: str | Path) -> sqlite3.Connection:
    """Open the history database for writing (see open_db)."""
    return open_db(db_path)


def _connect(db_path: Path) -> sqlite3.Connection:
    """Open (creating when needed) the history database for writing, in WAL mode, schema in place."""
    if db_path.is_dir():
        raise IsADirectoryError(21, "Is a directory", str(db_path))
    db_path.parent.mkdir(parents=True, exist_ok=True)
    # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE), never opened behind our back.
    conn = sqlite3.connect(db_path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        _set_wal(conn)
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Statement by statement: executescript() would commit the open transaction first.
            for stmt in filter(str.strip, _SCHEMA.split(";")):
                conn.execute(stmt)
            row = conn.execute("SELECT value FROM meta WHERE key = 'db_schema'").fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('db_schema', ?)", (str(DB_SCHEMA_VERSION),)
                )
            elif row[0] == "1":
                _upgrade_from_1(conn, db_path)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        _check_schema(conn, db_path)
    except BaseException:
        conn.close()
        raise
    return conn


def _upgrade_from_1(conn: sqlite3.Connection, db_path: Path) -> None:
    # Imported lazily: the upgrade runs once per old database.
    from harness.history.upgrade import upgrade_from_1

    n = upgrade_from_1(conn)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'db_schema'", (str(DB_SCHEMA_VERSION),))
    log.info("%s: upgraded %d run(s) to db_schema %d (record schema 2)", db_path, n, DB_SCHEMA_VERSION)


def open_readonly(db_path: str | Path) -> sqlite3.Connection:
    """Open an existing history database without writing to it (the report stage; see open_db)."""
    return open_db(db_path, readonly=True)


def _open_readonly(db_path: Path) -> sqlite3.Connection:
    if not db_path.is_file():
        raise HistoryError(f"{db_path}: no history database")
    conn = sqlite3.connect(f"{db_path.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        _check_schema(conn, db_path)
    except sqlite3.DatabaseError as e:
        conn.close()
        raise HistoryError(f"{db_path}: not a readable history database ({e})") from e
    except BaseException:
        conn.close()
        raise
    return conn


def _cell_row(run: RunData, rec: CellRecord) -> tuple:
    """The cells table's row of a record: the fields the history indexes, and the record as JSON (its rounds are
    in their own column)."""
    latency = rec.latency_ms
    ok = rec.status == "ok"
    samples = rec.samples_ms if ok else None
    mem, mem_source = memory_mib(rec) if ok else (None, None)
    stored = {k: v for k, v in record_to_dict(rec).items() if k != "samples_ms"}
    return (
        run.run_id,
        run.machine,
        rec.cell_id,
        rec.status,
        latency.timing_scope if latency else None,
        latency.p50 if ok and latency else None,
        json.dumps(samples) if samples else None,
        mem,
        mem_source,
        json.dumps(stored, sort_keys=True, default=str),
    )


def _write_run(conn: sqlite3.Connection, run: RunData) -> ImportResult:
    fp = run.fingerprint
    row = conn.execute(
        "SELECT digest FROM runs WHERE run_id = ? AND machine = ?", (run.run_id, run.machine)
    ).fetchone()
    notes = {"incomplete": incomplete_note(run.env), "duplicates": run.duplicates, "skipped": run.skipped}
    if row is not None and row[0] == run.digest:
        return ImportResult(run.run_id, run.machine, fp.series_id, len(run.records), "unchanged", **notes)
    conn.execute(
        "INSERT OR IGNORE INTO series (series_id, fingerprint, label) VALUES (?, ?, ?)",
        (fp.series_id, json.dumps(fp.to_dict(), sort_keys=True), fp.label),
    )
    # A run imported again with new content (more cells finished, or a re-run) replaces the old one whole.
    conn.execute("DELETE FROM cells WHERE run_id = ? AND machine = ?", (run.run_id, run.machine))
    conn.execute("DELETE FROM runs WHERE run_id = ? AND machine = ?", (run.run_id, run.machine))
    conn.execute(
        "INSERT INTO runs (run_id, machine, series_id, started_at, git_commit, env, digest, source, imported_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            run.run_id,
            run.machine,
            fp.series_id,
            run.started_at,
            run.env.get("git_commit"),
            json.dumps(run.env, sort_keys=True, default=str),
            run.digest,
            run.source,
            datetime.now(UTC).isoformat(timespec="seconds"),
        ),
    )
    conn.executemany(
        "INSERT INTO cells (run_id, machine, cell_id, status, timing_scope, p50, samples, mem_mb, mem_source,"
        " record) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [_cell_row(run, rec) for rec in run.records],
    )
    action = "imported" if row is None else "replaced"
    return ImportResult(run.run_id, run.machine, fp.series_id, len(run.records), action, **notes)


def import_runs(
    db_path: str | Path, runs: Iterable[RunData], merged_run_id: str | None = None
) -> list[ImportResult]:
    """Store validated runs in one transaction (all or nothing); optionally record them as one merged run."""
    runs = list(runs)
    conn = open_db(db_path)
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            results = [_write_run(conn, run) for run in runs]
            if merged_run_id is not None:
                conn.execute("DELETE FROM merges WHERE merged_run_id = ?", (merged_run_id,))
                conn.executemany(
                    "INSERT INTO merges (merged_run_id, run_id, machine) VALUES (?, ?, ?)",
                    [(merged_run_id, r.run_id, r.machine) for r in runs],
                )
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
    except (sqlite3.Error, OSError) as e:  # a full disk or a lock held past the timeout: one line
        raise HistoryError(db_error(Path(db_path), e)) from None
    finally:
        conn.close()
    for r in results:
        log.info("%s", r.describe())
    return results


def import_run_dir(db_path: str | Path, run_dir: str | Path) -> list[ImportResult]:
    """Validate and import one results directory. Raises ImportRefused, leaving the database unchanged."""
    # Validation happens before the database is even opened: a refused directory never creates or touches it.
    runs = load_run_dir(run_dir)
    return import_runs(db_path, runs)


__all__ = [
    "HistoryError",
    "ImportRefused",
    "ImportResult",
    "connect",
    "default_db_path",
    "import_run_dir",
    "import_runs",
    "memory_mib",
    "open_db",
    "open_readonly",
]
