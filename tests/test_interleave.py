"""Interleaved timing (harness.measure.interleave) on injected runners whose speed is known. Their calls advance a
fake clock instead of sleeping, and the timing reads that clock (rounds and time cap alike): the figures are exact on
any machine, however loaded (a real sleep on a busy 2-core machine overshoots by milliseconds)."""

from __future__ import annotations

import random

import pytest

from harness.measure.interleave import Contestant, RoundsPolicy, run_interleaved, sequential
from harness.measure.stats import latency_from_samples, median
from tests.fake_clock import FakeClock


class Drift:
    """The machine's speed on `clock`: 1.0 at the start, growing linearly to `end` over `span_s`, then flat."""

    def __init__(self, clock: FakeClock, end: float, span_s: float) -> None:
        self.clock, self.t0 = clock, clock()
        self.end, self.span_s = end, span_s

    def factor(self) -> float:
        frac = min(1.0, (self.clock() - self.t0) / 1e9 / self.span_s)
        return 1.0 + (self.end - 1.0) * frac


def sleeper(clock: FakeClock, base_ms: float, drift: Drift | None = None, jitter: float = 0.0, seed: int = 0):
    """A runner whose call takes `base_ms` on `clock` (x the drift, x 1 +- a seeded jitter)."""
    rng = random.Random(seed)

    def call() -> None:
        f = drift.factor() if drift else 1.0
        clock.advance(base_ms * f * (1.0 + rng.uniform(-jitter, jitter)))

    return call


def test_drift_interleaved_ratio_stays_right_while_sequential_p50s_do_not():
    # A (2 ms) and B (3 ms) on a machine that slows down 2x over the test: the true ratio B/A is 1.5 throughout.
    policy = RoundsPolicy(fixed_rounds=60, block_s=0.012, min_trials=10)
    clock = FakeClock()
    drift = Drift(clock, end=2.0, span_s=0.3)
    seq = sequential(
        [Contestant("a", sleeper(clock, 2.0, drift), 2.0), Contestant("b", sleeper(clock, 3.0, drift), 3.0)],
        60,
        clock=clock,
    )
    seq_ratio = median(seq["b"]) / median(seq["a"])
    clock = FakeClock()
    drift = Drift(clock, end=2.0, span_s=0.3)
    res = run_interleaved(
        [Contestant("a", sleeper(clock, 2.0, drift), 2.0), Contestant("b", sleeper(clock, 3.0, drift), 3.0)],
        policy,
        clock=clock,
    )
    paired = res.paired("b", "a")
    assert paired is not None and paired.reference == "a"
    assert paired.ratio == pytest.approx(1.5, rel=0.05)
    assert paired.ratio_ci.lo <= paired.ratio <= paired.ratio_ci.hi
    # timed one after the other, B ran on the slower half of the drift: its p50 ratio is far off
    assert abs(seq_ratio - 1.5) / 1.5 > 0.2, seq_ratio
    assert len(res.timings["a"].samples) == len(res.timings["b"].samples) == 60
    assert res.stop == "--rounds 60 reached"


def test_each_trial_shuffles_the_order_and_gives_every_runner_one_block():
    clock = FakeClock()
    calls = [Contestant(k, sleeper(clock, 0.5), 0.5) for k in "abc"]
    res = run_interleaved(
        calls, RoundsPolicy(fixed_rounds=20, block_s=0.001), rng=random.Random(3), clock=clock
    )
    assert all(sorted(o) == ["a", "b", "c"] for o in res.orders)
    assert len({tuple(o) for o in res.orders}) > 1  # not one fixed order
    assert all(len(t.samples) == 20 for t in res.timings.values())


def test_rounds_stop_when_the_p50_interval_is_within_2_percent():
    steady = RoundsPolicy(block_s=0.01, max_time_s=10.0)
    clock = FakeClock()
    res = run_interleaved([Contestant("a", sleeper(clock, 1.0, jitter=0.005), 1.0)], steady, clock=clock)
    assert res.stop == "every p50 interval within +-2%"
    lat = latency_from_samples(res.timings["a"].samples, "model")
    assert (lat.p50_ci[1] - lat.p50_ci[0]) / 2 <= 0.02 * lat.p50
    assert res.elapsed_s < 5.0


def test_a_noisy_runner_stops_at_the_time_cap_but_never_below_the_minimum_rounds():
    noisy = RoundsPolicy(block_s=0.005, max_time_s=0.3, min_trials=3)
    clock = FakeClock()
    res = run_interleaved([Contestant("a", sleeper(clock, 1.0, jitter=0.9, seed=1), 1.0)], noisy, clock=clock)
    assert res.stop.startswith("time cap reached")
    tiny_cap = RoundsPolicy(block_s=0.001, max_time_s=0.0001, min_trials=1)
    res = run_interleaved([Contestant("slow", sleeper(clock, 5.0, jitter=0.9), 5.0)], tiny_cap, clock=clock)
    assert len(res.timings["slow"].samples) == 10  # at least 10 rounds always


