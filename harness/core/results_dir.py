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

import contextlib
import fcntl
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core.migrate import migrate_env, migrate_record
from harness.core.record import STATUSES, CellRecord, check_finite
from harness.core.record_codec import record_from_dict, record_to_dict, record_to_json

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


# ---- writing ----------------------------------------------------------------------------------------------------

#: where a torn last line of cells.jsonl is kept when it is moved aside before an append
TORN_SUFFIX = ".torn"
#: where the records of a cell that `--resume` runs again (it had crashed or timed out) are kept
SUPERSEDED_SUFFIX = ".superseded"
_LOCK_NAME = ".cells.jsonl.lock"
_BLOCK = 1 << 16


class RecordWriteError(OSError):
    """A record or env.json could not be written (disk full, permission, ...): the run must stop, not benchmark on
    with every further record lost. The message is one line naming the file, the error and what was kept."""


class RecordWriter:
    """Appends records to cells.jsonl as whole JSON lines, each fsynced, so a killed run keeps every finished cell.

    Appends hold an exclusive `flock` on .cells.jsonl.lock so shards of one run writing into one directory never
    interleave. Before each append a torn last line (a write cut short by a kill or a full disk: no final
    newline, or a last line that is not a JSON object) is moved into cells.jsonl.torn and reported through
    `notify`, never glued to the new record. A write that fails leaves cells.jsonl as it was (the partial line is
    cut off) and raises RecordWriteError.
    """

    def __init__(self, run_dir: Path, notify: Callable[[str], None] | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / CELLS_FILE
        self.notify = notify
        self._lock_path = self.run_dir / _LOCK_NAME
        self._clean_size: int | None = (
            None  # the file's size after this writer's last append (tail known whole)
        )

    def write(self, rec: CellRecord) -> CellRecord:
        """Append `rec` and return it as written: a NaN or infinite figure nulled with its reason
        (record.check_finite), a value JSON cannot hold (a Path, a numpy scalar) as its str()."""
        data = record_to_dict(rec)
        check_finite(data)  # NaN or infinite figures become null with a reason, never a silent NULL
        if data["status"] not in STATUSES:
            raise ValueError(f"record {rec.cell_id}: unknown status {data['status']!r}")
        # read back through CellRecord (harness.core.record_codec): a value of the wrong type fails here, loudly
        written = record_from_dict(json.loads(json.dumps(data, allow_nan=False, default=str)), migrate=False)
        line = (record_to_json(written) + "\n").encode("utf-8")
        try:
            with _locked(self._lock_path):
                self._append(line)
        except OSError as e:
            raise RecordWriteError(
                f"cannot write the record of {rec.cell_id} to {self.path}: {_os_error(e)}; kept: {self._kept()}"
            ) from e
        return written

    def set_aside(self, cell_id: str) -> int:
        """Move the records of `cell_id` (its own and its remedy attempts') from cells.jsonl into
        cells.jsonl.superseded, before the cell runs again; returns how many were moved."""
        try:
            with _locked(self._lock_path):
                if not self.path.is_file():
                    return 0
                keep, moved = [], []
                for line in self.path.read_bytes().splitlines(keepends=True):
                    rec = _parse(line)
                    mine = rec is not None and (
                        rec.get("cell_id") == cell_id or rec.get("remedy_of") == cell_id
                    )
                    (moved if mine else keep).append(line)
                if moved:
                    _append_file(self.path.with_name(CELLS_FILE + SUPERSEDED_SUFFIX), b"".join(moved))
                    write_bytes_atomic(self.path, b"".join(keep))
                    self._clean_size = None
                return len(moved)
        except OSError as e:
            raise RecordWriteError(
                f"cannot set aside the records of {cell_id} in {self.path}: {_os_error(e)}"
            ) from e

    # -- internals --------------------------------------------------------------------------------------------------
    def _append(self, data: bytes) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            start = os.fstat(fd).st_size
            if start and start != self._clean_size:
                start = self._set_aside_torn_tail(fd, start)
            try:
                _write_all(fd, data)
                os.fsync(fd)
            except OSError:
                with contextlib.suppress(OSError):  # never leave half a record behind for the next append
                    os.ftruncate(fd, start)
                raise
            self._clean_size = start + len(data)
        finally:
            os.close(fd)

    def _set_aside_torn_tail(self, fd: int, size: int) -> int:
        """Move a torn last line into the sidecar file and cut it off; return the file's size after that."""
        begin = _last_line_start(fd, size)
        last = os.pread(fd, size - begin, begin)
        if last.endswith(b"\n") and _parse(last) is not None:
            return size
        sidecar = self.path.with_name(CELLS_FILE + TORN_SUFFIX)
        _append_file(sidecar, last if last.endswith(b"\n") else last + b"\n")
        os.ftruncate(fd, begin)
        os.fsync(fd)
        what = "not a JSON record" if last.endswith(b"\n") else "no final newline"
        msg = f"{self.path}: its last line was torn ({len(last)} bytes, {what}); moved to {sidecar.name} before appending"
        log.warning("%s", msg)
        if self.notify is not None:
            self.notify(msg)
        return begin

    def _kept(self) -> str:
        """What a failed write leaves: the records already in cells.jsonl (counted), env.json and the logs."""
        try:
            n = (
                sum(1 for line in self.path.read_bytes().splitlines() if line.strip())
                if self.path.is_file()
                else 0
            )
        except OSError:
            return f"{self.path} as it was before this record"
        others = " and ".join(f for f in (ENV_FILE, "logs/") if (self.run_dir / f).exists())
        return (
            f"the {n} records already in {self.path.name} (intact)"
            + (f", {others}" if others else "")
            + (f" in {self.run_dir}")
        )


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive `flock` on the file at `path` (created when absent), waiting for it: one holder at a time
    across processes and across threads (each call opens its own file description). Closing the file releases it,
    and the kernel releases it when the process dies. The directory is created when absent (the first record of a
    run creates its run directory)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _os_error(e: OSError) -> str:
    return (
        f"[Errno {e.errno}] {e.strerror}"
        if e.errno is not None and e.strerror
        else f"{type(e).__name__}: {e}"
    )


def _write_all(fd: int, data: bytes) -> None:
    """os.write until every byte is written (a short write is possible near a full disk)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _append_file(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _last_line_start(fd: int, size: int) -> int:
    """Offset of the first byte of the file's last line (its final byte excluded from the search, so a final
    newline ends the last line rather than starting an empty one)."""
    end = size - 1
    while end > 0:
        begin = max(0, end - _BLOCK)
        block = os.pread(fd, end - begin, begin)
        i = block.rfind(b"\n")
        if i >= 0:
            return begin + i + 1
        end = begin
    return 0


def _parse(line: bytes) -> dict | None:
    """The record on `line`, or None when it is not a JSON object."""
    try:
        rec = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    return rec if isinstance(rec, dict) else None


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write a file whole or not at all: a temp file in the same directory, then os.replace over the target."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # what open() would give, not mkstemp's owner-only mode
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def unwritable_reason(path: Path) -> tuple[Path, str] | None:
    """Why `path` cannot be written as a directory: (its nearest existing ancestor, "not a directory" or "not
    writable"), or None when it exists as a writable directory or can be created."""
    probe = Path(path)
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        return probe, "not a directory"
    if not os.access(probe, os.W_OK | os.X_OK):
        return probe, "not writable"
    return None


def write_text_atomic(path: Path, text: str) -> None:
    """Write a text file whole or not at all (see write_bytes_atomic)."""
    write_bytes_atomic(path, text.encode("utf-8"))


def write_env(run_dir: Path, env: dict) -> Path:
    """Write run_dir/env.json atomically (a reader never sees half of it); returns its path.

    Raises RecordWriteError (one line: the file and the error) when it cannot be written."""
    path = Path(run_dir) / ENV_FILE
    try:
        write_text_atomic(path, json.dumps(env, indent=2, default=str) + "\n")
    except OSError as e:
        raise RecordWriteError(f"cannot write {path}: {_os_error(e)}") from e
    return path


#: env.json's key marking a run that did not finish: {"reason", "cells_recorded", "cells_planned"}; absent (or
#: null) in a run that ended normally (and in runs written before the key existed)
INCOMPLETE_KEY = "incomplete"


def incomplete_note(env: dict) -> str | None:
    """'incomplete: N of M cells (why)' for a run env.json marks as not finished, else None."""
    mark = env.get(INCOMPLETE_KEY) if isinstance(env, dict) else None
    if not mark:
        return None
    if not isinstance(mark, dict):
        return "incomplete"
    n, m = mark.get("cells_recorded"), mark.get("cells_planned")
    counts = f"{n} of {m} cells" if isinstance(n, int) and isinstance(m, int) else "cells missing"
    return f"incomplete: {counts}" + (f" ({mark['reason']})" if mark.get("reason") else "")


def duplicate_cells(records: list[CellRecord]) -> list[str]:
    """Cell ids recorded more than once in one run (two writers on one run id, or an edited file)."""
    seen: dict[str, int] = {}
    for r in records:
        if r.cell_id:
            seen[r.cell_id] = seen.get(r.cell_id, 0) + 1
    return sorted(c for c, n in seen.items() if n > 1)


def recorded_cells(run_dir: Path) -> dict[str, str]:
    """Cell id -> status of every cell's own record (not remedy attempts) in run_dir/cells.jsonl; the last record
    wins when a cell was recorded twice. Empty when there is no cells.jsonl."""
    path = Path(run_dir) / CELLS_FILE
    if not path.is_file():
        return {}
    return {r.cell_id: r.status for r in read_records(path) if r.cell_id and not r.remedy}


# ---- reading ---------------------------------------------------------------------------------------------------


def is_results_dir(path: str | Path) -> bool:
    """Whether path is a directory holding a cells.jsonl."""
    return (Path(path) / CELLS_FILE).is_file()


def read_records(path: str | Path) -> list[CellRecord]:
    """The records of cells.jsonl (or a run dir holding one) as typed CellRecords, migrated to the current schema.

    A torn or non-object line is skipped with a warning (a run killed mid-write); raises ValueError naming the file
    and line for an unknown schema version or a record that does not fit CellRecord (RecordError).
    """
    return _read_converted(path, record_from_dict)


def read_record_dicts(path: str | Path) -> list[dict[str, Any]]:
    """The records of cells.jsonl as JSON objects, migrated to the current schema but not typed: for what works on
    the JSON itself (comparing two runs' lines key by key); every other reader takes `read_records`."""
    return _read_converted(path, migrate_record)


def _read_converted(path: str | Path, convert: Callable[[dict], Any]) -> list:
    """Each record line of cells.jsonl (or a run dir holding one) through `convert`; a ValueError names the line."""
    path = Path(path)
    if path.is_dir():
        path = path / CELLS_FILE
    out = []
    for n, rec in _numbered_records(path):
        try:
            out.append(convert(rec))
        except ValueError as e:
            raise ValueError(f"{path}:{n}: {e}") from None
    return out


def _numbered_records(path: Path) -> list[tuple[int, dict]]:
    """(line number, JSON object) of each record line of a cells.jsonl, before migration."""
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
            out.append((n, rec))
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


def read_records_checked(run_dir: Path) -> list[CellRecord]:
    """The records for import: every one with a cell id and a known status. Raises ImportRefused."""
    if not is_results_dir(run_dir):
        raise ImportRefused(f"{run_dir}: no cells.jsonl; not a results directory")
    try:
        records = read_records(run_dir)
    except ValueError as e:  # read_records refuses unknown schema versions
        raise ImportRefused(f"refusing to import {run_dir}: {e}") from e
    for rec in records:
        if not rec.cell_id:
            raise ImportRefused(f"{run_dir}: a record has no cell_id; refusing to import")
        if rec.status not in STATUSES:
            raise ImportRefused(
                f"{run_dir}: record {rec.cell_id} has unknown status {rec.status!r}; refusing to import"
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
    records: list[CellRecord] = field(default_factory=list)
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


def merged_machines(
    env: dict, records: list[CellRecord]
) -> tuple[list[tuple[dict, list[CellRecord]]], list[CellRecord]]:
    """Split a merged directory's records by machine: ([(machines entry, its records)], orphan records).

    Orphans name no machine that env.json lists; the report shows them as machine unknown, the import refuses.
    """
    groups, claimed = [], set()
    for entry in env.get(MACHINES_KEY) or []:
        if not isinstance(entry, dict):
            continue
        key = str(entry.get(MACHINE_FIELD) or UNKNOWN)
        claimed.add(key)
        groups.append((entry, [r for r in records if str(r.machine) == key]))
    orphans = [r for r in records if str(r.machine) not in claimed]
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
    run_id = str(env.get("run_id") or next((r.run_id for r in records if r.run_id), None) or run_dir.name)
    if isinstance(env.get(MACHINES_KEY), list) and env[MACHINES_KEY]:
        return _split_merged(run_dir, run_id, env, records)
    return [Run(run_dir, run_id, env, records, dir_run_id=run_id, log_roots=(run_dir,))]


def _split_merged(run_dir: Path, run_id: str, env: dict, records: list[CellRecord]) -> list[Run]:
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
    "INCOMPLETE_KEY",
    "MACHINES_KEY",
    "MACHINE_FIELD",
    "SOURCE_RUN_FIELD",
    "SUPERSEDED_SUFFIX",
    "TORN_SUFFIX",
    "UNKNOWN",
    "HistoryError",
    "ImportRefused",
    "RecordWriteError",
    "RecordWriter",
    "Run",
    "dig",
    "duplicate_cells",
    "incomplete_note",
    "is_results_dir",
    "load_run",
    "merged_machines",
    "read_env",
    "read_env_checked",
    "read_record_dicts",
    "read_records",
    "read_records_checked",
    "recorded_cells",
    "write_bytes_atomic",
    "write_env",
    "write_text_atomic",
]
