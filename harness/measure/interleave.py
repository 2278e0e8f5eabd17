"""Interleaved timing: the runners of one workload timed in alternating blocks of rounds, in a shuffled order.

The machines this harness runs on change speed by 2x within a minute, which no single cell can see, let alone
correct. Timing each cell alone, minutes from the cells it is compared with, turns that drift into differences
between backends. Here every runner of a workload is loaded together and timed in *trials*: in each trial every
runner times one block of rounds (a block lasts about `block_s`), in an order shuffled anew each trial, as in
Google Benchmark's random interleaving and the randomized multiple interleaved trials (RMIT) of cloud benchmarking.
Each block of one runner has a block of every other runner next to it in time, so the ratio of their block medians
cancels whatever the machine did in between (the idea of duet benchmarking, made sequential): the paired ratio of a
backend to the reference is the median of those per-trial ratios, with the order-statistic 95% interval over the
trials.

Rounds suffice when every runner's p50 interval is within +-`ci_target` of its p50 and every runner's paired ratio
to the reference (when one is named) has its interval within +-`ratio_target` of the ratio, after at least
`min_rounds` rounds and `min_trials` trials; a time cap (`max_time_s` per runner) ends the timing otherwise, after
`min_trials_at_cap` trials where that is fewer (a workload whose one trial takes seconds), and the record says which
rule ended it. With `fixed_rounds` each runner times exactly that many rounds. The harness owns the clock:
`perf_counter_ns` around the runner's call plus its synchronize, as in the single-cell loop. Before a block that
follows another runner's (or the drift canary's), the harness waits until the threads the last one left spinning
have gone idle (harness.measure.quiesce), so that no runner's first rounds pay for its predecessor.
"""

from __future__ import annotations

import logging
import math
import random
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from harness.measure.quiesce import Quiesce, wait_idle
from harness.measure.stats import Interval, median, p50_interval

log = logging.getLogger(__name__)


def _noop() -> None:
    return None


