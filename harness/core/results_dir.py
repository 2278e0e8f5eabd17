"""The one reader and writer of a results directory, results/<run_id>/: cells.jsonl (one record per line) and
env.json.

Every reader (the report, the history, the exports, `check`) goes through here, so every record and env.json it
sees is schema version 2: older files are migrated on read (harness.core.migrate) and files of an unknown version
are refused with an error naming the file and line. The report reads tolerantly (a missing env.json is shown as an
unknown machine); the history reads strictly (`read_env_checked`, `read_records_checked` raise ImportRefused).

One reading rule for every file (the "reading" section below: MAX_LINE_BYTES, MAX_RECORDS_BYTES, MAX_JSON_BYTES,
MAX_DEPTH, strict UTF-8): a bad line of cells.jsonl (torn, not UTF-8, not JSON, too long, too deep, not an
object, or a record that does not fit the schema: a field of the wrong type, a status or an axis value it does not
know; harness.core.record_codec) is skipped and named with its file, line, field and value (`SkippedLine`), and
the rest is read: report, check, export and import each count what they skipped; anything else wrong with a file is a
RunFileError, one line naming the file (the commands exit 2 on it); a records file holding no record is NoRecords
where records are required (`read_records(path, required=True)`, `load_run`, `read_records_checked`).

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
import stat
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.core.cli_args import printable
from harness.core.migrate import migrate_env, migrate_record
from harness.core.pairing import drop_cross_session_pairs
from harness.core.record import STATUSES, CellRecord, check_finite
from harness.core.record_codec import RecordError, record_from_dict, record_to_dict, record_to_json

log = logging.getLogger(__name__)

CELLS_FILE = "cells.jsonl"
ENV_FILE = "env.json"
UNKNOWN = "unknown"
MACHINES_KEY = "machines"
MACHINE_FIELD = "machine"
SOURCE_RUN_FIELD = "source_run_id"


class HistoryError(Exception):
    """A history operation that cannot go ahead; the message says why, on one line: its text is escaped
    (cli_args.printable), so a run id or cell id from a file cannot forge a second line on the terminal."""

    def __str__(self) -> str:
        return printable(super().__str__())


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
        written, line = _as_line(rec)
        try:
            with _locked(self._lock_path):
                self._append(line)
        except OSError as e:
            raise RecordWriteError(
                f"cannot write the record of {rec.cell_id} to {self.path}: {_os_error(e)}; kept: {self._kept()}"
            ) from e
        return written

    def replace(self, rec: CellRecord) -> CellRecord:
        """Put `rec` in place of the cell's own record (its last one; not a remedy attempt's) in cells.jsonl, the
        file rewritten whole and renamed over the old one (a kill leaves the old file or the new, never half), and
        return it as written. The scenario phase adds what it measured this way, after the cell was recorded
        (harness.execute.scenario_phase). A cell with no record in the file is a ValueError."""
        written, line = _as_line(rec)
        try:
            with _locked(self._lock_path):
                lines = self.path.read_bytes().splitlines(keepends=True) if self.path.is_file() else []
                mine = [
                    n
                    for n, old in enumerate(lines)
                    if (d := _parse(old)) is not None
                    and d.get("cell_id") == rec.cell_id
                    and not d.get("remedy")
                ]
                if not mine:
                    raise ValueError(f"{self.path}: no record of {rec.cell_id} to replace")
                lines[mine[-1]] = line
                write_bytes_atomic(self.path, b"".join(lines))
                self._clean_size = None
        except OSError as e:
            raise RecordWriteError(
                f"cannot rewrite the record of {rec.cell_id} in {self.path}: {_os_error(e)}; kept: {self._kept()}"
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


def _as_line(rec: CellRecord) -> tuple[CellRecord, bytes]:
    """`rec` as it will be read back, and its line: a NaN or infinite figure nulled with its reason
    (record.check_finite), a value JSON cannot hold as its str(), an unknown status refused."""
    data = record_to_dict(rec)
    check_finite(data)  # NaN or infinite figures become null with a reason, never a silent NULL
    if data["status"] not in STATUSES:
        raise ValueError(f"record {rec.cell_id}: unknown status {data['status']!r}")
    # read back through CellRecord (harness.core.record_codec): a value of the wrong type fails here, loudly
    written = record_from_dict(json.loads(json.dumps(data, allow_nan=False, default=str)), migrate=False)
    return written, (record_to_json(written) + "\n").encode("utf-8")


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
    """The record on `line`, or None when the reader would skip it (parse_line: the reading rule)."""
    if len(line.rstrip(b"\n")) > MAX_LINE_BYTES:
        return None
    rec, _ = parse_line(line)
    return rec


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
    return {cell_id: r.status for cell_id, r in recorded_records(run_dir).items()}


def recorded_records(run_dir: Path) -> dict[str, CellRecord]:
    """Cell id -> every cell's own record (not remedy attempts) in run_dir/cells.jsonl, the last one where a cell
    was recorded twice (what --resume reads: the status, and the failure's class). Empty when there is no
    cells.jsonl."""
    path = Path(run_dir) / CELLS_FILE
    if not path.is_file():
        return {}
    return {r.cell_id: r for r in read_records(path) if r.cell_id and not r.remedy}


# ---- reading ---------------------------------------------------------------------------------------------------
#
# The one rule for every file a command reads from a run (cells.jsonl, env.json, a merged machine's source
# env.json, the report's --history JSON): the limits below, strict UTF-8, and one JSON value per line (cells.jsonl)
# or per file. The limits are far above anything the harness writes: of the 1,569 records committed under
# results/samples/ and tests/data/ (2026-11-27) the longest line is 44,659 bytes, the largest cells.jsonl 960 kB,
# the deepest record nests 7 levels; the largest env.json is 8,376 bytes, 5 levels deep (a merged one adds 2).

#: the most bytes of one line of cells.jsonl (16 MiB: 375 times the longest committed record)
MAX_LINE_BYTES = 16 * 2**20
#: the most bytes of one cells.jsonl (256 MiB: 270 times the largest committed file; some 25,000 records)
MAX_RECORDS_BYTES = 256 * 2**20
#: the most bytes of one JSON file read whole: env.json, the report's --history (64 MiB)
MAX_JSON_BYTES = 64 * 2**20
#: the deepest nesting of objects and arrays in one record or JSON file (64 levels; a record has 7)
MAX_DEPTH = 64
_CHUNK = 1 << 20


class RunFileError(ValueError):
    """A file of a run that cannot be read as a whole (missing rights, not a regular file, over its size limit,
    env.json not UTF-8 or not JSON, too deep, of the wrong shape): the message is one line naming the file, and the
    command that reads it exits with status 2. A bad line of cells.jsonl is not this: it is skipped and named."""


class NoRecords(RunFileError):
    """A records file holding no record (0 bytes, only blank lines, or only lines that were skipped): nothing to
    report, export, import or check. Raised by `read_records(path, required=True)` and by the readers built on it
    (`load_run`, `read_records_checked`)."""


def _shown(path: Path) -> str:
    return printable(str(path))


def _open_regular(path: Path):
    """`path` opened for reading in binary, and its size; RunFileError when it is not a regular file (a FIFO would
    block the read, a device never end it) or cannot be opened."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # O_NONBLOCK: opening a FIFO never waits for a writer
    except OSError as e:
        raise RunFileError(f"{_shown(path)}: cannot be read ({_os_error(e)})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise RunFileError(f"{_shown(path)}: not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb"), st.st_size
    except BaseException:
        os.close(fd)
        raise


def _amount(n: int) -> str:
    return f"{n // 2**20} MiB" if n % 2**20 == 0 else f"{n} bytes"


def _size_error(path: Path, size: int | str, limit: int, what: str) -> RunFileError:
    return RunFileError(
        f"{_shown(path)}: {size} bytes, over the {_amount(limit)} a {what} may hold "
        "(harness.core.results_dir's limits)"
    )


def _lines(path: Path) -> Iterator[tuple[int, bytes | None]]:
    """(line number, bytes) of each line of a records file; bytes None for a line over MAX_LINE_BYTES (the rest of
    it is read past, never held). RunFileError for a file that cannot be read or is over MAX_RECORDS_BYTES."""
    f, size = _open_regular(path)
    with f:
        if size > MAX_RECORDS_BYTES:
            raise _size_error(path, size, MAX_RECORDS_BYTES, "records file")
        total, n = 0, 0
        try:
            while True:
                line = f.readline(MAX_LINE_BYTES + 1)
                if not line:
                    return
                n += 1
                total += len(line)
                if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                    while line and not line.endswith(b"\n"):  # read past the rest of the line
                        line = f.readline(_CHUNK)
                        total += len(line)
                        if total > MAX_RECORDS_BYTES:
                            break
                    line = None
                if total > MAX_RECORDS_BYTES:  # a file that grew, or one whose size the kernel does not say
                    raise _size_error(path, f"over {total}", MAX_RECORDS_BYTES, "records file")
                yield n, line
        except OSError as e:
            raise RunFileError(f"{_shown(path)}: cannot be read ({_os_error(e)})") from None


def _depth_or_text_error(value: Any) -> str | None:
    """Why a parsed JSON value is not one to pass on: nested deeper than MAX_DEPTH, or holding a string that is not
    Unicode text (a lone surrogate, from a `\\ud800` escape); None when it is fine. Iterative: no recursion."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth + 1 > MAX_DEPTH:
                return f"nested deeper than {MAX_DEPTH} levels"
            if isinstance(item, dict):
                for k, v in item.items():
                    stack.append((k, depth + 1))
                    stack.append((v, depth + 1))
            else:
                stack.extend((v, depth + 1) for v in item)
        elif isinstance(item, str) and not item.isascii():
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as e:
                return f"holds {item[e.start]!a}, a lone surrogate: not Unicode text"
    return None


def parse_json(data: bytes) -> tuple[Any, str | None]:
    """(value, None) for JSON text within the rule (strict UTF-8, at most MAX_DEPTH levels, only Unicode text in
    its strings); (None, why) otherwise, `why` a short phrase naming the byte or the error. Never raises."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return None, f"not UTF-8 (byte 0x{data[e.start]:02x} at offset {e.start})"
    try:
        value = json.loads(text)
    except RecursionError:
        return None, f"nested deeper than {MAX_DEPTH} levels"
    except ValueError as e:  # JSONDecodeError, or an integer of more digits than Python converts
        return None, f"not JSON ({printable(str(e))[:200]})"
    why = _depth_or_text_error(value)
    return (None, why) if why else (value, None)


def parse_line(line: bytes | None) -> tuple[dict | None, str | None]:
    """One line of cells.jsonl as a JSON object: (object, None); (None, None) for a blank line; (None, why) for a
    line the reader skips (over MAX_LINE_BYTES, not UTF-8, not JSON, too deep, not an object)."""
    if line is None:
        return None, f"longer than {_amount(MAX_LINE_BYTES)}"
    line = line.strip()
    if not line:
        return None, None
    value, why = parse_json(line)
    if why:
        return None, why
    if not isinstance(value, dict):
        return None, f"a JSON {type(value).__name__}, not an object"
    return value, None


def read_json_file(path: str | Path, what: str = "JSON file") -> Any:
    """The JSON value of a file read whole (env.json, the report's --history) under the rule: a regular file of at
    most MAX_JSON_BYTES, strict UTF-8, JSON, at most MAX_DEPTH levels deep. RunFileError naming the file otherwise."""
    path = Path(path)
    f, size = _open_regular(path)
    with f:
        if size > MAX_JSON_BYTES:
            raise _size_error(path, size, MAX_JSON_BYTES, what)
        try:
            data = f.read(MAX_JSON_BYTES + 1)
        except OSError as e:
            raise RunFileError(f"{_shown(path)}: cannot be read ({_os_error(e)})") from None
    if len(data) > MAX_JSON_BYTES:
        raise _size_error(path, f"over {MAX_JSON_BYTES}", MAX_JSON_BYTES, what)
    value, why = parse_json(data)
    if why:
        raise RunFileError(f"{_shown(path)}: {why}")
    return value


def is_results_dir(path: str | Path) -> bool:
    """Whether path is a directory holding a cells.jsonl: of any kind, so that one which is not a regular file (a
    link to /dev/zero, a FIFO) is named as such by the reader (`_open_regular`), never called missing."""
    try:
        return Path(path).is_dir() and (Path(path) / CELLS_FILE).exists()
    except (OSError, ValueError):  # a name too long, a NUL in it
        return False


@dataclass(frozen=True)
class SkippedLine:
    """A line of cells.jsonl the reading rule skipped: its file, its number, and why (the field and value that do
    not fit, or what makes it unreadable)."""

    path: str
    line: int
    why: str

    def text(self) -> str:
        """`FILE:LINE: why; line skipped`: the warning every reader prints, escaped to one line."""
        return printable(f"{self.path}:{self.line}: {self.why}; line skipped")


def skipped_words(skipped: list[SkippedLine] | tuple[SkippedLine, ...], shown: int = 3) -> str:
    """`2 record lines skipped (cells.jsonl:4: ...; cells.jsonl:9: ...)`: the count a report, an export or an
    import adds to what it says, with the first `shown` lines (file name and line number, and why)."""
    n = len(skipped)
    first = "; ".join(printable(f"{Path(s.path).name}:{s.line}: {s.why}") for s in skipped[:shown])
    return f"{n} record line{'s' * (n != 1)} skipped ({first}{' ...' if n > shown else ''})"


def read_records(
    path: str | Path, *, required: bool = False, skipped: list[SkippedLine] | None = None
) -> list[CellRecord]:
    """The records of cells.jsonl (or a run dir holding one) as typed CellRecords, migrated to the current schema.

    The reading rule (the limits above): a line that is torn, not UTF-8, not JSON, longer than MAX_LINE_BYTES,
    nested deeper than MAX_DEPTH, not an object, or a record that does not fit CellRecord (a RecordError: a field
    of the wrong type, an unknown status or axis value) is skipped with a warning naming the file, the line and why,
    and the rest is read; each skipped line is appended to `skipped` when given. RunFileError (a ValueError, one
    line naming the file) when the file cannot be read at all or is over MAX_RECORDS_BYTES; NoRecords (one) when
    `required` and it holds no record, every line skipped included. A record of an unknown schema version (a newer
    harness wrote it) raises ValueError naming the file and line.
    """
    records = _read_converted(path, record_from_dict, required, skipped)
    drop_cross_session_pairs(records)  # a ratio to a partner a --resume timed in another process is no pair
    return records


def read_record_dicts(path: str | Path, *, required: bool = False) -> list[dict[str, Any]]:
    """The records of cells.jsonl as JSON objects, migrated to the current schema but not typed: for what works on
    the JSON itself (comparing two runs' lines key by key); every other reader takes `read_records`."""
    return _read_converted(path, migrate_record, required)


def _read_converted(
    path: str | Path,
    convert: Callable[[dict], Any],
    required: bool = False,
    skipped: list[SkippedLine] | None = None,
) -> list:
    """Each record line of cells.jsonl (or a run dir holding one) through `convert`: a line it refuses as not
    fitting the schema (RecordError) skipped and named, any other ValueError (an unknown schema version) raised
    naming the line."""
    path = Path(path)
    try:
        if path.is_dir() and path.name != CELLS_FILE:  # a directory named cells.jsonl: "not a regular file"
            path = path / CELLS_FILE
    except (OSError, ValueError) as e:  # a name too long, a NUL in it
        raise RunFileError(f"{_shown(path)}: cannot be read ({e})") from None
    out = []
    found: list[SkippedLine] = []
    numbered, lines = _numbered_records(path, found)
    for n, rec in numbered:
        try:
            out.append(convert(rec))
        except RecordError as e:  # a size not in the axes, status "splendid", a latency that is text
            found.append(_skip(path, n, str(e)))
        except ValueError as e:
            raise ValueError(printable(f"{path}:{n}: {e}")) from None
    found.sort(key=lambda s: s.line)
    if skipped is not None:
        skipped.extend(found)
    if required and not out:
        raise NoRecords(f"{_shown(path)}: no records ({_no_records_why(lines, len(found))})")
    return out


def _skip(path: Path, n: int, why: str) -> SkippedLine:
    """A skipped line, said as a warning now (the reader's one line per skipped line)."""
    line = SkippedLine(_shown(path), n, why)
    log.warning("%s", line.text())
    return line


def _no_records_why(lines: int, skipped: int) -> str:
    if not lines:
        return "an empty file"
    if not skipped:
        return f"{lines} blank line{'s' * (lines != 1)}"
    return (
        f"{lines} line{'s' * (lines != 1)}, {skipped} of them skipped as unreadable or not fitting the record "
        "schema (each named above)"
    )


def _numbered_records(path: Path, skipped: list[SkippedLine]) -> tuple[list[tuple[int, dict]], int]:
    """(line number, JSON object) of each record line of a cells.jsonl, before migration, each unreadable line
    appended to `skipped`; how many lines the file has."""
    out, n = [], 0
    for n, line in _lines(path):
        rec, why = parse_line(line)
        if why:
            # A run killed mid-write can leave a torn last line; a hand edit or another tool anything: the line is
            # named and skipped, the records around it are read.
            skipped.append(_skip(path, n, why))
        elif rec is not None:
            out.append((n, rec))
    return out, n


def read_env(run_dir: str | Path) -> dict | None:
    """run_dir/env.json migrated to the current schema, or None when there is none.

    Raises RunFileError (a ValueError, naming the file) when it breaks the reading rule (read_json_file), is not a
    JSON object, holds a key the harness reads of the wrong JSON type (`check_env_shape`), or is of an unknown
    version.
    """
    path = Path(run_dir) / ENV_FILE
    try:
        if not path.exists():
            return None
    except (OSError, ValueError):
        return None
    env = read_json_file(path, "env.json")
    if not isinstance(env, dict):
        raise RunFileError(f"{_shown(path)}: a JSON {type(env).__name__}, not an object")
    try:
        check_env_shape(env)
        return migrate_env(env)
    except ValueError as e:
        raise RunFileError(printable(f"{path}: {e}")) from None


#: env.json keys the readers index into: objects when present and not null
_ENV_OBJECTS = ("host", "cuda", "libraries", "threads", "canary", "allocator", "plan")
#: env.json values the machine's name and the history's fingerprint are made of: a string when present
_ENV_SCALARS = {"host": ("hostname", "cpu_model"), "cuda": ("version",)}


def check_env_shape(env: dict, where: str = "") -> None:
    """Raise ValueError naming the key when env.json holds a key the readers index into with the wrong JSON type:
    `host`, `cuda`, `libraries`, `threads`, `canary`, `allocator`, `plan` objects; `gpu` a list of objects; what the
    machine's name and the history's fingerprint are made of (`host.hostname`, `host.cpu_model`, `cuda.version`,
    each library's version, each GPU's `name` and `driver`) a string or null; a merged run's `machines` a list
    of objects each with a non-empty `machine` and `run_id` (strings), its `env` (an object of this same shape) and
    an optional `source` (a string)."""
    for key in _ENV_OBJECTS:
        if env.get(key) is not None and not isinstance(env[key], dict):
            raise ValueError(f"{where}{key} is a {_json_type(env[key])}, not an object")
    gpus = env.get("gpu")
    if gpus is not None and not (isinstance(gpus, list) and all(isinstance(g, dict) for g in gpus)):
        raise ValueError(f"{where}gpu is not a list of objects")
    scalars = [
        (f"{k}.{name}", (env.get(k) or {}).get(name)) for k, names in _ENV_SCALARS.items() for name in names
    ]
    scalars += [(f"libraries.{name}", v) for name, v in (env.get("libraries") or {}).items()]
    scalars += [
        (f"gpu[{i}].{name}", g.get(name)) for i, g in enumerate(gpus or []) for name in ("name", "driver")
    ]
    for key, value in scalars:
        if value is not None and not isinstance(value, str):
            raise ValueError(f"{where}{key} is a {_json_type(value)}, not a string")
    machines = env.get(MACHINES_KEY)
    if machines is None:
        return
    if not isinstance(machines, list):
        raise ValueError(f"{where}{MACHINES_KEY} is a {_json_type(machines)}, not a list")
    for i, m in enumerate(machines):
        at = f"{where}{MACHINES_KEY}[{i}]"
        if not isinstance(m, dict):
            raise ValueError(f"{at} is a {_json_type(m)}, not an object")
        for key in (MACHINE_FIELD, "run_id"):
            if not isinstance(m.get(key), str) or not m[key]:
                raise ValueError(f"{at}.{key} is not a non-empty string")
        if not isinstance(m.get("env"), dict):
            raise ValueError(f"{at}.env is not an object")
        if m.get("source") is not None and not isinstance(m["source"], str):
            raise ValueError(f"{at}.source is not a string")
        check_env_shape(m["env"], f"{at}.env.")


def _json_type(value: Any) -> str:
    names = {dict: "object", list: "list", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def read_env_checked(run_dir: Path) -> dict:
    """env.json for import: required (it carries the machine fingerprint). Raises ImportRefused."""
    try:
        env = read_env(run_dir)
    except ValueError as e:
        raise ImportRefused(f"refusing to import {run_dir}: {e}") from e
    if env is None:
        raise ImportRefused(f"{run_dir}: no env.json, so no machine fingerprint; refusing to import")
    return env


def read_records_checked(run_dir: Path, skipped: list[SkippedLine] | None = None) -> list[CellRecord]:
    """The records for import, under the reading rule every command applies: a line that is unreadable or does not
    fit the schema (no cell id, an unknown status, ...) is skipped, named and appended to `skipped`. Raises
    ImportRefused when the file cannot be read, holds no record, or holds one of an unknown schema version."""
    if not is_results_dir(run_dir):
        raise ImportRefused(f"{run_dir}: no cells.jsonl; not a results directory")
    try:
        return read_records(run_dir, required=True, skipped=skipped)
    except ValueError as e:  # unreadable, no records, an unknown schema version
        raise ImportRefused(f"refusing to import {run_dir}: {e}") from e


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
    #: the lines of its cells.jsonl the reading rule skipped (a merged directory's: on its first machine's Run)
    skipped: tuple[SkippedLine, ...] = ()

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

    A missing env.json is logged and the machine shown as unknown. Raises NoRecords when cells.jsonl holds no
    record, RunFileError when cells.jsonl or env.json breaks the reading rule, ValueError (naming file and line)
    for a record of an unknown schema version or one that does not fit CellRecord: each one line.
    """
    run_dir = Path(run_dir)
    skipped: list[SkippedLine] = []
    records = read_records(run_dir / CELLS_FILE, required=True, skipped=skipped)
    env = read_env(run_dir)
    if env is None:
        log.warning("%s: no env.json; machine details shown as unknown", _shown(run_dir))
        env = {}
    run_id = str(env.get("run_id") or next((r.run_id for r in records if r.run_id), None) or run_dir.name)
    if isinstance(env.get(MACHINES_KEY), list) and env[MACHINES_KEY]:
        runs = _split_merged(run_dir, run_id, env, records)
        return [replace(runs[0], skipped=tuple(skipped)), *runs[1:]] if runs else runs
    return [
        Run(run_dir, run_id, env, records, dir_run_id=run_id, log_roots=(run_dir,), skipped=tuple(skipped))
    ]


def source_root(run_dir: Path, entry: dict) -> Path | None:
    """The directory a merged run's machine `entry` names as its `source`, resolved, when its logs may be linked;
    else None (logged, with why).

    A merged run's records keep their `log` relative to the run they came from, so that run's directory is where a
    log is looked for, but env.json's `source` is text from a file like any record's `log`: it is trusted only when
    it resolves (links followed) (a) inside the merged run directory itself, or (b) to a results directory (holding
    a cells.jsonl) whose own env.json, read under the same rule, is a plain run (not itself merged) of the run id the
    entry names (env.json's `run_id`, else the directory's name, as the history reads it). `/`, `/etc` or a home
    directory is neither; a log is then still linked only when it resolves inside that directory
    (harness.report.render.LogLinks).
    """
    text = entry.get("source")
    if not isinstance(text, str) or not text:
        return None
    shown = printable(text if len(text) <= 200 else text[:200] + "...")
    label = f"{_shown(run_dir)}: machine {printable(str(entry.get(MACHINE_FIELD)))}: its source {shown}"
    try:
        if "\0" in text:
            raise ValueError("a path holding a NUL")
        root = Path(text).resolve()
        if root.is_relative_to(run_dir.resolve()):
            return root
        if not is_results_dir(root):
            raise ValueError("not a results directory (no cells.jsonl)")
        env = read_env(root)
    except (OSError, ValueError, RuntimeError) as e:  # RuntimeError: a loop of symbolic links
        log.warning("%s is not used for its logs: %s", label, printable(str(e)))
        return None
    # the run id as the history reads it (harness.history.rundir): env.json's, else the directory's name
    source_run = str(env.get("run_id") or root.name) if env is not None else None
    if env is None or env.get(MACHINES_KEY) or source_run != str(entry.get("run_id")):
        found = "no env.json" if env is None else f"run {printable(repr(source_run))}"
        log.warning(
            "%s is not used for its logs: it holds %s, not run %s",
            label,
            "a merged run" if env and env.get(MACHINES_KEY) else found,
            printable(repr(entry.get("run_id"))),
        )
        return None
    return root


def _split_merged(run_dir: Path, run_id: str, env: dict, records: list[CellRecord]) -> list[Run]:
    groups, orphans = merged_machines(env, records)
    runs = []
    for entry, mine in groups:
        sub_env = entry.get("env") if isinstance(entry.get("env"), dict) else {}
        source = source_root(run_dir, entry) if mine else None
        roots = (run_dir, source) if source else (run_dir,)
        key = str(entry.get(MACHINE_FIELD) or UNKNOWN)
        runs.append(Run(run_dir, str(entry.get("run_id") or run_id), sub_env, mine, run_id, key, roots))
    if orphans:
        log.warning(
            "%s: %d records name no machine listed in env.json; shown as machine unknown",
            _shown(run_dir),
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
    "MAX_DEPTH",
    "MAX_JSON_BYTES",
    "MAX_LINE_BYTES",
    "MAX_RECORDS_BYTES",
    "SOURCE_RUN_FIELD",
    "SUPERSEDED_SUFFIX",
    "TORN_SUFFIX",
    "UNKNOWN",
    "HistoryError",
    "ImportRefused",
    "NoRecords",
    "RecordWriteError",
    "RecordWriter",
    "Run",
    "RunFileError",
    "SkippedLine",
    "check_env_shape",
    "dig",
    "duplicate_cells",
    "incomplete_note",
    "is_results_dir",
    "load_run",
    "merged_machines",
    "parse_json",
    "parse_line",
    "read_env",
    "read_env_checked",
    "read_json_file",
    "read_record_dicts",
    "read_records",
    "read_records_checked",
    "recorded_cells",
    "recorded_records",
    "skipped_words",
    "source_root",
    "write_bytes_atomic",
    "write_env",
    "write_text_atomic",
]
