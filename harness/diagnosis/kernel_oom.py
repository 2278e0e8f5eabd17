"""Was a process killed by the kernel's out-of-memory killer? Only the kernel's own record can say.

A SIGKILL is what the OOM killer sends, and also what `kill -9`, a job scheduler or a container runtime sends. The
kernel logs every OOM kill ("Out of memory: Killed process 1234 (python) ...", "oom-kill:...,pid=1234,..."), so the
log decides; when it cannot be read (dmesg restricted or absent) the answer is unknown, never a guess.
"""

from __future__ import annotations

import re
import shutil
import subprocess

DMESG_TIMEOUT_S = 5.0


def oom_record(pid: int, log_text: str) -> str | None:
    """The kernel log line recording an OOM kill of `pid` in `log_text`, or None."""
    rx = re.compile(rf"(Killed process {pid}\b|oom-kill:.*\bpid={pid}\b)")
    for line in log_text.splitlines():
        if rx.search(line):
            return line.strip()
    return None


def kernel_log() -> str | None:
    """The kernel's message buffer (`dmesg`), or None when it cannot be read here."""
    exe = shutil.which("dmesg")
    if exe is None:
        return None
    try:
        p = subprocess.run([exe], capture_output=True, text=True, errors="replace", timeout=DMESG_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    return p.stdout if p.returncode == 0 else None


def sigkill_detail(pid: int) -> str:
    """How to describe a SIGKILL of `pid`: an OOM kill only when the kernel's log records one."""
    text = kernel_log()
    if text is None:
        return (
            "killed by signal 9 (SIGKILL); the kernel log (dmesg) could not be read, so an out-of-memory kill "
            "cannot be told from a kill from outside"
        )
    record = oom_record(pid, text)
    if record is not None:
        return f"killed by SIGKILL: the kernel's OOM killer ended it ({record[:200]})"
    return f"killed by SIGKILL from outside (the kernel log records no out-of-memory kill of pid {pid})"
