"""The one reader and writer of a results directory, results/<run_id>/: cells.jsonl (one record per line) and
env.json.

Every reader (the report, the history) goes through here, so every record and env.json it sees is schema version
2: older files are migrated on read (harness.core.migrate) and files of an unknown version are refused with an
error naming the file and line. The report reads tolerantly (a missing env.json is shown as an unknown machine);
the history reads strictly (`read_env_checked`, `read_records_checked` raise ImportRefused).

A merged directory (written by `python -m harness merge`) lists its machines in env.json under MACHINES_KEY, each
record naming its machine (MACHINE_FIELD) and the run it came from (SOURCE_RUN_FIELD); `load_run` splits it back
into one Run per machine.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core.migrate import migrate_env, migrate_record
from harness.core.record import RECORD_FIELDS, STATUSES

log = logging.getLogger(__name__)

CELLS_FILE = "cells.jsonl"
ENV_FILE = "env.json"
UNKNOWN = "unknown"
MACHINES_KEY = "machines"
MACHINE_FIELD = "machine"
SOURCE_RUN_FIELD = "source_run_id"


class HistoryError(Exception):
    """A history operation that cannot go ahead; the message says why."""


class ImportRefused(HistoryError):
    """A results directory that will not be imported; nothing was written."""


# ---- writing ---------------------------------------------------------------------------------------------------


class RecordWriter:
    """Appends records as JSON lines, flushing and fsyncing each so a killed run keeps every finished cell."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / CELLS_FILE

    def write(self, rec: dict) -> None:
        missing = [f for f in RECORD_FIELDS if f not in rec]
        if missing:
            raise ValueError(f"record {rec.get('cell_id')} lacks fields {missing}")
        if rec["status"] not in STATUSES:
            raise ValueError(f"record {rec.get('cell_id')}: unknown status {rec['status']!r}")
        line = json.dumps(rec, sort_keys=False, allow_nan=False, default=str)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())


