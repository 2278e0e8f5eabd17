"""Reading a results directory (cells.jsonl + env.json) into validated runs, ready for the history database.

A merged directory (written by `python -m harness merge`) is split back into one run per machine, so importing a
merged directory is the same as importing each of its sources.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path

from harness import SCHEMA_VERSION
from harness.history.fingerprint import Fingerprint, fingerprint_from_env, machine_name
from harness.records import STATUSES, read_records

log = logging.getLogger(__name__)

# Fields that `merge` adds to each record, and the env.json key listing the merged machines.
MACHINE_FIELD = "machine"
SOURCE_RUN_FIELD = "source_run_id"
MACHINES_KEY = "machines"


class HistoryError(Exception):
    """A history operation that cannot go ahead; the message says why."""


class ImportRefused(HistoryError):
    """A results directory that will not be imported; nothing was written."""


@dataclass(frozen=True)
class RunData:
    """One machine's run: its env.json, its records, and what the history keys it by."""

    run_id: str
    machine: str
    started_at: str
    env: dict
    records: tuple[dict, ...]
    source: str

    @cached_property
    def fingerprint(self) -> Fingerprint:
        """The series this run belongs to (records were validated to be of this harness's schema)."""
        return fingerprint_from_env(self.env, SCHEMA_VERSION)

    @cached_property
    def digest(self) -> str:
        """Content hash: importing a run with an unchanged digest is a no-op."""
        blob = json.dumps({"env": self.env, "records": self.records}, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()


def is_results_dir(path: str | Path) -> bool:
    """Whether path is a directory holding a cells.jsonl."""
    return (Path(path) / "cells.jsonl").is_file()


def _read_env(run_dir: Path) -> dict:
    path = run_dir / "env.json"
    if not path.is_file():
        raise ImportRefused(f"{run_dir}: no env.json, so no machine fingerprint; refusing to import")
    try:
        env = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise ImportRefused(f"{path}: unreadable ({e}); refusing to import") from e
    if not isinstance(env, dict):
        raise ImportRefused(f"{path}: not a JSON object; refusing to import")
    if env.get("schema_version", SCHEMA_VERSION) != SCHEMA_VERSION:
        raise ImportRefused(
            f"refusing to import {run_dir}: env.json schema_version {env['schema_version']!r} is not "
            f"{SCHEMA_VERSION}, the version this harness reads"
        )
    return env


def _read_cells(run_dir: Path) -> list[dict]:
    if not is_results_dir(run_dir):
        raise ImportRefused(f"{run_dir}: no cells.jsonl; not a results directory")
    try:
        records = read_records(run_dir)
    except ValueError as e:  # read_records refuses unknown schema versions
        raise ImportRefused(f"refusing to import {run_dir}: {e}") from e
    for rec in records:
        if not rec.get("cell_id"):
            raise ImportRefused(f"{run_dir}: a record has no cell_id; refusing to import")
        if rec.get("status") not in STATUSES:
            raise ImportRefused(
                f"{run_dir}: record {rec['cell_id']} has unknown status {rec.get('status')!r}; refusing to import"
            )
    return records


def normalize_time(text: str) -> str:
    """ISO 8601 time in UTC ('2026-11-22T02:00:00+00:00'), so that runs order correctly as strings.

    A time without an offset is taken as UTC; text that is not ISO 8601 is kept as it is.
    """
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        log.warning("start time %r is not ISO 8601; runs may be ordered wrongly", text)
        return text
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    return t.astimezone(UTC).isoformat()


def _started_at(env: dict, records: list[dict], where: str) -> str:
    started = env.get("started_at") or min(
        (r["started_at"] for r in records if r.get("started_at")), default=None
    )
    if not started:
        raise ImportRefused(f"{where}: neither env.json nor any record says when the run started")
    return normalize_time(str(started))


def _dedupe(records: list[dict], where: str) -> tuple[dict, ...]:
    """One record per cell: a cell written twice (a retried cell) keeps its last record."""
    by_cell: dict[str, dict] = {}
    for rec in records:
        if rec["cell_id"] in by_cell:
            log.warning("%s: cell %s recorded more than once; keeping the last record", where, rec["cell_id"])
        by_cell[rec["cell_id"]] = rec
    return tuple(by_cell.values())


def _split_merged(run_dir: Path, env: dict, records: list[dict]) -> list[RunData]:
    runs = []
    for entry in env[MACHINES_KEY]:
        machine = entry[MACHINE_FIELD]
        sub_env = entry["env"]
        mine = [r for r in records if r.get(MACHINE_FIELD) == machine]
        restored = []
        for rec in mine:
            rec = dict(rec)
            rec["run_id"] = rec.pop(SOURCE_RUN_FIELD, entry["run_id"])
            rec.pop(MACHINE_FIELD, None)
            restored.append(rec)
        where = f"{run_dir} [{machine}]"
        runs.append(
            RunData(
                run_id=str(entry["run_id"]),
                machine=machine,
                started_at=_started_at(sub_env, restored, where),
                env=sub_env,
                records=_dedupe(restored, where),
                source=str(run_dir),
            )
        )
    orphans = {r.get(MACHINE_FIELD) for r in records} - {e[MACHINE_FIELD] for e in env[MACHINES_KEY]}
    if orphans:
        raise ImportRefused(
            f"{run_dir}: records of machines {sorted(map(str, orphans))} not listed in env.json"
        )
    return runs


def load_run_dir(run_dir: str | Path) -> list[RunData]:
    """Read and validate a results directory; raises ImportRefused, touching nothing, when it is not importable.

    Returns one run, or one per machine for a merged directory.
    """
    run_dir = Path(run_dir)
    records = _read_cells(run_dir)
    env = _read_env(run_dir)
    if env.get(MACHINES_KEY):
        return _split_merged(run_dir, env, records)
    run_id = str(env.get("run_id") or run_dir.name)
    others = sorted({str(r.get("run_id")) for r in records} - {run_id})
    if others:
        raise ImportRefused(f"{run_dir}: env.json is run {run_id!r} but records belong to {others}")
    if not records:
        log.warning("%s: no records", run_dir)
    return [
        RunData(
            run_id=run_id,
            machine=machine_name(env),
            started_at=_started_at(env, records, str(run_dir)),
            env=env,
            records=_dedupe(records, str(run_dir)),
            source=str(run_dir),
        )
    ]
