"""One run id, one writer: a results directory is claimed, atomically, for the life of the run that writes it.

A check that a run directory exists followed by its creation is two steps: two runs started together on one new
id (or two `--resume` runs seconds apart) both pass the check and record every cell twice. The claim is one step:
an exclusive `flock` on `<run_dir>/.run.lock`, taken without waiting and held until the process ends (the kernel
drops it when the process dies, however it dies, so a killed run never leaves a stale claim). The holder writes
its pid, host, start time and command into the lock file, so a refused run names who holds the id.

Shards of one run (pytest-split groups, docs/scale-out.md) write one directory together: each holds the run's lock
shared and its own group's lock exclusively, so shards run side by side while two processes of one group, or a
whole run beside any shard, are refused.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

LOCK = ".run.lock"
#: how long a refused run waits for the holder's details to appear in the lock file (it locks, then writes them)
DETAILS_WAIT_S = 2.0
#: files of the claim and the record writer's lock: a directory holding only these holds no run
CLAIM_FILES = (LOCK, ".cells.jsonl.lock")


class RunClaimed(Exception):
    """The run id is held by another process; the message is one line naming the holder."""


@dataclass
class RunClaim:
    """A held claim on a run directory; `release` (or the end of the process) gives it up."""

    run_dir: Path
    fds: list[int] = field(default_factory=list)
    #: the topmost directory the claim created (the run directory or an ancestor), None when it existed
    created: Path | None = None

    def release(self) -> None:
        """Give up the claim; directories this claim created that nothing else wrote to are removed (a session
        that ran nothing, such as --collect-only, leaves no trace)."""
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = []
        if self.created is None or not self.run_dir.is_dir() or holds_a_run(self.run_dir):
            return  # not ours to remove, already removed (a test session's own defaults directory), or a run
        for p in self.run_dir.iterdir():
            if _is_claim_file(p.name):
                p.unlink(missing_ok=True)
        d = self.run_dir
        while True:
            try:
                d.rmdir()  # only while empty: a sibling run keeps its parent
            except OSError:
                return
            if d == self.created:
                return
            d = d.parent


def _is_claim_file(name: str) -> bool:
    return name in CLAIM_FILES or (name.startswith(".run.") and name.endswith(".lock"))


def holds_a_run(run_dir: Path) -> bool:
    """Whether `run_dir` holds anything a run wrote (claim and lock files aside)."""
    return run_dir.is_dir() and any(not _is_claim_file(p.name) for p in run_dir.iterdir())


def _holder() -> dict:
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "since": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv)[:300],
    }


def _describe(path: Path) -> str:
    """Who holds `path`: the details its holder wrote. A holder takes the lock before it writes them, so a reader
    between the two finds nothing yet: it reads again for up to DETAILS_WAIT_S before saying so."""
    deadline = time.monotonic() + DETAILS_WAIT_S
    while True:
        try:
            h = json.loads(path.read_text(encoding="utf-8"))
            return f"pid {h['pid']} on {h['host']} since {h['since']} ({h['command']})"
        except (OSError, ValueError, KeyError, TypeError):
            if time.monotonic() >= deadline:
                return "another process (it recorded no details)"
            time.sleep(0.02)


def _lock(path: Path, shared: bool) -> int | None:
    """An fd holding `path` locked (shared or exclusive), or None when another process holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _sign(fd: int) -> None:
    """Write this process's details into the lock file it holds exclusively."""
    data = json.dumps(_holder()).encode()
    os.pwrite(fd, data, 0)  # over a dead holder's details, then cut to length: never an empty file between
    os.ftruncate(fd, len(data))


def _busy(path: Path) -> bool:
    fd = _lock(path, shared=False)
    if fd is None:
        return True
    os.close(fd)
    return False


def claim(run_dir: str | Path, shard: str | None = None) -> RunClaim:
    """Claim `run_dir` for this process (created when needed), for a whole run or for one `shard` of it.

    Raises RunClaimed (one line naming the holder) when another process holds it; OSError when the directory or
    its lock file cannot be created."""
    run_dir = Path(run_dir)
    created = None
    probe = run_dir.absolute()
    while not probe.exists():
        created, probe = probe, probe.parent
    run_dir.mkdir(parents=True, exist_ok=True)
    main = run_dir / LOCK
    fd = _lock(main, shared=shard is not None)
    if fd is None:
        holders = [] if _shards_busy(run_dir) else [_describe(main)]
        holders += [f"shard {_shard_name(p)}: {_describe(p)}" for p in _shard_locks(run_dir) if _busy(p)]
        raise RunClaimed(
            f"run id {run_dir.name} is being written by {'; '.join(holders) or _describe(main)}: wait for it to end, "
            "or choose another --run-id"
        )
    if shard is None:
        _sign(fd)
        return RunClaim(run_dir.absolute(), [fd], created)
    own = run_dir / f".run.{shard}.lock"
    sfd = _lock(own, shared=False)
    if sfd is None:
        os.close(fd)
        raise RunClaimed(
            f"shard {shard} of run id {run_dir.name} is being written by {_describe(own)}: wait for it to end"
        )
    _sign(sfd)
    return RunClaim(run_dir.absolute(), [fd, sfd], created)


def _shard_locks(run_dir: Path) -> list[Path]:
    return sorted(p for p in run_dir.glob(".run.*.lock") if p.name != LOCK)


def _shard_name(p: Path) -> str:
    return p.name[len(".run.") : -len(".lock")]


def _shards_busy(run_dir: Path) -> bool:
    return any(_busy(p) for p in _shard_locks(run_dir))
