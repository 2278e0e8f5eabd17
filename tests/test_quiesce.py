"""The wait for idle threads between the blocks of an interleaved timing (harness.measure.quiesce)."""

from __future__ import annotations

import itertools
import random
import time

import pytest

from harness.measure.interleave import Contestant, RoundsPolicy, run_interleaved
from harness.measure.quiesce import Quiesce, wait_idle

# waits run on real sleeps: run under load by scripts/flaky_check.sh
pytestmark = pytest.mark.timing


def _spinner_cpu(seconds: float):
    """The process CPU clock of one thread spinning on a core for `seconds` of wall time from now, then idle.

    A real spinning thread's CPU time depends on the scheduler: on a loaded two-worker test run a spinner got under
    a fifth of a 5 ms slice and the wait ended after 36 ms of its 80, so the wait is checked against this clock."""
    start = time.perf_counter()
    return lambda: min(time.perf_counter() - start, seconds)


def test_waits_while_a_thread_spins_and_goes_on_once_it_stops():
    waited, capped = wait_idle(Quiesce(cap_s=1.0), cpu=_spinner_cpu(0.08))
    assert not capped
    assert waited >= 0.08, waited  # it waited out the spinner (a sleep is never shorter)


def test_an_idle_process_waits_one_slice():
    waited, capped = wait_idle(Quiesce(cap_s=1.0))
    assert not capped
    assert waited < 0.03, waited


def test_a_thread_that_never_stops_ends_at_the_cap():
    cpu = iter(range(0, 10_000))  # every slice reads one whole second of CPU: always busy
    waited, capped = wait_idle(Quiesce(cap_s=0.02, slice_s=0.005), cpu=lambda: float(next(cpu)))
    assert capped
    assert 0.02 <= waited < 0.2


def test_switched_off_it_never_waits():
    assert wait_idle(Quiesce(cap_s=0.0)) == (0.0, False)


def test_interleaving_waits_before_a_block_that_follows_another_runner_only():
    waits: list[int] = []
    calls = [Contestant(k, lambda: None, 0.1) for k in "ab"]
    res = run_interleaved(
        calls,
        RoundsPolicy(fixed_rounds=40, block_s=0.0004, min_trials=10),
        rng=random.Random(1),
        idle=lambda: (waits.append(1), (0.001, False))[1],
    )
    blocks = [k for order in res.orders for k in order]
    switches = 1 + sum(1 for x, y in itertools.pairwise(blocks) if x != y)
    assert len(waits) == switches < len(blocks)  # some trial began with the runner that ended the one before
    assert res.quiesce_s == pytest.approx(0.001 * switches)
    assert res.section("a")["quiesce"]["waited_s"] == round(0.001 * switches, 3)
