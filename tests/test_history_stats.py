"""The statistics behind the verdicts: robust spread, the p50 interval and the small-sample rank test."""

from __future__ import annotations

import math
import random

import pytest
from scipy import stats as scipy_stats

from harness.history.stats import (
    MIN_ROUNDS,
    Interval,
    median,
    p50_interval,
    rank_test,
    robust_spread,
    smallest_p,
)


def test_median_and_robust_spread():
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 2.0, 3.0]) == 2.5
    # One value says nothing about spread: unknown, never zero.
    assert robust_spread([5.0]) is None and robust_spread([]) is None
    # One wild run does not inflate the spread, unlike the standard deviation.
    assert robust_spread([10.0, 10.1, 9.9, 10.0, 30.0]) == pytest.approx(1.4826 * 0.1)
    with pytest.raises(ValueError):
        median([])


def test_p50_interval_is_the_order_statistic_interval():
    rng = random.Random(0)
    samples = [rng.lognormvariate(0.0, 0.1) * 10 for _ in range(25)]
    ci = p50_interval(samples)
    s = sorted(samples)
    # n=25: the binomial(25, 1/2) interval is [x(8), x(18)] (1-based), coverage 95.7%.
    assert (ci.lo, ci.hi) == (s[7], s[17])
    assert ci.lo <= median(samples) <= ci.hi
    # Five rounds cannot give a 95% interval (min..max covers 93.75%): unknown, not a point.
    assert p50_interval(samples[:5]) is None
    assert p50_interval(samples[:6]) == Interval(min(samples[:6]), max(samples[:6]))
    assert p50_interval([]) is None


def test_intervals_overlap_or_not():
    assert Interval(1.0, 2.0).overlaps(Interval(1.9, 3.0))
    assert not Interval(1.0, 2.0).overlaps(Interval(2.1, 3.0))


def test_rank_test_separates_shifted_samples_and_keeps_equal_ones():
    rng = random.Random(0)
    base = [rng.gauss(10.0, 0.3) for _ in range(100)]
    same = [rng.gauss(10.0, 0.3) for _ in range(60)]
    slow = [rng.gauss(11.0, 0.3) for _ in range(60)]
    result = rank_test(slow, base)
    assert result.method == "asymptotic" and result.p < 1e-10 and result.u > 60 * 100 / 2
    assert rank_test(same, base).p > 0.01


def test_five_rounds_each_can_be_judged_exactly():
    """5 vs 5 fully separated rounds: the exact p is 2/252 < 0.01, which the normal approximation (0.012) misses."""
    fast = [10.0, 10.1, 10.2, 10.3, 10.4]
    slow = [20.0, 20.1, 20.2, 20.3, 20.4]
    result = rank_test(slow, fast)
    assert result.method == "exact" and result.p == pytest.approx(2 / 252) and result.p < 0.01
    asymptotic = scipy_stats.mannwhitneyu(slow, fast, method="asymptotic").pvalue
    assert asymptotic > 0.01  # the old test could never flag this cell
    interleaved = [10.05, 10.15, 10.25, 10.35, 10.45]
    assert rank_test(interleaved, fast).p > 0.2


def test_ties_in_few_rounds_use_a_reproducible_permutation_test():
    x = [10.0, 10.0, 10.1, 10.2, 10.2]
    y = [12.0, 12.0, 12.1, 12.1, 12.3, 12.4]
    first, again = rank_test(y, x), rank_test(y, x)
    assert first.method == "permutation" and first.p == again.p and first.p < 0.01
    assert rank_test(x, [10.1, 10.0, 10.2, 10.0, 10.1]).p > 0.2


def test_too_few_rounds_to_judge():
    assert smallest_p(4, 4) == pytest.approx(2 / 70)
    result = rank_test([20.0] * 4, [10.0, 10.1, 10.2, 10.3])  # 4 vs 4: the best possible p is 0.029
    assert not result.judged and result.p is None and "smallest p-value" in result.describe()
    short = rank_test([20.0] * (MIN_ROUNDS - 1), [10.0 + i / 10 for i in range(30)])
    assert not short.judged and f"fewer than {MIN_ROUNDS}" in short.describe()
    # with a looser alpha the same 4 vs 4 rounds can be judged
    assert rank_test([20.0, 20.1, 20.2, 20.3], [10.0, 10.1, 10.2, 10.3], alpha=0.05).p == pytest.approx(
        2 / 70
    )


def test_identical_rounds_are_no_evidence():
    result = rank_test([5.0] * 10, [5.0] * 10)
    assert result.p == 1.0 and result.judged


@pytest.mark.parametrize("seed", range(3))
def test_rank_test_matches_scipy_for_large_samples(seed):
    rng = random.Random(seed)
    x = [round(rng.lognormvariate(0.0, 0.2) * 10, 1) for _ in range(rng.randint(11, 80))]
    y = [round(rng.lognormvariate(0.05 * seed, 0.2) * 10, 1) for _ in range(rng.randint(11, 80))]
    ours = rank_test(x, y)
    ref = scipy_stats.mannwhitneyu(x, y, alternative="two-sided", method="asymptotic")
    assert ours.u == pytest.approx(ref.statistic) and math.isclose(ours.p, ref.pvalue, rel_tol=1e-12)