@dataclass(frozen=True)
class RoundsPolicy:
    """How many rounds each runner gets, and how they are blocked."""

    min_rounds: int = 10
    #: relative half-width of the p50's 95% interval at which rounds suffice
    ci_target: float = 0.02
    #: relative half-width of each paired ratio's 95% interval (to the reference) at which rounds suffice
    ratio_target: float = 0.02
    #: seconds of timed rounds per runner at most (the workload's cap is this times its runners), unless the
    #: minimum rounds take longer
    max_time_s: float = 3.0
    #: target duration of one block of rounds
    block_s: float = 0.1
    #: trials at least (a paired interval needs 6 for 95% coverage; 10 give it a useful width)
    min_trials: int = 10
    #: trials at least once the time cap is reached: a workload whose trials are slow (one round of each runner
    #: taking seconds) stops at the cap with this many, rather than running `min_trials` at any cost; None: the cap
    #: waits for `min_trials` too. Where the intervals are tight, `min_trials` still applies.
    min_trials_at_cap: int | None = None
    max_rounds: int = 10_000
    #: exactly this many rounds per runner (--rounds); None: adaptive
    fixed_rounds: int | None = None
    #: the wait for idle threads before a block that follows another runner's
    quiesce: Quiesce = field(default_factory=Quiesce)

    def block_rounds(self, estimate_ms: float) -> int:
        """Rounds in one block of a runner whose round takes about `estimate_ms`."""
        n = max(1, round(self.block_s * 1000.0 / max(estimate_ms, 1e-3)))
        if self.fixed_rounds is not None:
            n = min(n, max(1, self.fixed_rounds // self.min_trials))
        return n


@dataclass
class Contestant:
    """One loaded runner of the workload: the call one round times, its warm-up estimate, and tracker hooks run
    around each of its blocks (quantities that cover its timed rounds only, such as GPU energy)."""

    key: str
    call: Callable[[], object]
    estimate_ms: float
    resume: Callable[[], None] = _noop
    pause: Callable[[], None] = _noop


@dataclass
class Timing:
    """One runner's rounds: all of them in order, and grouped per trial (None for a trial it had left)."""

    key: str
    block_rounds: int
    samples: list[float] = field(default_factory=list)
    blocks: list[list[float] | None] = field(default_factory=list)
    error: BaseException | None = None

    @property
    def alive(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class Paired:
    """A runner's p50 relative to the reference's, from the trials both timed."""

    reference: str
    ratio: float
    ratio_ci: Interval | None
    trials: int

    def to_dict(self) -> dict:
        return {
            "reference": self.reference,
            "ratio": self.ratio,
            "ratio_ci": [self.ratio_ci.lo, self.ratio_ci.hi] if self.ratio_ci else None,
            "trials": self.trials,
        }


@dataclass
class Interleaved:
    """The outcome of timing a workload's runners interleaved."""

    timings: dict[str, Timing]
    orders: list[list[str]]
    stop: str
    elapsed_s: float
    policy: RoundsPolicy
    #: seconds spent waiting for idle threads between blocks (not timed), and the waits the cap ended
    quiesce_s: float = 0.0
    quiesce_capped: int = 0
    #: the episodes this timing was spread over (one unless `run_interleaved(previous=...)` went on with it):
    #: {trials, elapsed_s, stop} each
    episodes: list[dict] = field(default_factory=list)
    #: this timing's own id, the same through its episodes: the records of its cells carry it (`timing.session`),
    #: so a reader can tell two cells timed side by side from two a --resume timed apart (harness.core.pairing)
    session: str = field(default_factory=lambda: uuid.uuid4().hex)

    @property
    def trials(self) -> int:
        return len(self.orders)

    def paired(self, key: str, reference: str) -> Paired | None:
        """`key`'s p50 over `reference`'s (harness.measure.interleave.paired_ratio)."""
        return paired_ratio(self.timings[key], self.timings[reference])

    def section(self, key: str) -> dict:
        """The record's `timing` section for `key`: how it was timed and what ended the timing."""
        t = self.timings[key]
        return {
            "mode": "interleaved" if len(self.timings) > 1 else "solo",
            "with": sorted(k for k in self.timings if k != key),
            "trials": sum(1 for b in t.blocks if b),
            "block_rounds": t.block_rounds,
            "block_s": self.policy.block_s,
            "stop": self.stop,
            "elapsed_s": round(self.elapsed_s, 3),
            "episodes": [dict(e) for e in self.episodes],
            "session": self.session,
            "quiesce": {
                "waited_s": round(self.quiesce_s, 3),
                "capped": self.quiesce_capped,
                "cap_s": self.policy.quiesce.cap_s,
            },
        }


def episode_label(episode: tuple[int, int]) -> str:
    """ "episode k of n" for one episode of several; "" for a timing in one go."""
    k, n = episode
    return f"episode {k} of {n}" if n > 1 else ""


def paired_ratio(a: Timing, ref: Timing) -> Paired | None:
    """`a`'s p50 over `ref`'s as the median over trials of the ratio of their block medians, with the 95% interval
    of that median; None when they share fewer than 2 trials."""
    ratios = [
        median(x) / median(y) for x, y in zip(a.blocks, ref.blocks, strict=False) if x and y and median(y) > 0
    ]
    if len(ratios) < 2:
        return None
    return Paired(ref.key, median(ratios), p50_interval(ratios), len(ratios))


def _ratio_converged(t: Timing, ref: Timing, target: float) -> bool:
    if t is ref:
        return True
    p = paired_ratio(t, ref)
    return (
        p is not None and p.ratio_ci is not None and (p.ratio_ci.hi - p.ratio_ci.lo) / 2 <= target * p.ratio
    )


def _converged(t: Timing, ci_target: float) -> bool:
    if not t.samples:
        return False
    p50 = median(t.samples)
    ci = p50_interval(t.samples)
    return ci is not None and p50 > 0 and (ci.hi - ci.lo) / 2 <= ci_target * p50


def _stop_reason(
    alive: list[Timing],
    trials: int,
    elapsed_s: float,
    cap_s: float,
    p: RoundsPolicy,
    reference: Timing | None = None,
) -> str | None:
    """Why the timing ends after this trial, or None to go on."""
    if not alive:
        return "every runner failed"
    counts = [len(t.samples) for t in alive]
    if p.fixed_rounds is not None:
        return f"--rounds {p.fixed_rounds} reached" if min(counts) >= p.fixed_rounds else None
    if max(counts) >= p.max_rounds:
        return f"{p.max_rounds} rounds reached"
    floor_at_cap = p.min_trials if p.min_trials_at_cap is None else min(p.min_trials, p.min_trials_at_cap)
    if min(counts) < p.min_rounds or trials < floor_at_cap:
        return None
    if trials < p.min_trials:  # only the time cap may end it now, at its own floor
        if elapsed_s >= cap_s:
            return (
                f"time cap reached ({cap_s:.1f} s: {p.max_time_s:g} s x {len(alive)} runners) at {trials} trials, "
                f"the fewest the cap takes (a slow workload: {p.min_trials} would take longer)"
            )
        return None
    paired = reference is not None and reference.alive and len(alive) > 1
    if all(_converged(t, p.ci_target) for t in alive) and (
        not paired or all(_ratio_converged(t, reference, p.ratio_target) for t in alive)
    ):
        if paired:
            return (
                f"every p50 interval within +-{p.ci_target:.0%} and every paired ratio's within "
                f"+-{p.ratio_target:.0%}"
            )
        return f"every p50 interval within +-{p.ci_target:.0%}"
    if elapsed_s >= cap_s:
        return f"time cap reached ({cap_s:.1f} s: {p.max_time_s:g} s x {len(alive)} runners)"
    return None


def _block(c: Contestant, t: Timing, n: int, clock: Callable[[], int]) -> list[float]:
    """`n` timed rounds of one runner; raises what its call raises."""
    out: list[float] = []
    c.resume()
    try:
        for _ in range(n):
            t0 = clock()
            c.call()
            out.append((clock() - t0) / 1e6)
    finally:
        c.pause()
    return out


def run_interleaved(
    contestants: Sequence[Contestant],
    policy: RoundsPolicy | None = None,
    rng: random.Random | None = None,
    clock: Callable[[], int] = time.perf_counter_ns,
    on_trial: Callable[[int], None] | None = None,
    idle: Callable[[], tuple[float, bool]] | None = None,
    reference: str | None = None,
    previous: Interleaved | None = None,
    episode: tuple[int, int] = (1, 1),
) -> Interleaved:
    """Time `contestants` in shuffled alternating blocks until the policy's rounds suffice (or its cap).

    A runner whose call raises leaves the timing with its error (its rounds so far are kept); the others go on.
    `clock` times the rounds and the time cap (nanoseconds; tests pass a fake one whose calls advance it, so their
    figures do not depend on the machine's load). `rng` shuffles the order of each trial (seeded by default, so a
    run is reproducible); `on_trial` is called
    after each trial (the drift canary's hook in tests); `idle` waits for idle threads before a block that follows
    another runner's (default: the policy's quiesce); `reference`: the key whose paired ratios must also be
    narrow before the rounds suffice (None: the p50 intervals alone decide).

    Episodes: the timing of a workload can be spread over the run, so that its trials sample machine states
    minutes apart (a shared machine's contention slows runtimes unevenly, and a ratio measured within a few
    seconds carries that moment's mix). `episode=(k, n)` with the timing of episodes 1..k-1 as `previous` goes on
    with it: the minimum rounds and trials and the time cap are those of k/n of the policy, and the episode times
    at least its share (1/n) of the minimum trials; the rules are judged on every round so far.
    """
    p = policy or RoundsPolicy()
    rng = rng or random.Random(0)
    k, n_episodes = episode
    if not 1 <= k <= n_episodes:
        raise ValueError(f"episode {k} of {n_episodes}")
    if previous is None:
        timings = {c.key: Timing(c.key, p.block_rounds(c.estimate_ms)) for c in contestants}
        orders: list[list[str]] = []
        spent, waited, capped, episodes = 0.0, 0.0, 0, []
    else:
        timings, orders = previous.timings, previous.orders
        spent, waited, capped = previous.elapsed_s, previous.quiesce_s, previous.quiesce_capped
        episodes = previous.episodes
    share = k / n_episodes
    judged = replace(
        p,
        min_rounds=math.ceil(p.min_rounds * share),
        min_trials=math.ceil(p.min_trials * share),
        min_trials_at_cap=None if p.min_trials_at_cap is None else math.ceil(p.min_trials_at_cap * share),
        max_time_s=p.max_time_s * share,
    )
    own_trials = math.ceil(
        (p.min_trials if p.min_trials_at_cap is None else min(p.min_trials, p.min_trials_at_cap)) / n_episodes
    )
    by_key = {c.key: c for c in contestants}
    cap_s = judged.max_time_s * max(1, len(contestants))
    idle = idle or (lambda: wait_idle(p.quiesce))
    first_trial = len(orders)
    t0 = clock() - round(spent * 1e9)  # the time cap is read on the same clock as the rounds

    def elapsed_s() -> float:
        return (clock() - t0) / 1e9

    stop = None
    previous_key: str | None = None
    while stop is None:
        order = [c.key for c in contestants if timings[c.key].alive]
        rng.shuffle(order)
        orders.append(order)
        for t in timings.values():
            t.blocks.append(None)
        for key in order:
            t = timings[key]
            n = t.block_rounds
            if p.fixed_rounds is not None:
                n = min(n, p.fixed_rounds - len(t.samples))
                if n <= 0:
                    continue
            if key != previous_key:
                w, hit_cap = idle()
                waited, capped = waited + w, capped + hit_cap
            previous_key = key
            try:
                block = _block(by_key[key], t, n, clock)
            except Exception as e:  # one runner failing must not end the others' timing
                log.warning("runner %s failed during interleaved timing: %s", key, e)
                t.error = e
                continue
            t.samples.extend(block)
            t.blocks[-1] = block
        if on_trial is not None:
            on_trial(len(orders))
        alive = [t for t in timings.values() if t.alive]
        ref = timings.get(reference) if reference is not None else None
        stop = _stop_reason(alive, len(orders), elapsed_s(), cap_s, judged, ref)
        if stop is not None and len(orders) - first_trial < own_trials and alive:
            stop = None  # every episode times its share of the trials
    if n_episodes > 1:
        stop = f"{episode_label(episode)}: {stop}"
    elapsed = elapsed_s()
    episodes = [
        *episodes,
        {"trials": len(orders) - first_trial, "elapsed_s": round(elapsed - spent, 3), "stop": stop},
    ]
    session = {"session": previous.session} if previous is not None else {}  # episodes go on with one timing
    return Interleaved(timings, orders, stop, elapsed, p, waited, capped, episodes, **session)


def sequential(
    contestants: Sequence[Contestant], rounds: int, clock: Callable[[], int] = time.perf_counter_ns
) -> dict[str, list[float]]:
    """Each runner's rounds one runner after the other (the old way): kept to show, in tests and benchmarks, what
    interleaving cancels."""
    out = {}
    for c in contestants:
        t = Timing(c.key, rounds)
        out[c.key] = _block(c, t, rounds, clock)
    return out
