"""Statistics of timed rounds, in one place: the median, robust spread, the p50's confidence interval, and the rank
test behind regression detection.

The rank test (here) and the interval (harness.measure.stats) come from scipy (a maintained implementation, exact for small samples), never from
a hand-written approximation: with the few rounds a large model gets (the runner's minimum is 5), the normal
approximation of the Mann-Whitney U statistic cannot reach p < 0.01 at all, so such cells could never be flagged.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

from harness.measure.stats import CONFIDENCE, MAD_TO_SIGMA, Interval, median, p50_interval, robust_spread

log = logging.getLogger(__name__)

# Fewer rounds than this on either side: the cell is "too few rounds to judge", whatever a test would say.
MIN_ROUNDS = 3
# Up to this many rounds on the smaller side the p-value is exact (no ties) or from a permutation test (ties);
# above it the normal approximation with tie correction is accurate.
EXACT_MAX = 10
# Resamples of the permutation test (ties in small samples); seeded, so a comparison is reproducible.
PERMUTATIONS = 9999


@dataclass(frozen=True)
class RankTest:
    """A two-sided Mann-Whitney U test of x against y, or why it could not judge.

    `p` is None when the rounds are too few: fewer than MIN_ROUNDS on a side, or so few that even the most extreme
    ordering could not reach `alpha` (`min_p`); `why` then says which.
    """

    n_x: int
    n_y: int
    method: str  # exact | permutation | asymptotic | none
    p: float | None
    u: float | None = None  # U statistic of x
    min_p: float = 0.0  # the smallest two-sided p-value these sample sizes allow
    why: str = ""

    @property
    def judged(self) -> bool:
        return self.p is not None

    def describe(self) -> str:
        if self.p is None:
            return f"too few rounds to judge (n={self.n_x} vs {self.n_y}: {self.why})"
        return f"Mann-Whitney {self.method} p={self.p:.2g} (n={self.n_x} vs {self.n_y})"


def smallest_p(n_x: int, n_y: int) -> float:
    """The smallest two-sided p-value a rank test can give for these sample sizes: both orderings at the extreme,
    2 / C(n_x + n_y, n_x) (ties only make it larger)."""
    if n_x == 0 or n_y == 0:
        return 1.0
    return min(1.0, 2.0 / math.comb(n_x + n_y, n_x))


def rank_test(x: Sequence[float], y: Sequence[float], alpha: float = 0.01) -> RankTest:
    """Two-sided Mann-Whitney U of x against y with scipy: exact without ties and a seeded permutation test with
    ties when either side has at most EXACT_MAX rounds, the tie-corrected normal approximation above that.

    Returns p=None ("too few rounds to judge") when either side has fewer than MIN_ROUNDS rounds or when the
    sample sizes cannot reach `alpha` at all (2 / C(n_x + n_y, n_x) >= alpha; 4 vs 4 rounds cannot reach 0.01).
    """
    n_x, n_y = len(x), len(y)
    floor = smallest_p(n_x, n_y)
    if min(n_x, n_y) < MIN_ROUNDS:
        return RankTest(n_x, n_y, "none", None, min_p=floor, why=f"fewer than {MIN_ROUNDS} rounds on a side")
    if floor >= alpha:
        why = f"the smallest p-value these sizes allow is {floor:.2g}, not below alpha {alpha:g}"
        return RankTest(n_x, n_y, "none", None, min_p=floor, why=why)
    import numpy as np
    from scipy import stats

    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if np.ptp(np.concatenate([xs, ys])) == 0:  # every value identical: no evidence of any difference
        return RankTest(n_x, n_y, "exact", 1.0, u=n_x * n_y / 2, min_p=floor)
    ties = len(np.unique(np.concatenate([xs, ys]))) < n_x + n_y
    method: str | stats.PermutationMethod
    if min(n_x, n_y) > EXACT_MAX:
        method, name = "asymptotic", "asymptotic"
    elif not ties:
        method, name = "exact", "exact"
    else:
        method = stats.PermutationMethod(n_resamples=PERMUTATIONS, rng=np.random.default_rng(0))
        name = "permutation"
    res = stats.mannwhitneyu(xs, ys, alternative="two-sided", method=method)
    return RankTest(n_x, n_y, name, float(res.pvalue), u=float(res.statistic), min_p=floor)


# The round statistics themselves live in harness.measure.stats (shared with the measurement); re-exported here.
__all__ = [
    "CONFIDENCE",
    "MAD_TO_SIGMA",
    "MIN_ROUNDS",
    "Interval",
    "RankTest",
    "median",
    "p50_interval",
    "rank_test",
    "robust_spread",
    "smallest_p",
]
