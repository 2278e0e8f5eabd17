"""Statistics of timed rounds shared by the measurement, the report and the history: the median, a robust spread,
the p50's distribution-free confidence interval (scipy's order-statistic interval, exact for few rounds), and the
record's Latency section built from them.

No heavy imports at module level: scipy is imported inside the function that needs it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from harness.core.record import PERCENTILE_MIN_ROUNDS, UNSTABLE_SCATTER, Latency

# Scale factor that makes the MAD a consistent estimator of the standard deviation for normal data.
MAD_TO_SIGMA = 1.4826
# The p50 interval's coverage.
CONFIDENCE = 0.95


def median(values: Sequence[float]) -> float:
    """Median of a non-empty sequence."""
    if not values:
        raise ValueError("median of no values")
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def robust_spread(values: Sequence[float]) -> float | None:
    """1.4826 x the median absolute deviation: a standard deviation estimate that ignores outliers.

    None (unknown) for fewer than two values: one value says nothing about spread, and zero would claim it does.
    """
    if len(values) < 2:
        return None
    m = median(values)
    return MAD_TO_SIGMA * median([abs(v - m) for v in values])


@dataclass(frozen=True)
class Interval:
    """A confidence interval of a p50, in the samples' unit."""

    lo: float
    hi: float
    level: float = CONFIDENCE

    def overlaps(self, other: Interval) -> bool:
        return self.lo <= other.hi and other.lo <= self.hi


def p50_interval(samples: Sequence[float], level: float = CONFIDENCE) -> Interval | None:
    """The distribution-free confidence interval of the median of `samples` (order statistics, binomial coverage:
    `scipy.stats.quantile_test(...).confidence_interval`).

    None when the rounds are too few for the level (fewer than 6 rounds for 95%): the interval is unknown, not
    zero-width.
    """
    bounds = _order_interval(samples, 0.5, level)
    if bounds is None or not (math.isfinite(bounds[0]) and math.isfinite(bounds[1])):
        return None
    return Interval(bounds[0], bounds[1], level)


def _order_interval(samples: Sequence[float], p: float, level: float) -> tuple[float, float] | None:
    """(low, high) of the order-statistic confidence interval of the `p` quantile of the finite `samples`
    (`scipy.stats.quantile_test(...).confidence_interval`; an end the samples cannot bound is not finite); None
    below 2 samples."""
    import numpy as np
    from scipy import stats

    values = [float(v) for v in samples if isinstance(v, int | float) and math.isfinite(v)]
    if len(values) < 2:
        return None
    ci = stats.quantile_test(values, q=float(np.percentile(values, 100 * p)), p=p).confidence_interval(level)
    return float(ci.low), float(ci.high)


def quantile_interval(
    samples: Sequence[float], p: float, level: float = CONFIDENCE
) -> tuple[float, float | None] | None:
    """The distribution-free confidence interval of the `p` quantile of `samples` (order statistics, binomial
    coverage, as `p50_interval`): (lo, hi), hi None where the samples are too few to bound it from above (a p99 of
    100 samples has no sample beyond its upper bound); None when not even the lower end is known."""
    bounds = _order_interval(samples, p, level)
    if bounds is None or not math.isfinite(bounds[0]):
        return None
    lo, hi = bounds
    return lo, hi if math.isfinite(hi) else None


def latency_from_samples(samples_ms: list[float], timing_scope: str) -> Latency:
    """The record's Latency section of the timed rounds `samples_ms` (ms): percentiles where the rounds are enough
    for them (PERCENTILE_MIN_ROUNDS), the p50's 95% interval, and the rounds' robust scatter."""
    import numpy as np

    if not samples_ms:
        raise ValueError("no samples")
    s = np.asarray(samples_ms, dtype=float)
    n = len(s)

    def pct(name: str, q: float) -> float | None:
        return float(np.percentile(s, q)) if n >= PERCENTILE_MIN_ROUNDS[name] else None

    p50 = float(np.median(s))
    ci = p50_interval(samples_ms)
    spread = robust_spread(samples_ms)
    scatter = spread / p50 if spread is not None and p50 > 0 else None
    return Latency(
        p50=p50,
        p90=pct("p90", 90),
        p99=pct("p99", 99),
        mean=float(s.mean()),
        min=float(s.min()),
        max=float(s.max()),
        stdev=statistics.stdev(samples_ms) if n > 1 else 0.0,
        rounds=n,
        timing_scope=timing_scope,
        p50_ci=[ci.lo, ci.hi] if ci is not None else None,
        scatter=scatter,
        unstable=scatter is not None and scatter > UNSTABLE_SCATTER,
    )
