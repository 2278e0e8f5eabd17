"""Upgrading a history database of db_schema 1 in place: its runs were imported with record schema 1.

Such a database holds v1 env.json and records, fingerprints with schema_version 1 and memory sources named
`*_mb`. Left so, every new (schema 2) run would start a new series and no earlier run could be its baseline,
although the values are the same (v1 memory was already MiB; only names changed). So each stored run is migrated
exactly as `import` migrates a v1 results directory, and moves to the series it would get if imported today.
Run digests are left as they were: importing the same v1 directory again replaces the run once (same content).
"""

from __future__ import annotations

import json
import logging
import sqlite3

from harness import SCHEMA_VERSION
from harness.core.migrate import migrate_env, migrate_record
from harness.history.fingerprint import fingerprint_from_env
from harness.history.memory import section_memory_mib

log = logging.getLogger(__name__)


def upgrade_from_1(conn: sqlite3.Connection) -> int:
    """Migrate every stored run and cell to record schema 2 inside the caller's transaction; returns the number
    of runs. Series no run belongs to any more are dropped."""
    runs = conn.execute("SELECT run_id, machine, env FROM runs").fetchall()
    for run_id, machine, env_text in runs:
        env = migrate_env(json.loads(env_text))
        fp = fingerprint_from_env(env, SCHEMA_VERSION)
        conn.execute(
            "INSERT OR IGNORE INTO series (series_id, fingerprint, label) VALUES (?, ?, ?)",
            (fp.series_id, json.dumps(fp.to_dict(), sort_keys=True), fp.label),
        )
        conn.execute(
            "UPDATE runs SET series_id = ?, env = ? WHERE run_id = ? AND machine = ?",
            (fp.series_id, json.dumps(env, sort_keys=True, default=str), run_id, machine),
        )
        cells = conn.execute(
            "SELECT cell_id, status, record FROM cells WHERE run_id = ? AND machine = ?", (run_id, machine)
        ).fetchall()
        for cell_id, status, rec_text in cells:
            # the stored JSON of a record (samples_ms left out), migrated as JSON: it is what the database holds
            rec = migrate_record(json.loads(rec_text))
            mem, mem_source = section_memory_mib(rec.get("memory")) if status == "ok" else (None, None)
            conn.execute(
                "UPDATE cells SET record = ?, mem_mb = ?, mem_source = ? WHERE run_id = ? AND machine = ?"
                " AND cell_id = ?",
                (json.dumps(rec, sort_keys=True, default=str), mem, mem_source, run_id, machine, cell_id),
            )
    conn.execute("DELETE FROM series WHERE series_id NOT IN (SELECT series_id FROM runs)")
    return len(runs)
