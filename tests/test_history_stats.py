"""The statistics behind the latency rule: robust spread and Mann-Whitney U."""

from __future__ import annotations

import random

import pytest

from harness.history.stats import MIN_SAMPLES, mann_whitney_u, median, robust_spread


def test_median_and_robust_spread():
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 2.0, 3.0]) == 2.5
    assert robust_spread([5.0]) == 0.0
    # One wild run does not inflate the spread, unlike the standard deviation.
    assert robust_spread([10.0, 10.1, 9.9, 10.0, 30.0]) == pytest.approx(1.4826 * 0.1)
    with pytest.raises(ValueError):
        median([])


def test_mann_whitney_separates_shifted_samples():
    rng = random.Random(0)
    base = [rng.gauss(10.0, 0.3) for _ in range(100)]
    same = [rng.gauss(10.0, 0.3) for _ in range(60)]
    slow = [rng.gauss(11.0, 0.3) for _ in range(60)]
    assert mann_whitney_u(slow, base).p < 1e-10
    assert mann_whitney_u(slow, base).z > 0
    assert mann_whitney_u(same, base).p > 0.01


def test_mann_whitney_edge_cases():
    assert mann_whitney_u([1.0] * (MIN_SAMPLES - 1), [2.0] * 10) is None
    identical = mann_whitney_u([5.0] * 10, [5.0] * 10)
    assert identical.p == 1.0 and identical.z == 0.0


@pytest.mark.parametrize("seed", range(4))
def test_mann_whitney_matches_scipy(seed):
    stats = pytest.importorskip("scipy.stats")
    rng = random.Random(seed)
    # Rounded to 0.1 ms so that ties are frequent, as with coarse timers.
    x = [round(rng.lognormvariate(0.0, 0.2) * 10, 1) for _ in range(rng.randint(5, 80))]
    y = [round(rng.lognormvariate(0.05 * seed, 0.2) * 10, 1) for _ in range(rng.randint(5, 80))]
    ours = mann_whitney_u(x, y)
    ref = stats.mannwhitneyu(x, y, alternative="two-sided", method="asymptotic", use_continuity=True)
    assert ours.u == pytest.approx(ref.statistic)
    assert ours.p == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-15)
