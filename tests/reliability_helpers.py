"""Helpers of the reliability probe (tests/test_reliability_probe.py): real processes, a real tmpfs, a real suite run.

Nothing here mocks the part under test: a worker is `python -m harness.execute.worker`, a full disk is a small
tmpfs mounted in a private mount namespace (`unshare`), a history database is an SQLite file.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import REPO

FAULTS = "tests.fault_backends"


def child_env(**extra: str) -> dict:
    """The environment of a child process that imports this worktree's harness and tests."""
    path = os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))
    return dict(os.environ, PYTHONPATH=path, **extra)


def tmpfs_prefix(mount: Path, size: str, after: str | None = None) -> list[str] | None:
    """A command prefix running `"$@"` with a `size` tmpfs mounted at `mount` in a private mount namespace (then
    the shell command `after`, while the tmpfs is still there); None where this machine allows no such namespace
    (the caller skips, saying so)."""
    if shutil.which("unshare") is None:
        return None
    flags = ["-m"] if os.geteuid() == 0 else ["-r", "-m"]
    if subprocess.run(["unshare", *flags, "true"], capture_output=True).returncode != 0:
        return None
    run = f'"$@"; rc=$?; {after}; exit $rc' if after else 'exec "$@"'
    return ["unshare", *flags, "sh", "-c", f'mount -t tmpfs -o size={size} none "{mount}" && {run}', "sh"]


def suite(
    *args: str,
    env: dict | None = None,
    prefix: list[str] | None = None,
    timeout: int = 600,
    sigint: str = "default",
):
    """`pytest suites/ --benchmark-only ARGS` in a child process, from the repository root. The child starts with
    SIGINT at its default (`sigint="default"`) or ignored (`"ignored"`, as a shell starts a background job), never
    with whatever this process happens to have (a test suite started in the background has it ignored)."""
    cmd = [sys.executable, "-m", "pytest", "suites/", "--benchmark-only", "-p", "no:randomly", *args]
    disposition = {"default": signal.SIG_DFL, "ignored": signal.SIG_IGN}[sigint]
    return subprocess.run(
        (prefix or []) + cmd,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env or child_env(),
        preexec_fn=lambda: signal.signal(signal.SIGINT, disposition),
    )


def gpu_cells(results: Path, run_id: str, shapes: str = "160") -> list[str]:
    """onnxruntime CUDA cells: skipped on a machine without CUDA, so a suite run records them without exporting."""
    return [
        "--sizes", "n", "--tasks", "detect", "--heads", "e2e", "--backends", "onnxruntime", "--devices", "cuda",
        "--shapes", shapes, "--precisions", "fp32", "--results-dir", str(results),
        "--cache-dir", str(results / "cache"), "--run-id", run_id, "--no-report",
    ]  # fmt: skip


def children(pid: int) -> list[int]:
    """The child processes of `pid` (Linux /proc)."""
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def alive(pid: int) -> bool:
    """Whether `pid` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def wait_for(predicate, timeout_s: float, poll_s: float = 0.1) -> bool:
    """Poll `predicate` until it holds or `timeout_s` passes; whether it held."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(poll_s)
    return predicate()


def kill_quietly(pid: int) -> None:
    """SIGKILL a process this test started, if it is still there."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def request_payload(backend: str, out_dir: Path, **extra) -> dict:
    """An export request for a fault-injecting backend (tests.fault_backends), as isolate.run_child writes it."""
    return {
        "backend": backend,
        "device": "cpu",
        "checkpoint": "unused.pt",
        "size": "n",
        "task": "detect",
        "head": "raw",
        "height": 320,
        "width": 320,
        "dynamic": False,
        "batch": 1,
        "precision": "fp32",
        "out_dir": str(out_dir),
        "imports": [FAULTS],
        **extra,
    }


def write_json(path: Path, obj) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))
    return path
