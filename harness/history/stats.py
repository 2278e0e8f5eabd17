"""Robust statistics for regression detection: median, MAD-based spread, Mann-Whitney U.

Pure Python on purpose: the tracker runs in CI jobs that install only the base dependencies.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

log = logging.getLogger(__name__)

# Scale factor that makes the MAD a consistent estimator of the standard deviation for normal data.
MAD_TO_SIGMA = 1.4826
# Below this many rounds per side the normal approximation of U is too coarse to trust.
MIN_SAMPLES = 5


def median(values: Sequence[float]) -> float:
    """Median of a non-empty sequence."""
    if not values:
        raise ValueError("median of no values")
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def robust_spread(values: Sequence[float]) -> float:
    """1.4826 x the median absolute deviation: a standard deviation estimate that ignores outliers.

    Zero for fewer than two values.
    """
    if len(values) < 2:
        return 0.0
    m = median(values)
    return MAD_TO_SIGMA * median([abs(v - m) for v in values])


@dataclass(frozen=True)
class MannWhitney:
    """Result of a two-sided Mann-Whitney U test of x against y."""

    u: float  # U statistic of x
    z: float  # standardised U, positive when x tends to be larger than y
    p: float  # two-sided p-value (normal approximation, tie and continuity corrected)
    n_x: int
    n_y: int


def _ranks(values: list[float]) -> tuple[list[float], float]:
    """Average ranks (1-based) of values, and the tie term sum(t^3 - t) over groups of ties."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    tie_term = 0.0
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        avg = (i + j) / 2 + 1
        for k in range(i, j + 1):
            ranks[order[k]] = avg
        t = j - i + 1
        tie_term += t**3 - t
        i = j + 1
    return ranks, tie_term


def mann_whitney_u(x: Sequence[float], y: Sequence[float]) -> MannWhitney | None:
    """Two-sided Mann-Whitney U test (normal approximation with tie and continuity correction).

    Returns None when either side has fewer than MIN_SAMPLES values. Matches
    `scipy.stats.mannwhitneyu(x, y, method="asymptotic", use_continuity=True)`.
    """
    n_x, n_y = len(x), len(y)
    if n_x < MIN_SAMPLES or n_y < MIN_SAMPLES:
        return None
    ranks, tie_term = _ranks([float(v) for v in x] + [float(v) for v in y])
    u = sum(ranks[:n_x]) - n_x * (n_x + 1) / 2
    n = n_x + n_y
    mu = n_x * n_y / 2
    var = n_x * n_y / 12 * ((n + 1) - tie_term / (n * (n - 1)))
    if var <= 0:  # every value identical: no evidence of any difference
        return MannWhitney(u=u, z=0.0, p=1.0, n_x=n_x, n_y=n_y)
    diff = u - mu
    # Continuity correction: move half a unit towards the mean, never past it.
    z = math.copysign(max(abs(diff) - 0.5, 0.0), diff) / math.sqrt(var)
    p = min(1.0, math.erfc(abs(z) / math.sqrt(2)))
    return MannWhitney(u=u, z=z, p=p, n_x=n_x, n_y=n_y)
