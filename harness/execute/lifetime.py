"""An export or probe worker's lifetime: it ends with the run that started it, and at its own time limit.

The parent (harness.execute.isolate) enforces `--export-timeout` while it waits; these guards hold when it cannot
wait any more: killed (SIGKILL, SIGTERM) or gone, the worker (in its own session, so no terminal signal reaches it)
would otherwise be re-parented to init and run on, unbounded. Three guards, from the kernel's to the worker's own:

- a parent-death signal (Linux `prctl(PR_SET_PDEATHSIG, SIGKILL)`, through ctypes): the kernel kills the worker
  the moment the thread that started it ends, even while the worker is stuck in native code;
- a watchdog thread polling `os.getppid()`: on any platform, when the parent is gone, and when the worker's own
  time limit passes, it kills the worker's whole process group (compiler processes the export started included);
- `alarm()` a little after the time limit, whose default action ends the process: a backstop for a watchdog that
  cannot run (native code holding the GIL).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import math
import os
import signal
import sys
import threading
import time

log = logging.getLogger(__name__)

#: the pid of the process that started the worker (set by isolate.run_child)
PARENT_ENV = "YOLO26_BENCH_PARENT_PID"
PR_SET_PDEATHSIG = 1
POLL_S = 0.5
#: seconds after the worker's own limit at which SIGALRM ends it, should the watchdog not have
BACKSTOP_S = 30


def set_parent_death_signal(sig: int = signal.SIGKILL) -> bool:
    """Ask the kernel to send `sig` to this process when its parent thread ends (Linux only); whether it did."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def end_now(why: str) -> None:
    """Say why on stdout (the worker's log), then kill this process and, when it leads its own process group (as
    a worker does), everything it started."""
    print(f"[worker] {why}; ending it and its child processes", flush=True)
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpgrp(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def guard(parent_pid: int | None, limit_s: float | None) -> None:
    """Bind this worker's life to `parent_pid` and to `limit_s` seconds from now (either may be None)."""
    set_parent_death_signal()
    # The parent may have died between the fork and the prctl call: then we are already an orphan.
    if parent_pid and os.getppid() != parent_pid:
        end_now(f"its parent (pid {parent_pid}) is gone")
    deadline = time.monotonic() + limit_s if limit_s else None
    if limit_s:
        signal.alarm(math.ceil(limit_s + BACKSTOP_S))

    def watch() -> None:
        while True:
            time.sleep(POLL_S)
            if parent_pid and os.getppid() != parent_pid:
                end_now(f"its parent (pid {parent_pid}) is gone")
            if deadline is not None and time.monotonic() > deadline:
                end_now(f"exceeded its own time limit of {limit_s:g} s")

    threading.Thread(target=watch, name="worker-watchdog", daemon=True).start()


def parent_from_env() -> int | None:
    """The parent pid isolate.run_child passed, or None when the worker was started by hand."""
    try:
        return int(os.environ[PARENT_ENV])
    except (KeyError, ValueError):
        return None
