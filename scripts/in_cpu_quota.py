"""Run a command inside a CPU quota, as `docker run --cpus=N` or a Kubernetes CPU limit would give it.

    python scripts/in_cpu_quota.py --cpus 0.5 [--period-us 100000] -- COMMAND [ARGS...]

A child cgroup of this process's own is made under the cpu controller (cgroup v1 `cpu.cfs_quota_us` /
`cpu.cfs_period_us`, or v2 `cpu.max` where the controller is enabled for children), the command is started inside
it (it and everything it starts), and when it ends the processes left in the cgroup are ended and the cgroup
removed. The last line on stderr says the quota and how often it throttled the command (its cpu.stat).

Exit status: the command's; 77 with one `in_cpu_quota: SKIP: why` line where no cgroup can be made here (not root,
no cpu controller mounted, a read-only one), so a test can skip with that reason.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.core import cpu_quota  # noqa: E402

SKIP = 77


def skip(why: str) -> None:
    print(f"in_cpu_quota: SKIP: {why}", file=sys.stderr)
    sys.exit(SKIP)


def base_dir() -> tuple[int, Path]:
    """(cgroup version, this process's own cgroup directory under the cpu controller), or skip."""
    own = Path("/proc/self/cgroup")
    if not own.is_file():
        skip("no /proc/self/cgroup: not Linux, or no cgroups")
    v1, v2 = cpu_quota.parse_proc_cgroup(own.read_text())
    mounts = cpu_quota.parse_mountinfo(Path("/proc/self/mountinfo").read_text())
    m1 = next((m for m in mounts if m.version == 1 and "cpu" in m.controllers), None)
    if m1 is not None and "cpu" in v1:
        return 1, Path(cpu_quota.cgroup_dir(m1, v1["cpu"]))
    m2 = next((m for m in mounts if m.version == 2), None)
    if m2 is None or v2 is None:
        skip("no cgroup cpu controller is mounted here")
    base = Path(cpu_quota.cgroup_dir(m2, v2))
    try:
        enabled = (base / "cgroup.subtree_control").read_text().split()
    except OSError as e:
        skip(f"cgroup v2 at {base}: {e}")
    if "cpu" not in enabled:
        skip(
            f"cgroup v2: the cpu controller is not enabled for the children of {base} (cgroup.subtree_control)"
        )
    return 2, base


def make(version: int, base: Path, cpus: float, period_us: int) -> Path:
    """The child cgroup with the quota, or skip."""
    child = base / f"yolo26-quota-{os.getpid()}"
    quota_us = max(1000, round(cpus * period_us))
    try:
        child.mkdir()
    except OSError as e:
        skip(f"cannot make a cgroup under {base} ({e}): root with a writable cpu controller is needed")
    try:
        if version == 1:
            (child / "cpu.cfs_period_us").write_text(str(period_us))
            (child / "cpu.cfs_quota_us").write_text(str(quota_us))
        else:
            (child / "cpu.max").write_text(f"{quota_us} {period_us}")
    except OSError as e:
        child.rmdir()
        skip(f"cannot set the quota in {child} ({e})")
    return child


def remove(child: Path) -> None:
    """End what is left in the cgroup (only processes the command started), then remove it."""
    for _ in range(50):
        try:
            pids = [int(p) for p in (child / "cgroup.procs").read_text().split()]
        except OSError:
            pids = []
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
    try:
        child.rmdir()
    except OSError as e:
        print(f"in_cpu_quota: {child} not removed ({e})", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cpus", type=float, required=True, help="the quota in CPUs (0.5: half a CPU)")
    ap.add_argument("--period-us", type=int, default=100_000, help="the CFS period (default 100000 us)")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    args = ap.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("no command given (after --)")
    if not 0.01 <= args.cpus <= 4096 or not 1000 <= args.period_us <= 1_000_000:
        ap.error("--cpus must be within 0.01..4096 and --period-us within 1000..1000000")
    version, base = base_dir()
    child = make(version, base, args.cpus, args.period_us)
    procs = child / "cgroup.procs"

    def enter() -> None:  # in the child, before exec: it and everything it starts live in the cgroup
        procs.write_text(str(os.getpid()))

    quota = cpu_quota.Quota(args.cpus, stat_file=str(child / "cpu.stat"))
    start = cpu_quota.throttle(quota)
    try:
        proc = subprocess.Popen(command, preexec_fn=enter)
        try:
            rc = proc.wait()
        except KeyboardInterrupt:
            proc.send_signal(signal.SIGINT)
            rc = proc.wait()
        used = cpu_quota.difference(start, cpu_quota.throttle(quota))
    finally:
        remove(child)
    if used:
        print(
            f"in_cpu_quota: {args.cpus:g} CPU (cgroup v{version} {child}): the command was throttled in "
            f"{used['throttled']} of {used['periods']} periods ({used['throttled_s']} s held back)",
            file=sys.stderr,
        )
    return rc


if __name__ == "__main__":
    sys.exit(main())
