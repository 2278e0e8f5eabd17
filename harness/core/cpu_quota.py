"""The CPU quota of this process's cgroup, and how often it throttled: what containers limit and `os.cpu_count()`
does not show.

`docker run --cpus=N`, Kubernetes CPU limits and runner pods give the process a CFS bandwidth quota: cgroup v2's
`cpu.max` ("QUOTA PERIOD", or "max PERIOD" for none), cgroup v1's `cpu.cfs_quota_us` and `cpu.cfs_period_us` (-1 for
none). The affinity mask, `os.cpu_count()` and psutil still show every core of the host, so a runtime sized by them
runs more threads than the quota lets run at once, and the kernel stalls them all at the end of each period's
allowance (a tail of one period's length).

The process's cgroup is the one /proc/self/cgroup names (the cpu controller's line on v1, the `0::` line on v2),
found under the controller's mount (/proc/self/mountinfo; a container's mount whose root is its own cgroup maps it
to the mount point itself). Every level from it up to the mount point may hold a limit: the one with the fewest CPUs
binds (`Quota.cpus` = quota / period there), and its `cpu.stat` counts the periods the quota throttled
(`nr_periods`, `nr_throttled`, and `throttled_usec` on v2, `throttled_time` in ns on v1).

Every function reads under a root directory (default "/"), so tests lay out fake cgroup trees in a temporary
directory. Nothing here raises on a machine without cgroups: a quota that cannot be read is none, with the reason.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

ROOT = Path("/")
PROC_CGROUP = "proc/self/cgroup"
MOUNTINFO = "proc/self/mountinfo"
#: the throttle counters, by the names of each version, to one set of names (throttled time in seconds)
V1_STAT = {"nr_periods": "nr_periods", "nr_throttled": "nr_throttled", "throttled_time": "throttled_ns"}
V2_STAT = {"nr_periods": "nr_periods", "nr_throttled": "nr_throttled", "throttled_usec": "throttled_us"}


@dataclass(frozen=True)
class Mount:
    """A cgroup mount from /proc/self/mountinfo: where it is, which cgroup path its root is, its version and (v1)
    its controllers."""

    point: str
    root: str
    version: int
    controllers: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Level:
    """One cgroup directory from the process's own up to its mount, and the limit it holds (None: none)."""

    path: str
    quota_us: int | None
    period_us: int | None
    source: str

    @property
    def cpus(self) -> float | None:
        if self.quota_us is None or not self.period_us:
            return None
        return self.quota_us / self.period_us


@dataclass(frozen=True)
class Quota:
    """The binding CPU quota of this process (the level with the fewest CPUs), or none with the reason."""

    cpus: float | None
    quota_us: int | None = None
    period_us: int | None = None
    #: the file the binding limit was read from (cpu.max, or cpu.cfs_quota_us beside cpu.cfs_period_us)
    source: str | None = None
    #: the process's cgroup as /proc/self/cgroup names it, and the directory it maps to
    cgroup: str | None = None
    directory: str | None = None
    version: int | None = None
    #: cpu.stat of the binding level: its throttle counters (throttle())
    stat_file: str | None = None
    reason: str | None = None
    levels: tuple[Level, ...] = field(default_factory=tuple)

    @property
    def whole_cpus(self) -> int | None:
        """The CPUs the quota lets run at once, rounded down, at least 1 (None: no quota)."""
        return None if self.cpus is None else max(1, math.floor(self.cpus + 1e-9))

    def to_env(self) -> dict:
        """env.json's `host.cpu_quota`."""
        out = {
            "cpus": None if self.cpus is None else round(self.cpus, 4),
            "quota_us": self.quota_us,
            "period_us": self.period_us,
            "source": self.source,
            "cgroup": self.cgroup,
            "directory": self.directory,
            "version": self.version,
            "stat_file": self.stat_file,
            "levels": [
                {"path": lv.path, "quota_us": lv.quota_us, "period_us": lv.period_us} for lv in self.levels
            ],
        }
        if self.reason:
            out["reason"] = self.reason
        return out

    def words(self) -> str:
        """`a cgroup v1 CPU quota of 0.5 CPU (50000/100000 us, /sys/fs/cgroup/cpu/x/cpu.cfs_quota_us)`, or the
        reason there is none."""
        if self.cpus is None:
            return self.reason or "no CPU quota"
        return (
            f"a cgroup v{self.version} CPU quota of {self.cpus:g} CPU ({self.quota_us}/{self.period_us} us, "
            f"{self.source})"
        )


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def under(root: Path, absolute: str) -> Path:
    """The path `absolute` (as the process sees it) under `root`."""
    return root / absolute.lstrip("/")