def test_scattering_runner_is_flagged_unstable_and_a_steady_one_is_not():
    rng = random.Random(0)
    scattered = [rng.choice((2.0, 2.5, 3.0, 4.0)) for _ in range(40)]
    steady = [2.0 + rng.uniform(-0.02, 0.02) for _ in range(40)]
    assert latency_from_samples(scattered, "model").unstable is True
    lat = latency_from_samples(steady, "model")
    assert lat.unstable is False and lat.scatter < 0.02


@pytest.mark.parametrize(
    ("rounds", "p90", "p99"), [(10, False, False), (19, False, False), (20, True, False), (100, True, True)]
)
def test_p90_and_p99_are_null_with_a_reason_below_their_rounds(rounds, p90, p99):
    lat = latency_from_samples([float(i + 1) for i in range(rounds)], "model")
    reasons = lat.null_reasons()
    assert (lat.p90 is not None) is p90 and (lat.p99 is not None) is p99
    if not p90:
        assert (
            reasons["p90"] == f"too few timed rounds for this percentile: needs at least 20, {rounds} timed"
        )
    if not p99:
        assert "needs at least 100" in reasons["p99"]
    else:
        assert "p99" not in reasons and lat.p99 < lat.max  # 100 rounds: p99 is no longer the maximum
    assert lat.rounds == rounds and lat.p50_ci[0] <= lat.p50 <= lat.p50_ci[1]


def test_a_runner_that_fails_leaves_and_the_others_go_on():
    n = [0]

    def breaks() -> None:
        n[0] += 1
        if n[0] > 3:
            raise RuntimeError("device lost")

    clock = FakeClock()
    res = run_interleaved(
        [Contestant("ok", sleeper(clock, 0.5), 0.5), Contestant("bad", breaks, 0.5)],
        RoundsPolicy(fixed_rounds=30, block_s=0.002),
        clock=clock,
    )
    assert isinstance(res.timings["bad"].error, RuntimeError)
    assert len(res.timings["ok"].samples) == 30


def test_block_hooks_bracket_every_block():
    events = []
    clock = FakeClock()
    c = Contestant(
        "a",
        sleeper(clock, 0.2),
        0.2,
        resume=lambda: events.append("resume"),
        pause=lambda: events.append("pause"),
    )
    res = run_interleaved([c], RoundsPolicy(fixed_rounds=12, block_s=0.0005), clock=clock)
    blocks = sum(1 for b in res.timings["a"].blocks if b)
    assert events == ["resume", "pause"] * blocks


def test_rounds_suffice_only_when_the_paired_ratios_are_narrow_too():
    # the same two runners and p50 rule; only the paired ratio's bound differs, and the verdict with it
    clock = FakeClock()

    def calls():
        return [
            Contestant("a", sleeper(clock, 1.0, jitter=0.3, seed=1), 1.0),
            Contestant("b", sleeper(clock, 1.5, jitter=0.3, seed=2), 1.5),
        ]

    loose = RoundsPolicy(block_s=0.005, max_time_s=0.6, ci_target=0.5, ratio_target=0.5)
    res = run_interleaved(calls(), loose, reference="a", clock=clock)
    assert res.stop == "every p50 interval within +-50% and every paired ratio's within +-50%"
    tight = RoundsPolicy(block_s=0.005, max_time_s=0.6, ci_target=0.5, ratio_target=0.0001)
    res = run_interleaved(calls(), tight, reference="a", clock=clock)
    assert res.stop.startswith("time cap reached")
    paired = res.paired("b", "a")
    assert (paired.ratio_ci.hi - paired.ratio_ci.lo) / 2 > 0.0001 * paired.ratio


def test_episodes_go_on_with_one_timing_and_each_times_its_share():
    # three episodes of one workload, with a pause between them: the rounds accumulate, every episode times at
    # least a third of the minimum trials, and the caps of episodes 1 and 2 are a third and two thirds of the cap
    policy = RoundsPolicy(block_s=0.005, max_time_s=0.15, min_trials=9, ci_target=1e-6)  # never converges
    clock = FakeClock()
    calls = [  # with a jitter: constant calls would give zero-width intervals, which converge at once
        Contestant("a", sleeper(clock, 1.0, jitter=0.2, seed=1), 1.0),
        Contestant("b", sleeper(clock, 2.0, jitter=0.2, seed=2), 2.0),
    ]
    res = None
    sessions = set()
    for k in (1, 2, 3):
        res = run_interleaved(calls, policy, reference="a", previous=res, episode=(k, 3), clock=clock)
        assert res.stop.startswith(f"episode {k} of 3: ")
        sessions.add(res.session)
        clock.advance(50)  # other workloads' episodes in between: not this timing's time
    # one timing through its episodes: its cells' records name one session (harness.core.pairing); another
    # timing of the same runners (a --resume's) is another
    assert len(sessions) == 1 and res.section("a")["session"] == res.section("b")["session"] == res.session
    assert run_interleaved(calls, policy, clock=clock).session not in sessions
    assert [e["trials"] >= 3 for e in res.episodes] == [True, True, True]
    assert res.trials == sum(e["trials"] for e in res.episodes) >= 9
    assert len(res.timings["a"].samples) >= 10 and "(0.1 s: 0.05 s x 2 runners)" in res.episodes[0]["stop"]
    assert "(0.2 s: 0.1 s x 2 runners)" in res.episodes[1]["stop"] and res.elapsed_s >= 0.3
    assert res.section("b")["episodes"] == res.episodes
    assert res.paired("b", "a").ratio == pytest.approx(2.0, rel=0.1)
    with pytest.raises(ValueError):
        run_interleaved(calls, policy, episode=(4, 3))


