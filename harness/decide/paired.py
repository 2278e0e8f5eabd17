"""Comparisons of two backends from the paired ratios their records carry (harness.execute.workload.set_paired).

Cells of one workload are timed interleaved, so the ratio of their p50s is measured, with its 95% interval, from
blocks of rounds that ran next to each other in time: the machine's drift cancels in it, which it does not in the
ratio of two p50s taken apart. These helpers read that ratio and fall back to the p50s (said so) only for cells
that were not timed together (another run, another batch, a record from before paired timing, a partner a --resume
re-timed in another process).
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.core.pairing import timed_together
from harness.core.record import CellRecord
from harness.decide.load import p50
from harness.measure.stats import Interval, p50_interval


@dataclass(frozen=True)
class Ratio:
    """a's p50 over b's: measured interleaved (`paired`, with its interval) or from two separate p50s."""

    value: float
    ci: tuple[float, float] | None
    paired: bool

    def relation(self) -> str:
        """`faster` (a below b), `slower`, `tied` (the interval holds 1), or `unknown` (no interval)."""
        if self.ci is None:
            return "unknown"
        lo, hi = self.ci
        if hi < 1.0:
            return "faster"
        if lo > 1.0:
            return "slower"
        return "tied"

    def text(self) -> str:
        ci = f" [{self.ci[0]:.3f}-{self.ci[1]:.3f}]" if self.ci else ""
        how = "paired, interleaved" if self.paired else "separate p50s, not timed together"
        return f"{self.value:.3f}×{ci} ({how})"


def _entry(rec: CellRecord, other_id: str) -> dict | None:
    p = rec.paired or {}
    if p.get("reference") == other_id and p.get("ratio") is not None:
        return {"ratio": p["ratio"], "ratio_ci": p.get("ratio_ci")}
    return (p.get("others") or {}).get(other_id)


def ratio(a: CellRecord, b: CellRecord) -> Ratio | None:
    """a's p50 over b's: the paired ratio when they were timed together (in one interleaved timing session:
    harness.core.pairing, which the records' reader applies to a whole run), else the ratio of their p50s (no
    interval); None when either has no p50."""
    entry = _entry(a, str(b.cell_id)) if timed_together(a, b) else None
    if entry is not None and isinstance(entry.get("ratio"), int | float):
        ci = entry.get("ratio_ci")
        return Ratio(float(entry["ratio"]), (float(ci[0]), float(ci[1])) if ci else None, True)
    pa, pb = p50(a), p50(b)
    if not pa or not pb:
        return None
    return Ratio(pa / pb, None, False)


def latency_interval(rec: CellRecord) -> Interval | None:
    """The p50's 95% confidence interval: the record's `p50_ci`, else from its rounds; None with too few rounds."""
    ci = rec.latency_ms.p50_ci if rec.latency_ms else None
    if isinstance(ci, list) and len(ci) == 2:
        return Interval(float(ci[0]), float(ci[1]))
    samples = rec.samples_ms
    return p50_interval(samples) if isinstance(samples, list) else None


def e2e_ratio(a: CellRecord, b: CellRecord) -> Ratio | None:
    """a's end-to-end p50 over b's: the paired ratio from their end-to-end rounds timed interleaved (`paired_e2e`,
    harness.execute.usecase) when they were timed together, else the ratio of their end-to-end p50s (no interval);
    None when either has no end-to-end p50."""
    entry = None
    if timed_together(a, b) and isinstance(a.paired_e2e, dict):
        entry = (a.paired_e2e.get("others") or {}).get(str(b.cell_id))
    if isinstance(entry, dict) and isinstance(entry.get("ratio"), int | float):
        ci = entry.get("ratio_ci")
        return Ratio(float(entry["ratio"]), (float(ci[0]), float(ci[1])) if ci else None, True)
    pa = a.latency_e2e_ms.p50 if a.latency_e2e_ms else None
    pb = b.latency_e2e_ms.p50 if b.latency_e2e_ms else None
    if not pa or not pb:
        return None
    return Ratio(pa / pb, None, False)