def parse_proc_cgroup(text: str) -> tuple[dict[str, str], str | None]:
    """/proc/self/cgroup: (v1 controller -> cgroup path, the v2 path of the `0::` line or None)."""
    v1: dict[str, str] = {}
    v2 = None
    for line in text.splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) != 3:
            continue
        hid, controllers, path = parts
        if hid == "0" and controllers == "":
            v2 = path
            continue
        for c in controllers.split(","):
            if c:
                v1[c] = path
    return v1, v2


def _unescape(text: str) -> str:
    """mountinfo's octal escapes (`\\040` for a space)."""
    if "\\" not in text:
        return text
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and i + 4 <= len(text) and text[i + 1 : i + 4].isdigit():
            out.append(chr(int(text[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def parse_mountinfo(text: str) -> list[Mount]:
    """The cgroup mounts of /proc/self/mountinfo (fields: id parent dev root point options [tags] - type source
    super-options)."""
    mounts = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields_ = left.split()
        after = right.split()
        if len(fields_) < 5 or not after:
            continue
        fstype = after[0]
        root, point = _unescape(fields_[3]), _unescape(fields_[4])
        if fstype == "cgroup2":
            mounts.append(Mount(point, root, 2))
        elif fstype == "cgroup":
            opts = set(after[2].split(",")) if len(after) > 2 else set()
            mounts.append(Mount(point, root, 1, frozenset(opts)))
    return mounts


def cgroup_dir(mount: Mount, path: str) -> str:
    """Where the process's cgroup `path` lies under `mount`: a mount whose root is a cgroup (a container's own,
    without a cgroup namespace) holds that cgroup at its mount point, and the paths below it under it."""
    root = mount.root.rstrip("/")
    if not root:
        rel = path
    elif path == root or path == mount.root:
        rel = "/"
    elif path.startswith(root + "/"):
        rel = path[len(root) :]
    else:  # the mount shows another part of the tree (a cgroup namespace): the mount point is the process's own
        rel = "/"
    return mount.point.rstrip("/") + (rel if rel != "/" else "") or "/"


def _levels_up(leaf: str, top: str) -> list[str]:
    """The directories from `leaf` up to `top` (the mount point), both included."""
    out = [leaf]
    cur = leaf
    while cur.rstrip("/") != top.rstrip("/") and "/" in cur.rstrip("/"):
        cur = cur.rstrip("/").rsplit("/", 1)[0] or "/"
        out.append(cur)
        if len(out) > 64:  # a malformed path never loops
            break
    return out


def _limit_v1(root: Path, directory: str) -> Level | None:
    quota = _read(under(root, directory) / "cpu.cfs_quota_us")
    period = _read(under(root, directory) / "cpu.cfs_period_us")
    if quota is None or period is None:
        return None
    try:
        q, p = int(quota.strip()), int(period.strip())
    except ValueError:
        return None
    source = f"{directory.rstrip('/')}/cpu.cfs_quota_us"
    if q < 0 or p <= 0:  # -1: no limit
        return Level(directory, None, p if p > 0 else None, source)
    return Level(directory, q, p, source)


def _limit_v2(root: Path, directory: str) -> Level | None:
    text = _read(under(root, directory) / "cpu.max")
    if text is None:
        return None
    parts = text.split()
    source = f"{directory.rstrip('/')}/cpu.max"
    try:
        period = int(parts[1]) if len(parts) > 1 else 100_000
    except ValueError:
        return None
    if not parts or parts[0] == "max":
        return Level(directory, None, period, source)
    try:
        q = int(parts[0])
    except ValueError:
        return None
    return Level(directory, q, period, source) if period > 0 else None


def read_quota(root: Path = ROOT) -> Quota:
    """This process's binding CPU quota under `root` (the fewest CPUs of every level from its cgroup up to the
    controller's mount), or a Quota with cpus None and the reason. Never raises."""
    try:
        return _read_quota(root)
    except Exception as e:  # a malformed file must never stop a run
        log.debug("cpu quota not read: %s", e)
        return Quota(None, reason=f"the cgroup files could not be read ({type(e).__name__}: {e})")


def _read_quota(root: Path) -> Quota:
    own = _read(root / PROC_CGROUP)
    if own is None:
        return Quota(None, reason=f"no /{PROC_CGROUP} (not Linux, or no cgroups): no CPU quota known")
    v1_paths, v2_path = parse_proc_cgroup(own)
    mounts = parse_mountinfo(_read(root / MOUNTINFO) or "")
    cpu_v1 = next((m for m in mounts if m.version == 1 and "cpu" in m.controllers), None)
    if cpu_v1 is not None and "cpu" in v1_paths:
        version, path, mount, limit = 1, v1_paths["cpu"], cpu_v1, _limit_v1
    else:
        v2 = next((m for m in mounts if m.version == 2), None)
        if v2 is None or v2_path is None:
            return Quota(None, reason="no cgroup cpu controller is mounted here: no CPU quota known")
        version, path, mount, limit = 2, v2_path, v2, _limit_v2
    leaf = cgroup_dir(mount, path)
    levels = [lv for d in _levels_up(leaf, mount.point) if (lv := limit(root, d)) is not None]
    limited = [lv for lv in levels if lv.cpus is not None]
    if not limited:
        names = "cpu.max" if version == 2 else "cpu.cfs_quota_us"
        none = "'max'" if version == 2 else "-1"
        why = (
            f"no CPU quota: {names} is {none} from {leaf} up to {mount.point}"
            if levels
            else f"no CPU quota: no {names} from {leaf} up to {mount.point}"
        )
        return Quota(None, cgroup=path, directory=leaf, version=version, reason=why, levels=tuple(levels))
    bind = min(limited, key=lambda lv: lv.cpus or math.inf)
    return Quota(
        bind.cpus,
        bind.quota_us,
        bind.period_us,
        bind.source,
        path,
        leaf,
        version,
        f"{bind.path.rstrip('/')}/cpu.stat",
        None,
        tuple(levels),
    )


def parse_cpu_stat(text: str) -> dict[str, int]:
    """`name value` lines of cpu.stat."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            try:
                out[parts[0]] = int(parts[1])
            except ValueError:
                continue
    return out


def throttle(quota: Quota, root: Path = ROOT) -> dict | None:
    """The binding level's throttle counters now: {nr_periods, nr_throttled, throttled_s}; None without a quota
    or where its cpu.stat cannot be read."""
    if quota.stat_file is None:
        return None
    text = _read(under(root, quota.stat_file))
    if text is None:
        return None
    raw = parse_cpu_stat(text)
    if "nr_periods" not in raw or "nr_throttled" not in raw:
        return None
    if "throttled_usec" in raw:
        seconds = raw["throttled_usec"] / 1e6
    elif "throttled_time" in raw:
        seconds = raw["throttled_time"] / 1e9
    else:
        seconds = None
    return {
        "nr_periods": raw["nr_periods"],
        "nr_throttled": raw["nr_throttled"],
        "throttled_s": None if seconds is None else round(seconds, 6),
    }


def difference(start: dict | None, end: dict | None) -> dict | None:
    """The counters' change from `start` to `end`: {periods, throttled, throttled_s}; None where either is None."""
    if not start or not end:
        return None
    ts, te = start.get("throttled_s"), end.get("throttled_s")
    return {
        "periods": max(0, end["nr_periods"] - start["nr_periods"]),
        "throttled": max(0, end["nr_throttled"] - start["nr_throttled"]),
        "throttled_s": None if ts is None or te is None else round(max(0.0, te - ts), 6),
    }


#: env.json's key for the counters at the run's start and end
ENV_KEY = "cpu_throttle"


def env_at_start(quota: Quota, root: Path = ROOT) -> dict:
    """env.json's `cpu_throttle` when the run starts: the binding level's counters now, or why there are none."""
    if quota.cpus is None:
        return {"start": None, "end": None, "reason": "no CPU quota: nothing throttles this process"}
    start = throttle(quota, root)
    out: dict = {"source": quota.stat_file, "start": start, "end": None}
    if start is None:
        out["reason"] = f"{quota.stat_file} could not be read"
    return out


def env_at_end(env: dict, root: Path = ROOT) -> None:
    """Complete env.json's `cpu_throttle` (in `env`) with the counters at the run's end and the change since its
    start; nothing where the run started without a quota or the counters."""
    section = env.get(ENV_KEY)
    if not isinstance(section, dict) or not isinstance(section.get("source"), str):
        return
    end = throttle(Quota(None, stat_file=section["source"]), root)
    section["end"] = end
    section["during_run"] = difference(section.get("start"), end)
