"""The isolated process: `python -m harness.execute.worker REQUEST.json`.

Two modes. `export` (default) runs one backend export. `probe` loads a fresh artifact and runs it once at one
shape, so that a runtime that aborts or segfaults on an artifact takes down this process, not the run. Either
writes RESULT.json beside the request (whole or not at all). A crash, hang or out-of-memory kill of this process is
observed by the parent (harness.execute.isolate) and recorded.

The worker ends with its parent and at its own time limit (`time_limit_s` in the request; harness.execute.lifetime).
A result it cannot write (a full disk) is reported, as one line naming the OS error, the directory and its
filesystem, on the file descriptor the parent passed in $YOLO26_BENCH_REPORT_FD, and the worker exits with
EXIT_NO_RESULT.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import os
import signal
import sys
import time
import traceback
from pathlib import Path

# Imported here, when the process starts, not when the result is written: a worker ending in a MemoryError under the
# memory limit (--export-memory-gb) must not need memory to import what writes its result.
from harness.core.results_dir import write_text_atomic

#: the file descriptor the parent reads a one-line report from when the worker cannot write its result
REPORT_FD_ENV = "YOLO26_BENCH_REPORT_FD"
#: exit status of a worker that could not write its result (the report says why)
EXIT_NO_RESULT = 75
#: the signal on which a worker prints its Python stack and goes on (the parent sends it before killing a worker
#: that outlasted its timeout, so the log says where it hung)
DUMP_SIGNAL = signal.SIGUSR1


def mount_point(path: Path) -> Path:
    """The mount point of the filesystem holding `path` (its nearest existing ancestor's)."""
    p = Path(os.path.abspath(path))
    while not p.exists():
        p = p.parent
    while not os.path.ismount(p):
        p = p.parent
    return p


def os_error_line(action: str, where: Path, e: OSError) -> str:
    """One line: what could not be done where, the OS error, and the filesystem holding `where` with its free
    space (what a reader needs to act on a full disk)."""
    what = f"[Errno {e.errno}] {e.strerror}" if e.errno is not None and e.strerror else str(e)
    disk = mount_point(where)
    try:
        st = os.statvfs(disk)
        space = f", {st.f_bavail * st.f_frsize} bytes free"
    except OSError:
        space = ""
    return f"cannot {action} {where}: {what} (filesystem {disk}{space})"


def write_result(result_path: Path, result: dict) -> None:
    """Write the result whole or not at all: the parent never reads half of it."""
    write_text_atomic(result_path, json.dumps(result, default=str))


def report_unwritten(result_path: Path, e: OSError) -> int:
    """Say on the report descriptor (and in the log) that the result could not be written; the exit status."""
    line = os_error_line("write the worker's result to", result_path.parent, e)
    print(f"[worker] {line}", flush=True)
    fd = os.environ.get(REPORT_FD_ENV)
    if fd:
        with contextlib.suppress(OSError, ValueError):
            os.write(int(fd), (line + "\n").encode("utf-8", "replace"))
    return EXIT_NO_RESULT


def _export(payload: dict) -> dict:
    from harness import backends
    from harness.backends.base import ExportRequest

    req = ExportRequest.from_dict(payload)
    print(
        f"[worker] exporting {req.backend} {req.size}/{req.task}/{req.head} {req.height}x{req.width}"
        f"{' dynamic' if req.dynamic else ''} {req.options or ''}",
        flush=True,
    )
    result = backends.get(req.backend).export(req)
    return {"artifact": result.artifact, "info": result.info}


def _probe(payload: dict) -> dict:
    """Load the artifact and run it: once, or `rounds` times under the host memory tracker and, for a cuda cell,
    the device memory one (a fresh process, so the figures do not depend on what an earlier cell left in the
    benchmark process)."""
    from harness import backends
    from harness.core.cell import Cell
    from harness.core.record import new_record
    from harness.measure.gpu_memory_fresh import FreshGpuMemory
    from harness.measure.host_memory import HostMemoryTracker
    from harness.yolo.inputs import letterboxed

    cell = Cell.from_dict(payload["cell"])
    h, w = payload["height"], payload["width"]
    rounds = int(payload.get("rounds") or 0)
    print(f"[worker] probe run of {payload['artifact']} at {h}x{w} ({rounds} measured rounds)", flush=True)
    backend = backends.get(cell.backend)
    backend.probe(cell.device)  # imports the runtime before the baseline: its libraries are not the cell's
    gpu = FreshGpuMemory.for_cell(cell) if rounds else None
    if gpu:
        gpu.start()  # creates the CUDA context first: its host memory is not the cell's either
    tracker = HostMemoryTracker() if rounds else None
    if tracker:
        tracker.start()
    runner = backend.load(Path(payload["artifact"]), cell, payload.get("export_info") or {})
    prepared = runner.prepare(letterboxed(h, w, cell.batch))
    for _ in range(max(1, rounds)):
        result = runner.run(prepared)
        runner.synchronize()
    out: dict = {"output_shapes": [list(o.shape) for o in runner.outputs(result)]}
    if tracker:
        tracker.stop(rounds)
        if gpu:
            gpu.stop(rounds)
        rec = new_record("probe", cell, weights="probe")  # what the trackers fill; only their figures go back
        tracker.fill(rec)
        if gpu:
            gpu.fill(rec)
        out["memory"], out["null_reasons"] = rec.memory.to_dict() if rec.memory else None, rec.null_reasons
    return out


def _failed(e: BaseException, seconds: float) -> dict:
    """The result of a step that raised `e`, its traceback printed into the log."""
    try:
        tb = traceback.format_exc()
    except MemoryError:  # out of memory even for the text: the type says it
        tb = f"{type(e).__name__} (its traceback could not be formatted: out of memory)"
    print(tb, flush=True)
    failed = {
        "status": "failed",
        "seconds": seconds,
        "exception_type": f"{type(e).__module__}.{type(e).__qualname__}",
        "message": str(e),
        "traceback": tb,
    }
    # what the export did before it failed, where it says so (a fake-device trace: its stages)
    if isinstance(getattr(e, "export_info", None), dict):
        failed["info"] = e.export_info  # type: ignore[attr-defined]
    return failed


def main(argv: list[str]) -> int:
    import faulthandler

    # A native crash (SIGSEGV in a runtime's loader, say) prints this process's Python stack into its log, which
    # the parent reads back into the failure record (harness.diagnosis.native_fault).
    faulthandler.enable(all_threads=True)
    faulthandler.register(DUMP_SIGNAL, all_threads=True)
    # ... and, in front of faulthandler, the native frames (harness.diagnosis.native_stack), where the parent built
    # the handler: the Python frames name only the function that called into the runtime's C++
    from harness.diagnosis import native_stack

    why_not = native_stack.install_in_worker()
    if why_not and os.environ.get(native_stack.ENV, "0") != "0":
        print(f"[worker] no native backtrace: {why_not}", flush=True)
    from harness.core import allocator
    from harness.execute import lifetime
    from harness.threads import budget, set_budget

    # The run's thread budget (inherited as YOLO26_BENCH_THREADS): into OMP_NUM_THREADS before torch or ultralytics
    # is imported, and torch's threads if it already is; the backends apply it again after their own imports.
    set_budget(budget())
    allocator.apply()  # the run's heap policy (inherited as YOLO26_BENCH_MALLOC)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    req_path = Path(argv[0])
    result_path = Path(argv[1]) if len(argv) > 1 else req_path.with_name("result.json")
    payload = json.loads(req_path.read_text())
    lifetime.guard(lifetime.parent_from_env(), payload.pop("time_limit_s", None))
    for mod in payload.pop("imports", []):  # extra backend modules (tests register fault-injecting backends)
        importlib.import_module(mod)
    mode = payload.pop("mode", "export")
    t0 = time.perf_counter()
    failed = None
    try:
        out = _probe(payload) if mode == "probe" else _export(payload)
    except BaseException as e:  # everything raised is data for the diagnosis
        failed = _failed(e, time.perf_counter() - t0)
    if failed is not None:
        # written after the except block: the exception's frames (an export's graphs and weights) are released
        # first, so a worker that ran out of memory has memory to write its result again
        try:
            write_result(result_path, failed)
        except OSError as w:
            return report_unwritten(result_path, w)
        return 1
    seconds = time.perf_counter() - t0
    try:
        write_result(result_path, {"status": "ok", "seconds": seconds, **out})
    except OSError as w:
        return report_unwritten(result_path, w)
    print(f"[worker] {mode} done in {seconds:.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