def test_episodes_sample_the_machine_states_between_them():
    # b slows more than a when the machine is busy (uneven contention: the ratio itself depends on the moment).
    # Timed in one go while the machine is quiet, every trial sees the quiet ratio; spread over an episode before
    # and one after the machine gets busy, the trials see both states.
    busy = {"on": False}
    clock = FakeClock()

    def b_call() -> None:
        clock.advance(2.0 * (1.6 if busy["on"] else 1.0))

    def trial_ratios(res) -> list[float]:
        a, b = res.timings["a"].blocks, res.timings["b"].blocks
        return [median(y) / median(x) for x, y in zip(a, b, strict=True) if x and y]

    calls = [Contestant("a", sleeper(clock, 1.0), 1.0), Contestant("b", b_call, 2.0)]
    policy = RoundsPolicy(block_s=0.006, max_time_s=0.2, min_trials=6)
    one_go = trial_ratios(run_interleaved(calls, policy, reference="a", clock=clock))
    res = None
    for k in (1, 2):
        busy["on"] = k == 2
        res = run_interleaved(calls, policy, reference="a", previous=res, episode=(k, 2), clock=clock)
    spread = trial_ratios(res)
    assert max(one_go) < 2.6, one_go  # quiet only (2.0; busy would be 3.2)
    assert min(spread) < 2.6 < max(spread), spread  # both states
    first = res.episodes[0]["trials"]
    assert median(spread[:first]) < 2.6 < median(spread[first:])


def _slow_workload(clock: FakeClock, base_ms: float = 400.0) -> list[Contestant]:
    """Two runners whose one round takes `base_ms` (one round a block: a trial costs 2 x base_ms), jittered so
    their intervals never get narrow."""
    return [
        Contestant("a", sleeper(clock, base_ms, jitter=0.3, seed=1), base_ms),
        Contestant("b", sleeper(clock, base_ms * 1.5, jitter=0.3, seed=2), base_ms * 1.5),
    ]


def test_a_slow_workload_stops_at_the_cap_with_the_cap_floor_not_min_trials():
    # a trial costs 1 s; the cap is 2 s (1 s x 2 runners): 20 trials would take 20 s, the cap's floor 8 takes 8
    policy = RoundsPolicy(block_s=0.1, max_time_s=1.0, min_rounds=8, min_trials=20, min_trials_at_cap=8)
    clock = FakeClock()
    res = run_interleaved(_slow_workload(clock), policy, reference="a", clock=clock)
    assert res.trials == 8 and "at 8 trials, the fewest the cap takes" in res.stop
    # without the cap's floor the same workload runs the 20 trials, whatever the cap
    clock = FakeClock()
    old = RoundsPolicy(block_s=0.1, max_time_s=1.0, min_rounds=8, min_trials=20)
    res = run_interleaved(_slow_workload(clock), old, reference="a", clock=clock)
    assert res.trials == 20 and res.stop.startswith("time cap reached") and "fewest" not in res.stop


def test_below_min_trials_only_the_cap_ends_it_tight_intervals_do_not():
    # constant calls: the intervals are tight at once; below min_trials they do not end the timing, and the cap
    # (far away here) is not reached: all 12 trials run
    clock = FakeClock()
    steady = [Contestant("a", sleeper(clock, 1.0), 1.0), Contestant("b", sleeper(clock, 2.0), 2.0)]
    policy = RoundsPolicy(block_s=0.002, max_time_s=60.0, min_rounds=4, min_trials=12, min_trials_at_cap=4)
    res = run_interleaved(steady, policy, reference="a", clock=clock)
    assert res.trials == 12 and res.stop.startswith("every p50 interval within")


def test_the_cap_floor_is_shared_over_episodes():
    # three episodes: each ends at its share of the cap once it has its share of the cap's floor
    policy = RoundsPolicy(block_s=0.1, max_time_s=1.5, min_rounds=9, min_trials=21, min_trials_at_cap=9)
    clock = FakeClock()
    calls, res = _slow_workload(clock), None
    for k in (1, 2, 3):
        res = run_interleaved(calls, policy, reference="a", previous=res, episode=(k, 3), clock=clock)
    assert [e["trials"] for e in res.episodes] == [3, 3, 3]
    assert res.trials == 9 < 21 and "the fewest the cap takes" in res.stop
