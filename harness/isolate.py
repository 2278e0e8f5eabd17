"""Run an export in a separate process with a timeout and a memory limit; classify how it ended."""

from __future__ import annotations

import json
import logging
import os
import resource
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.backends.base import ExportRequest

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ExportOutcome:
    """How an isolated export ended. status: ok, export_failed, timeout or crashed."""

    status: str
    export_s: float | None
    artifact: str | None = None
    info: dict = field(default_factory=dict)
    message: str | None = None
    exception_type: str | None = None
    traceback: str | None = None
    signal: str | None = None
    wall_s: float | None = None
    log: str | None = None


def _limit_memory(limit_bytes: int | None):
    def apply() -> None:
        if limit_bytes:
            # RLIMIT_DATA bounds heap growth (malloc/mmap'd anonymous memory) without counting the large virtual
            # reservations that torch and its allocators make, which RLIMIT_AS would.
            resource.setrlimit(resource.RLIMIT_DATA, (limit_bytes, limit_bytes))

    return apply


def run_export(
    req: ExportRequest,
    log_path: Path,
    timeout_s: float,
    memory_limit_gb: float | None = None,
    imports: tuple[str, ...] = (),
) -> ExportOutcome:
    """Export in a child process. The child's full output goes to `log_path`."""
    out = Path(req.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    req_path = out / "request.json"
    result_path = out / "result.json"
    result_path.unlink(missing_ok=True)
    req_path.write_text(json.dumps({**req.to_dict(), "imports": list(imports)}))
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    t0 = time.perf_counter()
    with open(log_path, "ab") as logf:
        logf.write(f"=== export {req.backend} -> {req.out_dir}\n".encode())
        logf.flush()
        proc = subprocess.Popen(
            [sys.executable, "-m", "harness.worker", str(req_path)],
            stdout=logf,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # its own process group: a timeout kills its compiler children too
            preexec_fn=_limit_memory(int(memory_limit_gb * 2**30) if memory_limit_gb else None),
        )
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            wall = time.perf_counter() - t0
            logf.write(f"\n=== killed after the {timeout_s:.0f} s export timeout\n".encode())
            return ExportOutcome(
                "timeout",
                None,
                message=f"export exceeded the {timeout_s:.0f} s timeout (--export-timeout)",
                wall_s=wall,
                log=str(log_path),
            )
    wall = time.perf_counter() - t0
    result = json.loads(result_path.read_text()) if result_path.exists() else None
    if rc < 0 or (result is None and rc != 0):
        sig = signal.Signals(-rc).name if rc < 0 else None
        detail = f"killed by {sig}" if sig else f"exited with status {rc} without a result"
        if sig == "SIGKILL":
            detail += " (out of memory or killed externally)"
        return ExportOutcome("crashed", None, message=f"export process {detail}", signal=sig, wall_s=wall,
                             log=str(log_path))
    if result is None:
        return ExportOutcome("crashed", None, message="export process wrote no result", wall_s=wall, log=str(log_path))
    if result["status"] != "ok":
        return ExportOutcome(
            "export_failed",
            result.get("export_s"),
            message=result.get("message"),
            exception_type=result.get("exception_type"),
            traceback=result.get("traceback"),
            wall_s=wall,
            log=str(log_path),
        )
    return ExportOutcome("ok", result["export_s"], artifact=result["artifact"], info=result.get("info", {}),
                         wall_s=wall, log=str(log_path))
