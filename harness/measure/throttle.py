"""How often the cgroup's CPU quota throttled a cell's timed rounds: the record's `throttle` section.

In a container with a CPU quota (harness.core.cpu_quota) the kernel stops every thread of the cgroup once a period's
allowance is spent and lets them run again at the next period: a round that meets such a stall takes up to a period
longer, so a tail (p90, p99) measured while the quota throttled is the quota's, not the runtime's. The tracker reads
the binding level's cpu.stat right before and right after each block of the cell's timed rounds (the blocks of a
workload's runners alternate: only its own blocks count) and fills {periods, throttled, throttled_s, share,
quota_cpus, source}: the quota periods its rounds ran in, how many of them throttled, the time held back. The report
says so beside the figure (`words`, in the latency table's rounds, where "unstable" is said). A machine without a
quota has no such section (nothing throttles).
"""

from __future__ import annotations

from harness.core import cpu_quota
from harness.core.record import CellRecord, set_null
from harness.measure.base import Tracker, register_tracker


def section(periods: int, throttled: int, seconds: float | None, quota: cpu_quota.Quota) -> dict:
    """The record's `throttle` section."""
    return {
        "periods": periods,
        "throttled": throttled,
        "throttled_s": None if seconds is None else round(seconds, 4),
        "share": round(throttled / periods, 4) if periods else 0.0,
        "quota_cpus": quota.cpus,
        "period_us": quota.period_us,
        "source": quota.stat_file,
    }


def words(section: dict | None) -> str:
    """What the report says beside a figure whose timed rounds the quota throttled: ` taken while the CPU quota
    throttled (42 of 60 periods, 1.3 s held back)`; "" where it throttled none of them or the record has no section
    (as "unstable" is said only of a scatter)."""
    if not isinstance(section, dict):
        return ""
    throttled, periods = section.get("throttled"), section.get("periods")
    if not isinstance(throttled, int) or not isinstance(periods, int) or throttled <= 0:
        return ""
    held = section.get("throttled_s")
    held_text = f", {held:.3g} s held back" if isinstance(held, int | float) and held > 0 else ""
    cpus = section.get("quota_cpus")
    quota = f" of {cpus:g} CPU" if isinstance(cpus, int | float) else ""
    return f" taken while the CPU quota{quota} throttled ({throttled} of {periods} periods{held_text})"


class ThrottleTracker(Tracker):
    """cpu.stat's throttle counters summed over the cell's blocks of timed rounds."""

    field = "throttle"

    def __init__(self, quota: cpu_quota.Quota) -> None:
        self.quota = quota
        self.periods = 0
        self.throttled = 0
        self.seconds: float | None = 0.0
        self.blocks = 0
        self.unread = 0
        self._at: dict | None = None

    @classmethod
    def for_cell(cls, cell) -> ThrottleTracker | None:
        """A tracker where this process has a CPU quota; None otherwise (nothing throttles it)."""
        quota = cpu_quota.read_quota()
        return cls(quota) if quota.cpus is not None else None

    def resume(self) -> None:
        self._at = cpu_quota.throttle(self.quota)

    def pause(self) -> None:
        d = cpu_quota.difference(self._at, cpu_quota.throttle(self.quota))
        self._at = None
        self.blocks += 1
        if d is None:
            self.unread += 1
            return
        self.periods += d["periods"]
        self.throttled += d["throttled"]
        self.seconds = (
            None if self.seconds is None or d["throttled_s"] is None else self.seconds + d["throttled_s"]
        )

    def fill(self, rec: CellRecord) -> None:
        if not self.blocks:  # no timed rounds ran (a failed load, a probe process)
            return
        if self.unread == self.blocks:
            set_null(rec, "throttle", f"{self.quota.stat_file} could not be read around the timed rounds")
            return
        rec.throttle = section(self.periods, self.throttled, self.seconds, self.quota)
        if self.unread:
            rec.throttle["unread_blocks"] = self.unread


register_tracker("throttle", order=50)(ThrottleTracker.for_cell)
