"""A results directory (cells.jsonl + env.json) as validated runs, ready for the history database.

Reading is harness.core.results_dir's (strictly: a directory that cannot be imported raises ImportRefused, and
records come back as typed CellRecords of schema version 2 whatever version wrote them). A merged directory
(written by `python -m harness merge`) is split back into one run per machine, so importing a merged directory is
the same as importing each of its sources.
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
from harness.core.cli_args import printable
from harness.core.record import CellRecord, non_finite
from harness.core.record_codec import record_from_dict, record_to_dict
from harness.core.results_dir import (
    MACHINE_FIELD,
    MACHINES_KEY,
    SOURCE_RUN_FIELD,
    ImportRefused,
    SkippedLine,
    duplicate_cells,
    merged_machines,
    read_env_checked,
    read_records_checked,
)
from harness.history.fingerprint import Fingerprint, fingerprint_from_env, machine_name

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunData:
    """One machine's run: its env.json, its records, and what the history keys it by."""

    run_id: str
    machine: str
    started_at: str
    env: dict
    records: tuple[CellRecord, ...]
    source: str
    #: cell ids the results directory recorded more than once (one record of each was kept: the last)
    duplicates: tuple[str, ...] = ()
    #: lines of its cells.jsonl the reading rule skipped (unreadable, or not fitting the schema): not imported
    skipped: tuple[SkippedLine, ...] = ()

    @cached_property
    def fingerprint(self) -> Fingerprint:
        """The series this run belongs to (records were validated to be of this harness's schema)."""
        return fingerprint_from_env(self.env, SCHEMA_VERSION)

    @cached_property
    def digest(self) -> str:
        """Content hash: importing a run with an unchanged digest is a no-op."""
        records = [record_to_dict(r) for r in self.records]
        blob = json.dumps({"env": self.env, "records": records}, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()


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


def _started_at(env: dict, records: list[CellRecord], where: str) -> str:
    started = env.get("started_at") or min((r.started_at for r in records if r.started_at), default=None)
    if not started:
        raise ImportRefused(f"{where}: neither env.json nor any record says when the run started")
    return normalize_time(str(started))


def _dedupe(records: list[CellRecord], where: str) -> tuple[CellRecord, ...]:
    """One record per cell: a cell written twice (a retried cell) keeps its last record."""
    by_cell: dict[str, CellRecord] = {}
    for rec in records:
        if rec.cell_id in by_cell:
            log.warning(  # escaped: a cell id from the file must not forge a second line
                "%s: cell %s recorded more than once; keeping the last record",
                printable(where),
                printable(str(rec.cell_id)),
            )
        by_cell[rec.cell_id] = rec
    return tuple(by_cell.values())


def _restored(rec: CellRecord, run_id: str) -> CellRecord:
    """A merged record back as its source run's own record (a new one: the record read is left alone): its run id,
    without the merge's two fields, the others in the order the record holds them.

    Built from its JSON view less those two fields: a record read in an order of its own (an older one, migrated)
    keeps that order through the codec, and with it the two fields were they only set to None."""
    data = record_to_dict(rec)
    data["run_id"] = rec.source_run_id if rec.source_run_id is not None else run_id
    data.pop(MACHINE_FIELD, None)
    data.pop(SOURCE_RUN_FIELD, None)
    return record_from_dict(data, migrate=False)


def _split_merged(
    run_dir: Path, env: dict, records: list[CellRecord], skipped: tuple[SkippedLine, ...] = ()
) -> list[RunData]:
    groups, orphans = merged_machines(env, records)
    if orphans:
        names = sorted({str(r.machine) for r in orphans})
        raise ImportRefused(f"{run_dir}: records of machines {names} not listed in env.json")
    runs = []
    for entry, mine in groups:
        machine = entry[MACHINE_FIELD]
        if not isinstance(entry.get("env"), dict):
            raise ImportRefused(f"{run_dir}: env.json lists machine {machine!r} without its env.json")
        restored = [_restored(rec, entry["run_id"]) for rec in mine]
        where = f"{run_dir} [{machine}]"
        runs.append(
            RunData(
                run_id=str(entry["run_id"]),
                machine=machine,
                started_at=_started_at(entry["env"], restored, where),
                env=entry["env"],
                records=_dedupe(restored, where),
                source=str(run_dir),
                duplicates=tuple(duplicate_cells(restored)),
                skipped=skipped if not runs else (),  # the directory's skipped lines, said once
            )
        )
    return runs


def _refuse_non_finite(run_dir: Path, env: dict, records: list[CellRecord]) -> None:
    """A NaN or infinite figure would be stored as NULL and skipped by every comparison without a word: refuse
    the run, naming the first offending record and its fields (a harness writing records refuses them at write
    time, so these come from an older harness or an edited file)."""
    bad = [(r.cell_id, hits) for r in records if (hits := non_finite(record_to_dict(r)))]
    env_hits = non_finite(env)
    if not bad and not env_hits:
        return
    where, hits = ("env.json", env_hits) if env_hits else (f"record {bad[0][0]}", bad[0][1])
    fields = ", ".join(f"{p} = {v!r}" for p, v in hits[:5])
    more = f" (and {len(bad) - 1} more records)" if len(bad) > 1 else ""
    raise ImportRefused(f"{run_dir}: {where} holds non-finite figures ({fields}){more}; refusing to import")


def load_run_dir(run_dir: str | Path) -> list[RunData]:
    """Read and validate a results directory; raises ImportRefused, touching nothing, when it is not importable.

    Returns one run, or one per machine for a merged directory.
    """
    run_dir = Path(run_dir)
    skipped: list[SkippedLine] = []
    records = read_records_checked(run_dir, skipped)
    env = read_env_checked(run_dir)
    _refuse_non_finite(run_dir, env, records)
    if env.get(MACHINES_KEY):
        return _split_merged(run_dir, env, records, tuple(skipped))
    run_id = str(env.get("run_id") or run_dir.name)
    others = sorted({str(r.run_id) for r in records} - {run_id})
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
            duplicates=tuple(duplicate_cells(records)),
            skipped=tuple(skipped),
        )
    ]
