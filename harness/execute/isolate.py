"""Run exports and first runs in a separate process with a timeout and a memory limit; classify how they ended."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import resource
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from harness.backends._shared.libstdcxx import PRELOAD_OPTION, system_libstdcxx, with_preload
from harness.backends._shared.phases import last_phase
from harness.backends.base import ExportRequest
from harness.diagnosis import native_stack
from harness.diagnosis.classify import classify, evidence_line
from harness.diagnosis.kernel_oom import sigkill_detail
from harness.diagnosis.native_fault import NativeFault, parse_fault
from harness.diagnosis.outcome import ExportOutcome
from harness.execute import interrupt
from harness.execute.lifetime import PARENT_ENV
from harness.execute.worker import DUMP_SIGNAL, REPORT_FD_ENV, os_error_line

log = logging.getLogger(__name__)

#: seconds past the parent's timeout at which a worker ends itself (harness.execute.lifetime)
WORKER_GRACE_S = 30.0
#: process groups of the workers running now (each worker leads its own), so an interrupted run can end them
_LIVE: set[int] = set()
#: workers the harness itself SIGKILLed, with why: their record says so, never "killed from outside"
_KILLED_BY_RUN: dict[int, str] = {}


def kill_live_workers(why: str = "the run was interrupted") -> None:
    """SIGKILL every running worker's process group: the run is being interrupted (SIGINT, SIGTERM: `why`) and
    its threads waiting on workers must return now rather than at the export timeout."""
    for pgid in list(_LIVE):
        _KILLED_BY_RUN[pgid] = why
        with contextlib.suppress(OSError):
            os.killpg(pgid, signal.SIGKILL)


#: seconds a worker gets to print its stack (SIGUSR1, faulthandler) before it is killed
STACK_DUMP_WAIT_S = 1.0


def dump_stack(proc: subprocess.Popen) -> None:
    """Ask a worker that is about to be killed (a timeout, an interrupted run) to print its Python stack into its log:
    every worker registers faulthandler on SIGUSR1 (harness.execute.worker), so a hang says where it hung."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(OSError):
        os.kill(proc.pid, DUMP_SIGNAL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=STACK_DUMP_WAIT_S)


def _worker_output(log_path: Path, offset: int) -> str:
    """What one worker wrote to its log (from `offset`), or "" when the log cannot be read."""
    try:
        with open(log_path, "rb") as f:
            f.seek(offset)
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _read_report(fd: int) -> str | None:
    """The worker's one-line report, if it wrote one (read without blocking: a grandchild may hold the pipe)."""
    os.set_blocking(fd, False)
    try:
        data = os.read(fd, 65536)
    except BlockingIOError:
        return None
    text = data.decode("utf-8", "replace").strip()
    return text.splitlines()[-1] if text else None


def _read_result(path: Path) -> tuple[dict | None, str | None]:
    """The worker's result, or (None, why it could not be read)."""
    if not path.exists():
        return None, None
    try:
        result = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        return None, f"its result file {path} is unreadable: {type(e).__name__}: {e}"
    if not isinstance(result, dict) or "status" not in result:
        return None, f"its result file {path} is not a result"
    return result, None


#: the class a worker that ran out of memory is given (harness/diagnosis/patterns.yaml)
OUT_OF_MEMORY = "out_of_memory"


def ran_out_of_memory(memory_limit_gb: float | None) -> str:
    """`ran out of memory at 0.3 GB (the --export-memory-gb limit)`: what a user who set the limit must read (without
    a limit, the host's memory ran out)."""
    at = (
        f" at {memory_limit_gb:g} GB (the --export-memory-gb limit)"
        if memory_limit_gb
        else " (no memory limit set)"
    )
    return f"ran out of memory{at}"


def _limit_memory(limit_bytes: int | None):
    def apply() -> None:
        if limit_bytes:
            # RLIMIT_DATA bounds heap growth (malloc/mmap'd anonymous memory) without counting the large virtual
            # reservations that torch and its allocators make, which RLIMIT_AS would.
            resource.setrlimit(resource.RLIMIT_DATA, (limit_bytes, limit_bytes))

    return apply


def _crash_fault(fault: NativeFault | None, native: native_stack.NativeStack | None) -> dict | None:
    """A crashed worker's `fault`: faulthandler's Python frames (where, stack, ...) and the native frames under
    `native` (null with `native_reason` when the handler printed none)."""
    if fault is None and native is None:
        return None
    out = fault.to_dict() if fault else {}
    out["native"] = native.to_dict() if native else None
    if native is None:
        _, why = native_stack.handler_library()
        out["native_reason"] = (
            why or "the native backtrace handler printed no frames (the signal came from outside)"
        )
    return out


