"""How much faster a part runs on more threads: the correction the compute figure needs where a run's thread budget
differs from the one its price was measured at.

The speed probe's compute figure (harness.measure.machine_speed: conv2d 1x128x80x80, six in a row, at the run's
threads) parallelizes almost perfectly; the parts it prices do not. Measured side by side on a 2-core AMD EPYC VM
(benchmarks/thread_scaling.py): the probe 1.95x faster at 2 threads than at 1, yolo26n 640 inference 1.73x, and the
suite's workload stages (end to end, parity, accuracy, operators) 0.89x: no faster. Priced by the probe alone, a run
at 1 thread whose prices came from 2-thread runs reads those parts 2x slower than they run (in a half-CPU quota they
took 0.6x of that estimate: docs/journal/2026-11-29-main-job-in-a-cpu-quota.md). So the compute factor is corrected
by both speedups (over 1 thread) at the two thread counts:

    factor x (probe's S(here) / probe's S(there)) x (workload's S(there) / workload's S(here))

which is 1 where the counts are equal. The speedups are carried in prices.yaml (`thread_scaling`, written by
scripts/plan_prices.py --thread-scaling FILE from the benchmark's JSON); at a thread count it did not measure, a
speedup follows Amdahl's law fitted to the largest count it did.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ThreadScaling:
    """Measured speedups over 1 thread: `probe[n]` the speed probe's, `workload[n]` the workloads' stages'."""

    probe: Mapping[int, float] = field(default_factory=dict)
    workload: Mapping[int, float] = field(default_factory=dict)

    @classmethod
    def from_doc(cls, doc: Mapping | None) -> ThreadScaling | None:
        """prices.yaml's `thread_scaling` ({"probe_speedup": {"2": 1.9}, "workload_speedup": {"2": 1.3}, ...}),
        None where absent or malformed."""
        if not isinstance(doc, Mapping):
            return None

        def table(key: str) -> dict[int, float]:
            raw = doc.get(key)
            if not isinstance(raw, Mapping):
                return {}
            return {
                int(n): float(v)
                for n, v in raw.items()
                if str(n).isdigit() and isinstance(v, int | float) and not isinstance(v, bool) and v > 0
            }

        probe, workload = table("probe_speedup"), table("workload_speedup")
        if not probe or not workload:
            return None
        return cls(probe, workload)

    def speedup(self, which: str, threads: int) -> float:
        """The `probe` or `workload` speedup at `threads` over 1: measured, else Amdahl's law fitted to the largest
        count measured (a measured speedup at or below 1, as under load, fits a serial part: 1 everywhere)."""
        table = self.probe if which == "probe" else self.workload
        if threads <= 1 or not table:
            return 1.0
        if threads in table:
            return table[threads]
        n = max(table)
        s = table[n]
        parallel = min(1.0, max(0.0, (1 - 1 / s) / (1 - 1 / n))) if n > 1 else 0.0
        return 1.0 / ((1 - parallel) + parallel / threads)

    def compute_correction(self, there: int | None, here: int | None) -> float:
        """What multiplies the compute factor of a figure measured at `there` threads, for a run at `here`: 1 where
        either count is not known or they are equal."""
        if not there or not here or there == here:
            return 1.0
        probe = self.speedup("probe", here) / self.speedup("probe", there)
        workload = self.speedup("workload", there) / self.speedup("workload", here)
        return probe * workload


def threads_of(speed: Mapping | None) -> int | None:
    """The threads a machine_speed figure was measured at (its `threads`), None where not said."""
    n = speed.get("threads") if isinstance(speed, Mapping) else None
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None
