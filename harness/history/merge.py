"""Merging the runs of several machines into one history and one results directory for the report.

The merged directory's records (CellRecords, one JSON line each as the record codec writes it) keep every field in their own order and gain
`machine` (the source's hostname, made unique) and `source_run_id`, written after their own fields; their `run_id`
becomes the merged run's id. Its env.json lists the machines with their full env.json under "machines", and keeps
the usual top-level keys (values shared by every machine, else null) so that a reader that knows only the plain
format still works.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import shutil
import uuid
from dataclasses import dataclass, replace
from pathlib import Path

from harness import SCHEMA_VERSION
from harness.core.record import CellRecord
from harness.core.record_codec import record_to_json
from harness.core.results_dir import (
    CELLS_FILE,
    ENV_FILE,
    MACHINE_FIELD,
    MACHINES_KEY,
    ImportRefused,
    unwritable_reason,
    write_env,
    write_text_atomic,
)
from harness.history.rundir import RunData, load_run_dir
from harness.history.store import ImportResult, import_runs

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MergeResult:
    """The merged run's id and directory, and what importing its sources did."""

    run_id: str
    out_dir: Path
    machines: list[str]
    imported: list[ImportResult]


def _unique_machines(runs: list[RunData]) -> list[RunData]:
    """Give every run a distinct machine label: the hostname, suffixed with the run id where hostnames repeat."""
    seen: dict[str, int] = {}
    for run in runs:
        seen[run.machine] = seen.get(run.machine, 0) + 1
    out, labels = [], set()
    for run in runs:
        label = run.machine if seen[run.machine] == 1 else f"{run.machine}-{run.run_id}"
        if label in labels:
            raise ImportRefused(f"run {run.run_id} of {run.machine} is given twice")
        labels.add(label)
        out.append(run if label == run.machine else replace(run, machine=label))
    return out


def _common(values: list) -> object:
    """The value every machine shares, else None."""
    first = values[0]
    return first if all(v == first for v in values[1:]) else None


def merged_env(run_id: str, runs: list[RunData]) -> dict:
    """env.json of a merged run (see the module docstring)."""
    envs = [r.env for r in runs]
    libraries = {}
    for name in sorted({k for e in envs for k in (e.get("libraries") or {})}):
        libraries[name] = _common([(e.get("libraries") or {}).get(name) for e in envs])
    return {
        "schema_version": SCHEMA_VERSION,  # its records and machines' env.json files are migrated on load
        "run_id": run_id,
        "started_at": min(r.started_at for r in runs),
        "git_commit": _common([e.get("git_commit") for e in envs]),
        "host": {"hostname": ", ".join(r.machine for r in runs)},
        "gpu": [dict(g, machine=r.machine) for r in runs for g in (r.env.get("gpu") or [])],
        "cuda": _common([e.get("cuda") for e in envs]),
        "libraries": libraries,
        "threads": _common([e.get("threads") for e in envs]),
        MACHINES_KEY: [
            {
                MACHINE_FIELD: r.machine,
                "run_id": r.run_id,
                "series_id": r.fingerprint.series_id,
                "series_label": r.fingerprint.label,
                "source": r.source,
                "env": r.env,
            }
            for r in runs
        ],
    }


def _merged_records(run_id: str, runs: list[RunData]) -> list[CellRecord]:
    """The merged run's records: every record with the merged run id, its machine and its source run (copies: the
    runs' own records are imported as they are)."""
    out = []
    for run in runs:
        for rec in run.records:
            merged = copy.copy(rec)
            merged.run_id = run_id
            merged.machine = run.machine
            merged.source_run_id = run.run_id
            out.append(merged)
    return out


def _cells_text(records: list[CellRecord]) -> str:
    """cells.jsonl of these records, each line as RecordWriter writes it (the records were validated when read)."""
    return "".join(record_to_json(rec) + "\n" for rec in records)