def run_child(
    payload: dict,
    work_dir: Path,
    log_path: Path,
    timeout_s: float,
    memory_limit_gb: float | None = None,
    failed_status: str = "export_failed",
    name: str = "export",
    env_extra: dict[str, str] | None = None,
) -> ExportOutcome:
    """Run `python -m harness.execute.worker` on `payload` in its own process group; the full output goes to `log_path`.
    `env_extra` is added to the worker's environment (LD_PRELOAD for a loader rung)."""
    work_dir.mkdir(parents=True, exist_ok=True)
    req_path = work_dir / f"{name}-request.json"
    result_path = work_dir / f"{name}-result.json"
    result_path.unlink(missing_ok=True)
    # The worker enforces its own limit too (harness.execute.lifetime), a little after ours: it holds when this
    # process can no longer wait (killed), and ours normally ends the worker first and records a timeout.
    payload = {**payload, "time_limit_s": timeout_s + WORKER_GRACE_S}
    try:
        req_path.write_text(json.dumps(payload, default=str))
    except OSError as e:  # a full disk before the worker even starts: the OS error, not a harness crash
        req_path.unlink(missing_ok=True)
        msg = os_error_line(f"write the {name} request to", work_dir, e)
        return ExportOutcome(failed_status, None, message=msg, exception_type="builtins.OSError", wall_s=0.0)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    report_r, report_w = os.pipe()  # the worker's one-line report when it cannot write its result
    env = native_stack.worker_env(dict(os.environ, PYTHONUNBUFFERED="1"))  # a native crash prints its frames
    env.update(env_extra or {})
    env[PARENT_ENV] = str(os.getpid())
    env[REPORT_FD_ENV] = str(report_w)
    # Exports and probes run side by side in the export phase (harness.execute.workload.prepare_all): OpenMP
    # threads that spin-wait at their barriers would burn the cores the other process needs (nothing is timed in
    # these processes, so waiting passively costs nothing measured).
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    t0 = time.perf_counter()
    try:
        with open(log_path, "ab") as logf:
            logf.write(f"=== {name} in an isolated process ({work_dir})\n".encode())
            logf.flush()
            log_offset = logf.tell()  # what this worker writes starts here (faulthandler's stack included)
            interrupt.check()  # the run was told to stop: no worker starts
            # Started and registered with a signal deferred: raised in between (after the fork), it would leave a
            # worker that nothing ends (its own session: no terminal signal reaches it either).
            with interrupt.deferred():
                proc = subprocess.Popen(
                    [sys.executable, "-m", "harness.execute.worker", str(req_path), str(result_path)],
                    stdout=logf,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=env,
                    pass_fds=(report_w,),
                    start_new_session=True,  # its own process group: a timeout kills its compiler children too
                    preexec_fn=_limit_memory(int(memory_limit_gb * 2**30) if memory_limit_gb else None),
                )
                _LIVE.add(proc.pid)
            try:
                os.close(report_w)
                report_w = -1
                interrupt.check()  # a signal that came while it was being started (in any thread)
                rc = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                dump_stack(proc)  # where it hung: faulthandler prints the worker's Python stack into the log
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                logf.write(f"\n=== killed after the {timeout_s:.0f} s timeout\n".encode())
                logf.flush()
                output = _worker_output(log_path, log_offset)  # read once: the phase and the stack
                got, hung = last_phase(output), parse_fault(output)
                where = f"; it was in {hung.where} ({hung.in_library}'s code)" if hung and hung.where else ""
                return ExportOutcome(
                    "timeout",
                    None,
                    message=f"{name} exceeded the {timeout_s:.0f} s timeout"
                    + (f"; {got}" if got else "")
                    + where,
                    wall_s=time.perf_counter() - t0,
                    log=str(log_path),
                    fault=hung.to_dict() if hung else None,
                )
            except BaseException:  # interrupted (a signal) while waiting: the worker ends with this run
                dump_stack(proc)
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)
                raise
            finally:
                _LIVE.discard(proc.pid)
        report = _read_report(report_r)
    finally:
        for fd in (report_r, report_w):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
    wall = time.perf_counter() - t0
    result, unreadable = _read_result(result_path)
    if result is None and report:
        # The worker ran but could not write its result (a full disk): the OS error, not a harness crash.
        return ExportOutcome(
            failed_status,
            None,
            message=report,
            exception_type="builtins.OSError",
            wall_s=wall,
            log=str(log_path),
        )
    if rc < 0 or result is None:
        sig = signal.Signals(-rc).name if rc < 0 else None
        by_run = sig == "SIGKILL" and proc.pid in _KILLED_BY_RUN
        # faulthandler (enabled in every worker) printed the Python stack of a fatal signal into the log, and the
        # native backtrace handler its native frames
        output = "" if by_run else _worker_output(log_path, log_offset)
        fatal = output if sig not in (None, "SIGKILL") else ""
        python, native = (parse_fault(fatal), native_stack.parse(fatal)) if fatal else (None, None)
        fault = _crash_fault(python, native)
        if by_run:
            detail = f"killed by the harness with SIGKILL: {_KILLED_BY_RUN.pop(proc.pid)}"
        elif sig == "SIGKILL":
            detail = sigkill_detail(proc.pid)
        elif sig:
            detail = f"killed by {sig}" + (f" {python.summary()}" if python else "")
            detail += f"; {native_stack.summary(fault['native'])}" if fault and fault["native"] else ""
        else:
            detail = f"exited with status {rc} without a result" + (f" ({unreadable})" if unreadable else "")
        # No exception reached us, only the log: an allocation that failed there (std::bad_alloc, which aborts; a
        # MemoryError the worker could not even report) is out of memory, said with the limit it ran under
        oom = evidence_line(output, OUT_OF_MEMORY) if output else None
        if oom is not None:
            detail = f"{ran_out_of_memory(memory_limit_gb)}: its log says {oom!r}; {detail}"
        return ExportOutcome(
            "crashed",
            None,
            message=f"{name} process {detail}",
            signal=sig,
            wall_s=wall,
            log=str(log_path),
            fault=fault,
        )
    if result["status"] != "ok":
        message = result.get("message")
        if memory_limit_gb and _out_of_memory(result):
            etype = str(result.get("exception_type") or "").rsplit(".", 1)[-1]
            said = ": ".join(t for t in (etype, str(message or "").strip()) if t)
            message = f"{name} {ran_out_of_memory(memory_limit_gb)}" + (f": {said}" if said else "")
        return ExportOutcome(
            failed_status,
            result.get("seconds"),
            message=message,
            exception_type=result.get("exception_type"),
            traceback=result.get("traceback"),
            wall_s=wall,
            log=str(log_path),
            info=result.get("info") or {},
        )
    return ExportOutcome(
        "ok",
        result["seconds"],
        artifact=result.get("artifact"),
        info=result.get("info") or {k: v for k, v in result.items() if k not in ("status",)},
        wall_s=wall,
        log=str(log_path),
    )