def write_text_atomic(path: Path, text: str) -> None:
    """Write a file whole or not at all: a temp file in the same directory, then os.replace over the target."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_env(run_dir: Path, env: dict) -> Path:
    """Write run_dir/env.json atomically (a reader never sees half of it); returns its path."""
    path = Path(run_dir) / ENV_FILE
    write_text_atomic(path, json.dumps(env, indent=2, default=str) + "\n")
    return path


# ---- reading ---------------------------------------------------------------------------------------------------


def is_results_dir(path: str | Path) -> bool:
    """Whether path is a directory holding a cells.jsonl."""
    return (Path(path) / CELLS_FILE).is_file()


def read_records(path: str | Path) -> list[dict]:
    """Read cells.jsonl (or a run dir holding one), migrating older records to the current schema.

    Raises ValueError naming the file and line for a record of a schema version this harness does not know.
    """
    path = Path(path)
    if path.is_dir():
        path = path / CELLS_FILE
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                # A run killed mid-write can leave a torn last line; everything before it is intact.
                log.warning("%s:%d: unreadable line skipped (%s)", path, n, e)
                continue
            if not isinstance(rec, dict):
                log.warning("%s:%d: not a JSON object; line skipped", path, n)
                continue
            try:
                out.append(migrate_record(rec))
            except ValueError as e:
                raise ValueError(f"{path}:{n}: {e}") from None
    return out


def read_env(run_dir: str | Path) -> dict | None:
    """run_dir/env.json migrated to the current schema, or None when there is none.

    Raises ValueError (naming the file) when it is unreadable, not a JSON object, or of an unknown version.
    """
    path = Path(run_dir) / ENV_FILE
    if not path.is_file():
        return None
    try:
        env = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: unreadable ({e})") from e
    if not isinstance(env, dict):
        raise ValueError(f"{path}: not a JSON object")
    try:
        return migrate_env(env)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None


def read_env_checked(run_dir: Path) -> dict:
    """env.json for import: required (it carries the machine fingerprint). Raises ImportRefused."""
    try:
        env = read_env(run_dir)
    except ValueError as e:
        raise ImportRefused(f"refusing to import {run_dir}: {e}") from e
    if env is None:
        raise ImportRefused(f"{run_dir}: no env.json, so no machine fingerprint; refusing to import")
    return env


def read_records_checked(run_dir: Path) -> list[dict]:
    """The records for import: every one with a cell id and a known status. Raises ImportRefused."""
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


# ---- runs ------------------------------------------------------------------------------------------------------


def dig(obj: Any, path: str) -> Any:
    """The value at a dotted path (`latency_ms.p50`) in nested dicts, or None."""
    for key in path.split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


@dataclass(frozen=True)
class Run:
    """One machine's run: its records (in file order) and its environment description.

    A plain results directory is one Run; a merged directory is one Run per machine, all with the same
    `dir_run_id` (the merged run's id) and `machine_key` (the machine label the merge gave it).
    """

    path: Path
    run_id: str
    env: dict[str, Any]
    records: list[dict[str, Any]] = field(default_factory=list)
    dir_run_id: str = ""
    machine_key: str | None = None
    log_roots: tuple[Path, ...] = ()

    def env_value(self, *keys: str, default: str = UNKNOWN) -> Any:
        """A nested env.json value, or `default` when any key on the way is missing or null."""
        value = dig(self.env, ".".join(keys))
        return default if value is None or value == "" else value

    @property
    def gpus(self) -> list[dict[str, Any]]:
        gpus = self.env.get("gpu")
        return [g for g in gpus if isinstance(g, dict)] if isinstance(gpus, list) else []

    @property
    def machine(self) -> str:
        """A short machine label: the GPU name when there is one, else the CPU model, with the hostname."""
        host = self.machine_key or self.env_value("host", "hostname")
        if self.gpus:
            what = " + ".join(str(g.get("name") or UNKNOWN) for g in self.gpus)
        else:
            what = str(self.env_value("host", "cpu_model"))
        return f"{what} ({host})" if host != UNKNOWN else what


def merged_machines(env: dict, records: list[dict]) -> tuple[list[tuple[dict, list[dict]]], list[dict]]:
    """Split a merged directory's records by machine: ([(machines entry, its records)], orphan records).

    Orphans name no machine that env.json lists; the report shows them as machine unknown, the import refuses.
    """
    groups, claimed = [], set()
    for entry in env.get(MACHINES_KEY) or []:
        if not isinstance(entry, dict):
            continue
        key = str(entry.get(MACHINE_FIELD) or UNKNOWN)
        claimed.add(key)
        groups.append((entry, [r for r in records if str(r.get(MACHINE_FIELD)) == key]))
    orphans = [r for r in records if str(r.get(MACHINE_FIELD)) not in claimed]
    return groups, orphans


def load_run(run_dir: str | Path) -> list[Run]:
    """Load one results directory (cells.jsonl plus an optional env.json): one Run, or one per merged machine.

    A missing or unreadable env.json is logged and the machine shown as unknown; records of an unknown schema
    version raise ValueError.
    """
    run_dir = Path(run_dir)
    records = read_records(run_dir / CELLS_FILE)
    try:
        env = read_env(run_dir)
    except ValueError as e:
        log.warning("%s; machine details shown as unknown", e)
        env = {}
    if env is None:
        log.warning("%s: no env.json; machine details shown as unknown", run_dir)
        env = {}
    run_id = str(
        env.get("run_id") or next((r.get("run_id") for r in records if r.get("run_id")), None) or run_dir.name
    )
    if isinstance(env.get(MACHINES_KEY), list) and env[MACHINES_KEY]:
        return _split_merged(run_dir, run_id, env, records)
    return [Run(run_dir, run_id, env, records, dir_run_id=run_id, log_roots=(run_dir,))]


def _split_merged(run_dir: Path, run_id: str, env: dict, records: list[dict]) -> list[Run]:
    groups, orphans = merged_machines(env, records)
    runs = []
    for entry, mine in groups:
        sub_env = entry.get("env") if isinstance(entry.get("env"), dict) else {}
        source = Path(str(entry["source"])) if entry.get("source") else None
        roots = (run_dir, source) if source else (run_dir,)
        key = str(entry.get(MACHINE_FIELD) or UNKNOWN)
        runs.append(Run(run_dir, str(entry.get("run_id") or run_id), sub_env, mine, run_id, key, roots))
    if orphans:
        log.warning(
            "%s: %d records name no machine listed in env.json; shown as machine unknown",
            run_dir,
            len(orphans),
        )
        runs.append(Run(run_dir, run_id, {}, orphans, run_id, UNKNOWN, (run_dir,)))
    return runs


__all__ = [
    "CELLS_FILE",
    "ENV_FILE",
    "MACHINES_KEY",
    "MACHINE_FIELD",
    "SOURCE_RUN_FIELD",
    "UNKNOWN",
    "HistoryError",
    "ImportRefused",
    "RecordWriter",
    "Run",
    "dig",
    "is_results_dir",
    "load_run",
    "merged_machines",
    "read_env",
    "read_env_checked",
    "read_records",
    "read_records_checked",
    "write_env",
    "write_text_atomic",
]
