"""Run exports and first runs in a separate process with a timeout and a memory limit; classify how they ended."""

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
    """How an isolated step ended. status: ok, export_failed (or run_failed for probes), timeout or crashed."""

    status: str
    export_s: float | None
    artifact: str | None = None
    info: dict = field(default_factory=dict)
    message: str | None = None
    exception_type: str | None = None
    traceback: str | None = None
    signal: str | None = None
    wall_s: float | None = None  # None: the outcome came from the export cache
    log: str | None = None
    exported_by_run: str | None = None  # the run that made the export (kept in the cache's meta.json)
    exported_at: str | None = None
    # Where the export cache keeps it (harness.execute.export_cache); not stored in meta.json's outcome:
    cache_entry: str | None = None  # the entry directory, when the export is cached
    content_sha256: str | None = None  # digest of the entry's file hashes (names the content that was loaded)
    cache_note: str | None = (
        None  # why an entry was not used and the export made again (corrupt, other limits)
    )
    fresh_failure: dict | None = None  # a fresh export of this content failed to load or run: {stage, reason}


def _limit_memory(limit_bytes: int | None):
    def apply() -> None:
        if limit_bytes:
            # RLIMIT_DATA bounds heap growth (malloc/mmap'd anonymous memory) without counting the large virtual
            # reservations that torch and its allocators make, which RLIMIT_AS would.
            resource.setrlimit(resource.RLIMIT_DATA, (limit_bytes, limit_bytes))

    return apply


def run_child(
    payload: dict,
    work_dir: Path,
    log_path: Path,
    timeout_s: float,
    memory_limit_gb: float | None = None,
    failed_status: str = "export_failed",
    name: str = "export",
) -> ExportOutcome:
    """Run `python -m harness.execute.worker` on `payload` in its own process group; the full output goes to `log_path`."""
    work_dir.mkdir(parents=True, exist_ok=True)
    req_path = work_dir / f"{name}-request.json"
    result_path = work_dir / f"{name}-result.json"
    result_path.unlink(missing_ok=True)
    req_path.write_text(json.dumps(payload, default=str))
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    # Exports and probes run side by side in the export phase (harness.execute.workload.prepare_all): OpenMP
    # threads that spin-wait at their barriers would burn the cores the other process needs (nothing is timed in
    # these processes, so waiting passively costs nothing measured).
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    t0 = time.perf_counter()
    with open(log_path, "ab") as logf:
        logf.write(f"=== {name} in an isolated process ({work_dir})\n".encode())
        logf.flush()
        proc = subprocess.Popen(
            [sys.executable, "-m", "harness.execute.worker", str(req_path), str(result_path)],
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
            logf.write(f"\n=== killed after the {timeout_s:.0f} s timeout\n".encode())
            return ExportOutcome(
                "timeout",
                None,
                message=f"{name} exceeded the {timeout_s:.0f} s timeout",
                wall_s=time.perf_counter() - t0,
                log=str(log_path),
            )
    wall = time.perf_counter() - t0
    result = json.loads(result_path.read_text()) if result_path.exists() else None
    if rc < 0 or result is None:
        sig = signal.Signals(-rc).name if rc < 0 else None
        detail = f"killed by {sig}" if sig else f"exited with status {rc} without a result"
        if sig == "SIGKILL":
            detail += " (out of memory or killed externally)"
        return ExportOutcome(
            "crashed", None, message=f"{name} process {detail}", signal=sig, wall_s=wall, log=str(log_path)
        )
    if result["status"] != "ok":
        return ExportOutcome(
            failed_status,
            result.get("seconds"),
            message=result.get("message"),
            exception_type=result.get("exception_type"),
            traceback=result.get("traceback"),
            wall_s=wall,
            log=str(log_path),
        )
    return ExportOutcome(
        "ok",
        result["seconds"],
        artifact=result.get("artifact"),
        info=result.get("info") or {k: v for k, v in result.items() if k not in ("status",)},
        wall_s=wall,
        log=str(log_path),
    )


def run_export(
    req: ExportRequest,
    log_path: Path,
    timeout_s: float,
    memory_limit_gb: float | None = None,
    imports: tuple[str, ...] = (),
) -> ExportOutcome:
    """Export in a child process (see run_child)."""
    return run_child(
        {**req.to_dict(), "imports": list(imports)}, Path(req.out_dir), log_path, timeout_s, memory_limit_gb
    )


def run_probe(
    cell,
    artifact: str,
    export_info: dict,
    height: int,
    width: int,
    work_dir: Path,
    log_path: Path,
    timeout_s: float,
    memory_limit_gb: float | None = None,
    rounds: int = 0,
) -> ExportOutcome:
    """Load `artifact` and run it at height x width in a child process: once (first run of a fresh artifact), or
    `rounds` times with host memory measured there (the outcome's info then holds `memory`)."""
    payload = {
        "mode": "probe",
        "cell": cell.to_dict(),
        "artifact": artifact,
        "export_info": export_info,
        "height": height,
        "width": width,
        "rounds": rounds,
    }
    return run_child(
        payload,
        work_dir,
        log_path,
        timeout_s,
        memory_limit_gb,
        failed_status="run_failed",
        name=f"probe-{height}x{width}",
    )