def _out_of_memory(result: dict) -> bool:
    """Whether a worker's failed result is an allocation that failed (MemoryError, std::bad_alloc, ...)."""
    found = classify(result.get("message"), result.get("traceback"), result.get("exception_type"))
    return found["class"] == OUT_OF_MEMORY


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
    `rounds` times with host memory measured there (the outcome's info then holds `memory`).

    Where the load options preload the system libstdc++ (the rung aoti-preload-libstdcxx), two fresh processes
    check it before the benchmark process loads: the first started with LD_PRELOAD (the reported workaround: does
    it load and run at all?), the second without, opening the library with RTLD_GLOBAL before the load as the
    running benchmark process will (does that do the same?). The outcome's info has `preload` either way, and a
    failed outcome's message says which of the two failed."""
    payload = {
        "mode": "probe",
        "cell": cell.to_dict(),
        "artifact": artifact,
        "export_info": export_info,
        "height": height,
        "width": width,
        "rounds": rounds,
    }
    name = f"probe-{height}x{width}"
    preload = None
    if (export_info.get("load_options") or {}).get(PRELOAD_OPTION):
        preload = system_libstdcxx()
        if preload["path"] is None:
            return ExportOutcome("run_failed", None, message=f"{name}: {preload['reason']}", wall_s=0.0)
        first = run_child(
            {**payload, "rounds": 0},
            work_dir,
            log_path,
            timeout_s,
            memory_limit_gb,
            failed_status="run_failed",
            name=f"{name}-ld-preload",
            env_extra={"LD_PRELOAD": with_preload(dict(os.environ), preload["path"])["LD_PRELOAD"]},
        )
        preload = {**preload, "ld_preload_probe": first.status}
        if first.status != "ok":
            return replace(
                first,
                message=f"{first.message} (with LD_PRELOAD={preload['path']}, the system libstdc++ preloaded)",
                info={**(first.info or {}), "preload": preload},
            )
    outcome = run_child(
        payload, work_dir, log_path, timeout_s, memory_limit_gb, failed_status="run_failed", name=name
    )
    if preload is None:
        return outcome
    preload = {**preload, "rtld_global_probe": outcome.status}
    if outcome.status != "ok":
        return replace(
            outcome,
            message=f"{outcome.message} (LD_PRELOAD={preload['path']} loaded and ran it in a fresh process; "
            "opening that library with RTLD_GLOBAL in a running process, as the benchmark process must, did not)",
            info={**(outcome.info or {}), "preload": preload},
        )
    return replace(outcome, info={**(outcome.info or {}), "preload": preload})