def _check_out_dir(out_dir: Path, cells: str, env_text: str, replace_existing: bool) -> bool:
    """Refuse an output directory that cannot be written, or that already holds other files (another run's
    records would be lost) unless `replace_existing`, before the database is touched. Returns whether the directory
    already holds exactly this merge (merging the same runs again), so that nothing needs writing."""
    why = unwritable_reason(out_dir)
    if why:
        raise ImportRefused(f"merge output {out_dir}: {why[0]} is {why[1]}")
    if not out_dir.is_dir():
        return False
    held = sorted(p.name for p in out_dir.iterdir())
    if not held:
        return False
    same = (
        held == sorted([CELLS_FILE, ENV_FILE])
        and _holds(out_dir / CELLS_FILE, cells)
        and _holds(out_dir / ENV_FILE, env_text)
    )
    if same or replace_existing:
        return same
    shown = ", ".join(held[:5]) + (f" and {len(held) - 5} more" if len(held) > 5 else "")
    raise ImportRefused(
        f"merge output {out_dir} already holds {shown}; refusing to overwrite it: choose another -o, or pass "
        "--replace to replace it"
    )


def _holds(path: Path, text: str) -> bool:
    """Whether the regular file at `path` holds exactly `text` (read no further than its length: an output
    directory's 10 GB file is not read whole to learn that it differs)."""
    data = text.encode("utf-8")
    try:
        if not path.is_file() or path.stat().st_size != len(data):
            return False
        with open(path, "rb") as f:
            return f.read(len(data) + 1) == data
    except OSError:
        return False


def _write_beside(out_dir: Path, cells: str, env: dict) -> None:
    """Write the merged run into a new directory beside `out_dir`, then rename it into place (an existing
    directory is renamed away first and removed last), so a reader sees the old run or the new one, never a mix,
    and a failure part way leaves the old run as it was."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tag = uuid.uuid4().hex[:8]
    new = out_dir.with_name(f".{out_dir.name}.merge-{tag}")
    new.mkdir()
    try:
        write_text_atomic(new / CELLS_FILE, cells)
        write_env(new, env)
        old = out_dir.with_name(f".{out_dir.name}.old-{tag}")
        had = out_dir.exists()
        if had:
            os.replace(out_dir, old)
        try:
            os.replace(new, out_dir)
        except OSError:
            if had:
                os.replace(old, out_dir)
            raise
    except BaseException:
        shutil.rmtree(new, ignore_errors=True)
        raise
    if had:
        shutil.rmtree(old, ignore_errors=True)


def merge_runs(
    db_path: str | Path,
    run_dirs: list[str | Path],
    out_dir: str | Path,
    run_id: str | None = None,
    *,
    replace_existing: bool = False,
) -> MergeResult:
    """Import every results directory into the history and write one merged results directory.

    Every input is read and validated, and the merged files are built in memory, before anything is written: a
    run that cannot be imported (a NaN figure, an unknown schema, no env.json) leaves the database and the output
    directory as they were. The merged run id defaults to the output directory's name. An output directory that
    already holds files is refused (ImportRefused) unless it holds exactly this merge (merging again is a no-op)
    or `replace_existing`; a replacement is written beside it and renamed into place.
    """
    out_dir = Path(out_dir)
    run_id = run_id or out_dir.resolve().name
    runs = [run for d in run_dirs for run in load_run_dir(d)]
    if not runs:
        raise ImportRefused("nothing to merge")
    runs = _unique_machines(runs)
    try:
        records = _merged_records(run_id, runs)
        cells = _cells_text(records)
        env = merged_env(run_id, runs)
        json.dumps(env, allow_nan=False, default=str)
    except ValueError as e:  # load_run_dir refuses non-finite figures; this is the belt to its braces
        raise ImportRefused(f"cannot merge into {out_dir}: {e}") from None
    env_text = json.dumps(env, indent=2, default=str) + "\n"  # as write_env writes it
    unchanged = _check_out_dir(out_dir, cells, env_text, replace_existing)
    imported = import_runs(db_path, runs, merged_run_id=run_id)
    if not unchanged:
        try:
            _write_beside(out_dir, cells, env)
        except OSError as e:
            raise ImportRefused(f"cannot write the merged run to {out_dir}: {e}") from None
    log.info("merged %d run(s) from %s into %s", len(runs), ", ".join(r.machine for r in runs), out_dir)
    return MergeResult(run_id, out_dir, [r.machine for r in runs], imported)
