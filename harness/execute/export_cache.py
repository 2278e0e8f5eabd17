"""On-disk export cache keyed by everything that changes the artifact, whose entries can be trusted.

Key: backend, device, weights hash, task, head, shape (or dynamic range), batch, precision, export options, and the
versions of torch, ultralytics and the backend's library. A second run with nothing changed exports nothing.

Why an entry can be trusted:

- Whole or absent: an export is written into a staging directory (exports/.staging/) and renamed into place only
  when it is complete, with its meta.json; a killed export leaves no entry, only staging debris that the next
  holder of the entry's lock removes.
- Checked on every lookup: meta.json records the sha256 of every file of the entry (the artifact file, or each file
  of an artifact directory, and anything the export wrote beside it such as ExecuTorch .ptd data). A missing or
  changed file makes the entry a miss, with the reason, and the caller re-exports. So does any file the entry holds
  that meta.json does not record (a file added beside the artifact, a symbolic link, a FIFO): a backend that picks
  a file by pattern would otherwise run a model nobody exported, so backends load the names they recorded and the
  cache hands out only entries that hold nothing else.
- Self-contained: the artifact path is stored relative to the entry, so a copied cache directory runs its own
  artifacts, never the original's. Every path meta.json names must resolve inside the entry, checked on read as on
  write: an absolute path or `../` (a crafted or damaged meta.json) makes the entry a miss, never a file outside
  the cache handed to the run.
- One writer: each entry has a lock file (exports/.locks/, the maintained `filelock` library), held while an entry
  is looked up, exported and stored; two runs (or two shards) sharing a cache export each artifact once, and the
  second waits and then finds the entry.
- Only deterministic failures are replayed: timeouts, crashes, out-of-memory failures and I/O errors (ENOENT,
  ENOSPC, EACCES, ...) are never cached; any other failure is stored with the limits it ran under
  (--export-memory-gb) and replayed only to a run with the same limits.
- A fresh export of identical content that failed to load or run is noted in meta.json (`fresh_failure`), so a
  later load failure of that cached artifact is known to be genuine rather than corruption (see
  harness.execute.exporting.retry_fresh_export).
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import hashlib
import json
import logging
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from filelock import FileLock, Timeout

from harness.backends.base import library_version
from harness.core.results_dir import RecordWriteError
from harness.diagnosis.outcome import ExportOutcome
from harness.diagnosis.recurrence import TRANSIENT_CLASSES

log = logging.getLogger(__name__)

_HARNESS = Path(__file__).resolve().parent.parent
# The harness code that shapes every artifact; a backend's own module is added per backend. A change to any of
# these files invalidates the cached exports that depend on it.
SHARED_EXPORT_SOURCES = (
    "yolo/models.py",
    "yolo/dynamic.py",
    "yolo/inputs.py",
    "backends/base.py",
    "backends/_shared/ultralytics_export.py",
    "backends/_shared/executorch_export.py",
    "backends/_shared/calibration.py",
    "backends/_shared/ort_quantize.py",
    "backends/_shared/executorch_quantize.py",
)

#: meta.json layout version; an entry of another version (an older harness's, with paths relative to the working
#: directory and no content hashes) is a miss and re-exported once
CACHE_FORMAT = 2
META = "meta.json"
STAGING = ".staging"
LOCKS = ".locks"
#: the export worker's request and result files: written beside the artifact, not part of it
_BOOKKEEPING = re.compile(r"^[\w.-]+-(request|result)\.json$")
#: outcome fields that describe the cache entry, not the export: never stored in meta.json's `outcome`
_ENTRY_FIELDS = ("cache_entry", "content_sha256", "cache_note", "fresh_failure")
#: failure classes that depend on the machine or the moment, not on the model and the exporter (--resume's too)
_TRANSIENT_CLASSES = tuple(TRANSIENT_CLASSES)
_IO_ERROR_TEXT = re.compile(
    r"\[Errno \d+\]|No such file or directory|No space left on device|Permission denied|Stale file handle"
    r"|Input/output error|Disk quota exceeded|Read-only file system"
)


_DISK_FULL = re.compile(r"No space left on device|\[Errno 28\]|Disk quota exceeded")


class CacheFullError(RecordWriteError):
    """An export failed for lack of disk space: every further export would fail the same way, so the run stops
    with one line, as it does when a record cannot be written (the failed cell's record is written first)."""


def disk_full(outcome: ExportOutcome) -> bool:
    """Whether an export (or probe) failed because a disk it wrote to is full."""
    return outcome.status != "ok" and bool(_DISK_FULL.search(outcome.message or ""))


@functools.lru_cache(maxsize=64)
def export_code_digest(backend_module: str | None = None) -> str:
    h = hashlib.sha256()
    files = [_HARNESS / f for f in SHARED_EXPORT_SOURCES]
    if backend_module:
        files.append(Path(backend_module))
    for f in files:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def cache_key(fields: dict, library: str | None, backend_module: str | None = None) -> str:
    libs = {name: library_version(name) for name in ("torch", "ultralytics", library) if name}
    code = export_code_digest(backend_module)
    blob = json.dumps({"fields": fields, "libs": libs, "code": code}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def export_limits(memory_gb: float | None) -> dict:
    """The limits an export ran under that can change whether it fails (the key a cached failure is replayed by)."""
    return {"export_memory_gb": memory_gb}


def not_replayable(outcome: ExportOutcome, limits: dict) -> str | None:
    """Why `outcome` must not be replayed from the cache to a later run, or None when it may be.

    An ok export may always be replayed. A failure may only when it is a property of the model and the exporter:
    not a timeout or a crash (the process ended, nothing was decided), not an out-of-memory failure, not an I/O
    error (a file that vanished under a concurrent run, a full disk). A failure under a memory limit is replayable,
    but only to a run with the same limit (`lookup` compares the stored limits).
    """
    if outcome.status == "ok":
        return None
    if outcome.status != "export_failed":
        return f"a {outcome.status} export says nothing about the next attempt"
    name = (outcome.exception_type or "").rsplit(".", 1)[-1]
    exc = getattr(builtins, name, None)
    if isinstance(exc, type) and issubclass(exc, OSError):
        return f"an I/O error ({name})"
    if _IO_ERROR_TEXT.search(outcome.message or ""):
        return "an I/O error"
    # imported late: the cache must stay importable without the classifier's data
    from harness.diagnosis.classify import classify

    cls = classify(outcome.message, outcome.traceback, outcome.exception_type, status=outcome.status)["class"]
    if cls in _TRANSIENT_CLASSES:
        return f"a failure classified {cls}"
    return None


def content_hashes(entry: Path) -> dict[str, str]:
    """sha256 of every regular file under `entry` (relative POSIX path -> hex digest), except meta.json and the
    export worker's request/result files. Symbolic links are not followed."""
    out = {}
    for f in sorted(Path(entry).rglob("*")):
        if f.is_symlink() or not f.is_file():
            continue
        rel = f.relative_to(entry).as_posix()
        if rel == META or _BOOKKEEPING.match(rel):
            continue
        with open(f, "rb") as fh:
            out[rel] = hashlib.file_digest(fh, "sha256").hexdigest()
    return out


def digest_of(files: dict[str, str]) -> str:
    """One digest over an entry's file hashes: what `content_sha256` names."""
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Lookup:
    """What the cache holds for an entry: an outcome to use, or why not (`miss`; None when there is no entry)."""

    outcome: ExportOutcome | None = None
    miss: str | None = None


class ExportCache:
    """exports/<readable name>-<key12>/ holding the export's files and meta.json."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root) / "exports"

    def entry_dir(self, name: str, key: str) -> Path:
        return self.root / f"{name}-{key[:12]}"

    # -- locking ----------------------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def locked(
        self, entry: Path, timeout_s: float, on_wait: Callable[[], None] | None = None
    ) -> Iterator[None]:
        """Hold the entry's lock: only its holder looks up, exports into or stores the entry.

        `on_wait` is called once when another process holds it (to say so); raises filelock.Timeout after
        `timeout_s` seconds of waiting.
        """
        (self.root / LOCKS).mkdir(parents=True, exist_ok=True)
        lock = FileLock(self.root / LOCKS / f"{entry.name}.lock")
        try:
            lock.acquire(timeout=0)
        except Timeout:
            if on_wait is not None:
                on_wait()
            lock.acquire(timeout=timeout_s)
        try:
            self._remove_staging(
                entry
            )  # debris of a killed export of this entry; only a lock holder writes it
            yield
        finally:
            lock.release()

    # -- reading ----------------------------------------------------------------------------------------------------
    def lookup(self, entry: Path, limits: dict) -> Lookup:
        """The entry's outcome if it can be used as it is: its files match their recorded hashes and, for a
        failure, it ran under the same `limits`. Call with the entry's lock held."""
        meta_path = entry / META
        if not meta_path.exists():
            return Lookup(miss="an incomplete entry (no meta.json)") if entry.exists() else Lookup()
        try:
            meta = json.loads(meta_path.read_text())
            if not isinstance(meta, dict) or meta.get("format") != CACHE_FORMAT:
                return Lookup(miss=f"an entry of an older cache format ({meta_path})")
            stored = dict(meta["outcome"])
            files = dict(meta["files"])
        except (OSError, ValueError, TypeError, KeyError) as e:
            return Lookup(miss=f"an unreadable meta.json ({type(e).__name__}: {e})")
        outside = _outside(entry, [*files, *([stored["artifact"]] if stored.get("artifact") else [])])
        if outside:
            return Lookup(miss=f"an entry naming a path outside itself ({outside})")
        if stored.get("status") != "ok" and meta.get("limits") != limits:
            return Lookup(
                miss=f"an {stored.get('status')} under other limits ({meta.get('limits')}, now {limits})"
            )
        bad = _verify(entry, files)
        if bad:
            return Lookup(miss=f"a corrupt entry: {bad}")
        extra = _unrecorded(entry, files)
        if extra:
            return Lookup(miss=f"an entry holding files it did not record ({extra})")
        rel = stored.get("artifact")
        if stored.get("status") == "ok":
            if not rel or not any(f == rel or f.startswith(rel + "/") for f in files):
                return Lookup(miss=f"an entry whose artifact {rel!r} has no recorded content hash")
            stored["artifact"] = str(entry / rel)
        try:
            outcome = ExportOutcome(**stored)
        except TypeError as e:
            return Lookup(miss=f"an unreadable meta.json ({e})")
        digest = digest_of(files)
        fresh = meta.get("fresh_failure")
        if not isinstance(fresh, dict) or fresh.get("content_sha256") != digest:
            fresh = (
                None  # a note about other content (the entry was replaced since) says nothing about this one
            )
        return Lookup(replace(outcome, cache_entry=str(entry), content_sha256=digest, fresh_failure=fresh))

    # -- writing ----------------------------------------------------------------------------------------------------
    def staging_dir(self, entry: Path) -> Path:
        """A new empty directory to export into; `store` renames it into place. Call with the lock held."""
        path = self.root / STAGING / f"{entry.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
        path.mkdir(parents=True)
        return path

    def store(self, entry: Path, staging: Path, outcome: ExportOutcome, limits: dict) -> ExportOutcome:
        """Move a finished export from `staging` into the entry, with its meta.json, when it may be replayed;
        return the outcome as the caller should use it (its artifact inside the entry). Call with the lock held.

        An outcome that may not be replayed (`not_replayable`) leaves the cache without this entry (a stale or
        corrupt one is removed too) and keeps nothing of the staging directory: it has no artifact to keep.
        """
        why = not_replayable(outcome, limits)
        rel = None
        if why is None and outcome.status == "ok":
            rel = _relative_artifact(outcome.artifact, staging)
            if rel is None:
                why = f"its artifact {outcome.artifact} lies outside the export directory {staging}"
        if why is not None:
            log.info("export of %s not cached: %s", entry.name, why)
            self.clear(entry)
            shutil.rmtree(staging, ignore_errors=True)
            return outcome
        files = content_hashes(staging)
        stored = {k: v for k, v in asdict(outcome).items() if k not in _ENTRY_FIELDS}
        stored["artifact"] = rel
        meta = {"format": CACHE_FORMAT, "outcome": stored, "files": files, "limits": limits}
        _write_json(staging / META, meta)
        self._swap_in(staging, entry)
        return replace(
            outcome,
            artifact=str(entry / rel) if rel else None,
            cache_entry=str(entry),
            content_sha256=digest_of(files),
        )

    def note_fresh_failure(self, entry: Path, content_sha256: str | None, failure: dict) -> bool:
        """Record in the entry's meta.json that a freshly exported artifact of this content failed to load or run
        (`failure`: stage and reason), so a later load failure of the cached copy is known to be genuine. Only
        when the entry still holds that content. Call with the lock held; returns whether it was noted."""
        meta_path = entry / META
        try:
            meta = json.loads(meta_path.read_text())
            if digest_of(meta["files"]) != content_sha256:
                return False
            meta["fresh_failure"] = {**failure, "content_sha256": content_sha256}
            _write_json(meta_path, meta)
        except (OSError, ValueError, TypeError, KeyError) as e:
            log.warning("could not note the fresh failure in %s: %s", meta_path, e)
            return False
        return True

    def clear(self, entry: Path) -> None:
        """Remove the entry (whole: it is renamed away first, so nobody sees half of it)."""
        if not entry.exists():
            return
        trash = self.root / STAGING / f"{entry.name}.old.{uuid.uuid4().hex[:8]}"
        trash.parent.mkdir(parents=True, exist_ok=True)
        os.replace(entry, trash)
        shutil.rmtree(trash, ignore_errors=True)

    # -- internals --------------------------------------------------------------------------------------------------
    def _swap_in(self, staging: Path, entry: Path) -> None:
        self.clear(entry)
        os.replace(staging, entry)

    def _remove_staging(self, entry: Path) -> None:
        staging = self.root / STAGING
        if not staging.is_dir():
            return
        for p in staging.iterdir():
            if p.name.startswith(entry.name + "."):
                shutil.rmtree(p, ignore_errors=True)


def _relative_artifact(artifact: str | None, staging: Path) -> str | None:
    if not artifact:
        return None
    try:
        return Path(artifact).resolve().relative_to(staging.resolve()).as_posix()
    except ValueError:
        return None


def _outside(entry: Path, paths: list) -> str | None:
    """The first of `paths` (as meta.json names them, relative to the entry) that does not resolve inside the
    entry (an absolute path, `../`, a link out), or None. Checked on every read, as `store` checks on write: a
    crafted or damaged meta.json must never hand a file outside the cache entry to the run as its artifact."""
    root = entry.resolve()
    for rel in paths:
        if not isinstance(rel, str) or not rel or Path(rel).is_absolute():
            return repr(rel)
        if not (root / rel).resolve().is_relative_to(root):
            return repr(rel)
    return None


def _unrecorded(entry: Path, files: dict[str, str]) -> str | None:
    """The entry's files that meta.json does not record (None: none): anything but meta.json, the worker's
    bookkeeping files, the recorded files and the directories holding them, including symbolic links (to files
    or directories, never followed) and other non-regular files."""
    found = []
    for top, dirs, names in os.walk(entry, followlinks=False):
        base = Path(top)
        for d in dirs:
            if (base / d).is_symlink():
                found.append((base / d).relative_to(entry).as_posix())
        for name in names:
            rel = (base / name).relative_to(entry).as_posix()
            if rel in files and not (base / name).is_symlink():
                continue
            if rel == META or _BOOKKEEPING.match(rel):
                continue
            found.append(rel)
    if not found:
        return None
    found.sort()
    return ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")


def _verify(entry: Path, files: dict[str, str]) -> str | None:
    """Which recorded files of the entry are missing or differ from their recorded sha256 (None: all match).
    Files the entry holds beyond the recorded ones are `_unrecorded`'s."""
    if not files:
        return None
    parts = []
    for rel, expected in sorted(files.items()):
        f = entry / rel
        if f.is_symlink() or not f.is_file():
            parts.append(f"{rel} missing")
            continue
        with open(f, "rb") as fh:
            if hashlib.file_digest(fh, "sha256").hexdigest() != expected:
                parts.append(f"{rel} content hash mismatch")
    if not parts:
        return None
    return ", ".join(parts[:5]) + (f" and {len(parts) - 5} more" if len(parts) > 5 else "")


def _write_json(path: Path, obj: dict) -> None:
    """Write a JSON file whole or not at all (temp file, fsync, rename)."""
    from harness.core.results_dir import write_text_atomic

    write_text_atomic(path, json.dumps(obj, default=str))
