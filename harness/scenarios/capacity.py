"""How many cameras one loaded runner serves at a frame rate, and how to deploy them: the largest N whose LoadGen
MultiStream run (a query is N samples, one per camera, issued at once) keeps the per-query latency at the
durations' percentile (p90 under the short durations, p99 under MLPerf's) within the frame time, VALID, over every
way of serving N cameras the runner declares (harness.backends.base.Runner.mechanisms): one worker taking the
frames in turn; one stream per camera on the loaded model; the thread budget split between runtime instances or
streams (ONNX Runtime sessions, OpenVINO throughput streams, ExecuTorch method instances); one batched call of the N
frames where the model takes batch N. The answer is the best, naming the mechanism and what it deploys.

The search (`search`), bounded in LoadGen runs and in seconds:

1. Screen: N = 1, 2, 4, ... and at each N every mechanism still passing runs once (a configuration two mechanisms
   share, as one worker at N = 1, runs once for both); a mechanism that fails drops out; the doubling stops when
   none passes (or at MOST_CAMERAS, or when SCREEN_BUDGET_S is spent).
2. Bisect: only the best BISECT_WAYS mechanisms (those passing at the largest N, the lower percentile there first)
   by integer bisection between their last passing and first failing N, until one apart.
3. Settle the bound (`settle`): the best mechanism's runs at its last passing and first failing N are judged on
   evidence, not on the point estimate: a run passes when LoadGen's early-stopping bound of the percentile (the
   value it guarantees at 99% confidence) is within the frame time, fails when the percentile's lower bound (the
   1% lower order statistic of LoadGen's own query latencies) is over it, and is undecided otherwise. An undecided
   run is repeated with longer durations (x2, then x4 the queries and the minimum duration) while BOUND_BUDGET_S
   lasts; a bound that moves (the last passing N fails on evidence, or the first failing passes) moves the pair.
   What stays undecided is said: "N cameras, possibly N+1: undecided at this duration" (`possibly`).

The result keeps every run (its mechanism, N, durations, the percentile with its interval, the verdict, the
seconds), every mechanism's own answer (or why it does not apply), and the search's cost in seconds. When even one
camera fails, the value is null with the one-camera figure as the nearest miss: never "0 cameras" as an answer.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from harness.backends.base import BATCHED, MECHANISM_ORDER, SERIAL, STREAMS, Plan
from harness.scenarios.loadgen import check
from harness.scenarios.results import Target, multi_stream
from harness.scenarios.settings import Durations

log = logging.getLogger(__name__)

__all__ = ["BATCHED", "SERIAL", "STREAMS"]

#: the most cameras a search tries, and the most LoadGen runs the screen and the bisection spend together
MOST_CAMERAS = 256
STEPS = 24
#: mechanisms bisected after the screen: the best, and the next where its percentile at the same count is within
#: BISECT_WITHIN of the best's (else it cannot be told to serve more from what the screen saw)
BISECT_WAYS = 2
BISECT_WITHIN = 1.25
#: a screening or bisection run is cut at this many frame times per query (LoadGen's max_duration_ms, at least
#: twice its minimum duration): a run that slow fails anyway, and its lower bound says so in fewer queries
CUT_AT_FRAMES = 1.5
#: seconds the screen and the bisection may spend (a run under way finishes); then the bound's repeats
SCREEN_BUDGET_S = 35.0
BOUND_BUDGET_S = 12.0
#: the bound's repeats: each doubles the queries and the minimum duration of the run before, up to this many times
MAX_LEVEL = 2
#: a run's verdict on evidence
PASS, FAIL, OPEN = "pass", "fail", "undecided"
#: the search's phases, each with its own budget
PHASES = ("screen", "bisect", "bound")


@dataclass(frozen=True)
class Trial:
    """One run at `cameras`: `ok` whether its percentile (the point estimate) is within the frame time with a VALID
    verdict, which the search steps on; `verdict` whether its interval decides it (PASS, FAIL, OPEN); `level` its
    durations (0: the run's own, k: 2^k times the queries and minimum duration); `seconds` what it cost."""

    cameras: int
    ok: bool
    entry: dict
    verdict: str = OPEN
    level: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class Way:
    """One mechanism as the search runs it: `at(n, level)` one LoadGen run at n cameras at durations `level`;
    `plan(n)` what it deploys at n cameras (without loading anything); `why_not` when it does not apply (then
    `at` is None)."""

    key: str
    words: str
    at: Callable[[int, int], Trial] | None
    plan: Callable[[int], Plan] | None
    why_not: str | None = None

    @property
    def rank(self) -> int:
        """Simplest first: the order that breaks a tie (one worker before concurrency, before batching)."""
        return MECHANISM_ORDER.index(self.key) if self.key in MECHANISM_ORDER else len(MECHANISM_ORDER)


def _at_percentile(result: dict) -> tuple[str, object, bool, list | None]:
    """A MultiStream result's percentile key ("p90"), its value there, whether LoadGen called it VALID, and the
    percentile's interval (a list, or None)."""
    key = f"p{100 * float(result.get('percentile') or 0.99):g}"
    iv = result.get(f"{key}_interval")
    return (
        key,
        result.get(key),
        result.get("valid") is True,
        list(iv) if isinstance(iv, list | tuple) else None,
    )


def judge(result: dict, frame_ms: float) -> tuple[bool, str]:
    """(ok, verdict) of a MultiStream result at its own percentile: ok when the percentile is within the frame time
    and LoadGen called the run VALID; PASS when LoadGen's early-stopping bound of it is within the frame time (and
    VALID), FAIL when its lower bound is over the frame time, else OPEN."""
    key, at, valid, iv = _at_percentile(result)
    ok = valid and isinstance(at, int | float) and at <= frame_ms
    upper = result.get(f"{key}_guaranteed")
    lower = iv[0] if iv and isinstance(iv[0], int | float) else None
    if valid and isinstance(upper, int | float) and upper <= frame_ms:
        return ok, PASS
    if lower is not None and lower > frame_ms:
        return ok, FAIL
    return ok, OPEN


def trial_of(
    result: dict, cameras: int, frame_ms: float, mechanism: str, level: int = 0, seconds: float = 0.0
) -> Trial:
    """A MultiStream result judged against the frame time at its own percentile, with LoadGen's verdict."""
    key, at, valid, iv = _at_percentile(result)
    ok, verdict = judge(result, frame_ms)
    entry = {
        "cameras": cameras,
        "mechanism": mechanism,
        "how": result.get("mechanism"),  # the runtime's way of running them (the multi-stream result's)
        "ok": ok,
        "verdict": verdict,
        "valid": valid,
        "percentile": result.get("percentile"),
        "target_ms": at,
        "interval": iv,
        "p99_ms": result.get("p99"),
        "queries": result.get("queries"),
        "durations": (result.get("loadgen") or {}).get("durations"),
        "level": level,
        "seconds": round(seconds, 3),
        "loadgen": result.get("loadgen"),
    }
    if not ok:
        entry["reason"] = (
            result.get("reason") or "LoadGen called the run INVALID"
            if not valid
            else f"{key} {at if at is not None else 'not recorded'} ms over the {frame_ms:.4g} ms frame time"
        )
    return Trial(cameras, ok, entry, verdict, level, seconds)


@dataclass
class _Book:
    """The search's runs and its spending."""

    ways: list[Way]
    most: int
    steps: int
    clock: Callable[[], float]
    runs: dict[tuple[str, int], list[Trial]] = field(default_factory=dict)
    order: list[Trial] = field(default_factory=list)  # every run, in the order run (shared runs once)
    stopped: str | None = None  # why the screen or the bisection stopped short, if it did

    @property
    def spent(self) -> dict[str, float]:
        """Seconds of the runs made, per phase."""
        return {p: sum(t.seconds for t in self.order if t.entry["phase"] == p) for p in PHASES}

    @property
    def count(self) -> dict[str, int]:
        """The runs made, per phase."""
        return {p: sum(1 for t in self.order if t.entry["phase"] == p) for p in PHASES}

    def latest(self, way: Way, n: int) -> Trial | None:
        got = self.runs.get((way.key, n))
        return got[-1] if got else None

    def run(self, way: Way, n: int, level: int, phase: str, shared: dict | None = None) -> Trial:
        """One run of `way` at n cameras (or the same configuration's run at this n, `shared`: plan -> trial)."""
        assert way.at is not None
        same = way.plan(n).same() if way.plan is not None and shared is not None else None
        if same is not None and shared is not None and same in shared:
            first = shared[same]
            entry = {**first.entry, "mechanism": way.key, "same_run_as": first.entry["mechanism"]}
            trial = replace(first, entry=entry)
        else:
            check()  # no run starts once the run was told to stop
            t0 = self.clock()
            trial = way.at(n, level)
            took = self.clock() - t0
            trial = replace(trial, seconds=took, level=level, entry={**trial.entry, "seconds": round(took, 3),
                                                                       "level": level, "phase": phase})  # fmt: skip
            self.order.append(trial)
            if same is not None and shared is not None:
                shared[same] = trial
        self.runs.setdefault((way.key, n), []).append(trial)
        return trial

    def searched(self) -> int:
        return self.count["screen"] + self.count["bisect"]


def _screen(book: _Book, ways: list[Way], budget_s: float) -> dict[str, list[int | None]]:
    """Doubling over every way still passing; returns key -> [last passing N, first failing N]."""
    bounds: dict[str, list[int | None]] = {w.key: [None, None] for w in ways}
    alive = list(ways)
    n = 1
    while alive:
        shared: dict = {}
        passed = []
        for w in alive:
            if book.searched() >= book.steps or book.spent["screen"] >= budget_s:
                book.stopped = (
                    f"the screen stopped at {n} cameras: its {budget_s:g} s or {book.steps} runs were spent"
                )
                return bounds
            trial = book.run(w, n, 0, "screen", shared)
            if trial.ok:
                bounds[w.key][0] = n
                passed.append(w)
            else:
                bounds[w.key][1] = n
        alive = passed
        if n >= book.most:
            break
        n = min(2 * n, book.most)
    return bounds


def _bisect(book: _Book, way: Way, bound: list[int | None], budget_s: float) -> None:
    lo, hi = bound
    while lo is not None and hi is not None and hi - lo > 1:
        if book.searched() >= book.steps or book.spent["screen"] + book.spent["bisect"] >= budget_s:
            book.stopped = (
                f"the bisection of {way.key} stopped at [{lo}, {hi}]: the search's budget was spent"
            )
            return
        n = (lo + hi) // 2
        if book.run(way, n, 0, "bisect").ok:
            lo = n
        else:
            hi = n
        bound[0], bound[1] = lo, hi


@dataclass
class Settled:
    """One mechanism's answer after its bound was settled: `value` the most cameras decided to pass (None: not
    one), `possibly` a larger count whose run stayed undecided, `fails` the first count known to fail (None: none
    failed), and the runs that decided each."""

    value: int | None
    possibly: int | None
    fails: int | None
    decided: bool
    notes: list[str] = field(default_factory=list)


def settle(book: _Book, way: Way, bound: list[int | None], budget_s: float) -> Settled:
    """Judge the runs at the bound (last passing, first failing N) on evidence, repeating an undecided one with
    longer durations while `budget_s` lasts; a bound that moves on evidence moves the pair."""
    lo, hi = bound
    notes: list[str] = []

    def verdict(n: int | None) -> str | None:
        t = book.latest(way, n) if n is not None else None
        return t.verdict if t is not None else None

    def affordable(seconds: float) -> bool:
        return book.spent["bound"] + seconds <= budget_s

    for _ in range(4 * (MAX_LEVEL + 2)):
        if lo is not None and verdict(lo) == FAIL:
            notes.append(f"{lo} failed on evidence: the bound moves down")
            hi, lo = lo, (lo - 1 if lo > 1 else None)
            if lo is not None and verdict(lo) is None:
                if not affordable(_seconds(book, way, hi)):
                    break
                book.run(way, lo, 0, "bound")
            continue
        if hi is not None and verdict(hi) == PASS:
            notes.append(f"{hi} passed on evidence: the bound moves up")
            lo, hi = hi, (hi + 1 if hi < book.most else None)
            if hi is not None and verdict(hi) is None:
                if not affordable(_seconds(book, way, lo)):
                    break
                book.run(way, hi, 0, "bound")
            continue
        open_ = [n for n in (lo, hi) if n is not None and verdict(n) == OPEN]
        if not open_:
            break
        # the first open count whose longer run still fits (the other one may fit when the first does not)
        longer_run = next((r for r in (_longer(book, way, n) for n in open_) if affordable(r[2])), None)
        if longer_run is None:
            break
        n, level, _ = longer_run
        book.run(way, n, level, "bound")
    # what the runs decided: the most cameras passing on evidence, a larger count left open, the first that fails
    tried = sorted({n for (k, n) in book.runs if k == way.key})
    top = lo if lo is not None else 0
    passing = [n for n in tried if n <= top and verdict(n) == PASS]
    value = max(passing) if passing else None
    undecided = [n for n in tried if n > (value or 0) and (hi is None or n <= hi) and verdict(n) == OPEN]
    possibly = max(undecided) if undecided else None
    above = [n for n in tried if n > (possibly or value or 0)]
    failed = [n for n in above if verdict(n) == FAIL] or [n for n in above if not _ok(book, way, n)]
    fails = min(failed) if failed else None
    if possibly is not None and not _ok(book, way, possibly):
        fails = possibly  # its percentile failed, its interval open: the answer says "possibly"
    decided = possibly is None and fails is not None and verdict(fails) == FAIL and fails == (value or 0) + 1
    return Settled(value, possibly, fails, decided, notes)


def _longer(book: _Book, way: Way, n: int) -> tuple[int, int, float]:
    """The next, longer run at `n`: (n, its level, its estimated seconds); infinite seconds past MAX_LEVEL."""
    last = book.latest(way, n)
    assert last is not None
    level = last.level + 1
    cost = max(last.seconds, 0.1) * 2 ** (level - last.level) if level <= MAX_LEVEL else float("inf")
    return n, level, cost


def _ok(book: _Book, way: Way, n: int) -> bool:
    t = book.latest(way, n)
    return t is not None and t.ok


def _seconds(book: _Book, way: Way, n: int | None) -> float:
    """What a run at the durations' own length is expected to cost, from the run at `n` (a repeat's at its
    level's share)."""
    t = book.latest(way, n) if n is not None else None
    return t.seconds / 2**t.level if t is not None else 1.0


def search(
    ways: list[Way],
    fps: float,
    percentile: float,
    most: int = MOST_CAMERAS,
    steps: int = STEPS,
    screen_budget_s: float = SCREEN_BUDGET_S,
    bound_budget_s: float = BOUND_BUDGET_S,
    clock: Callable[[], float] = time.monotonic,
) -> dict:
    """The camera-capacity result over `ways` (every declared mechanism; those that do not apply are recorded with
    why): screen, bisect the best, settle the best's bound on evidence; the best mechanism's answer, naming it."""
    frame_ms = 1000.0 / fps
    usable = sorted((w for w in ways if w.at is not None), key=lambda w: w.rank)
    book = _Book(usable, most, steps, clock)
    bounds = _screen(book, usable, screen_budget_s)

    # the best after the screen: passing at the largest N, then the lower percentile there, then the simplest
    def at_lo(w: Way) -> float:
        lo = bounds[w.key][0]
        t = book.latest(w, lo) if lo is not None else None
        v = t.entry.get("target_ms") if t is not None else None
        return v if isinstance(v, int | float) else float("inf")

    ranked = sorted(
        (w for w in usable if bounds[w.key][0] is not None),
        key=lambda w: (-(bounds[w.key][0] or 0), at_lo(w), w.rank),
    )
    bisected = [w for i, w in enumerate(ranked[:BISECT_WAYS])
                if i == 0 or (bounds[w.key][0] == bounds[ranked[0].key][0]
                              and at_lo(w) <= BISECT_WITHIN * at_lo(ranked[0]))]  # fmt: skip
    for w in bisected:
        _bisect(book, w, bounds[w.key], screen_budget_s)
    # settle the best (most cameras, then the lower percentile there); where it settles below the next one's point
    # answer, settle that one too
    order = sorted(bisected, key=lambda w: (-(bounds[w.key][0] or 0), at_lo(w), w.rank))
    settled: dict[str, Settled] = {}
    for w in order:
        if settled and max((s.value or 0) for s in settled.values()) >= (bounds[w.key][0] or 0):
            break
        settled[w.key] = settle(book, w, bounds[w.key], bound_budget_s)

    label = f"p{100 * percentile:g}"
    best: Way | None = usable[0] if usable else None
    if settled:  # the most cameras decided, then the simplest mechanism
        best = max(
            (w for w in usable if w.key in settled), key=lambda w: (settled[w.key].value or 0, -w.rank)
        )
    mechanisms = _mechanisms(ways, usable, bounds, settled, bisected, book, frame_ms)
    out: dict[str, Any] = {
        "scenario": "camera-capacity",
        "metric": f"most cameras at {fps:g} FPS: the largest N whose LoadGen MultiStream run (N samples per query, "
        f"one per camera) keeps the per-query {label} within the {frame_ms:.4g} ms frame time, VALID, decided on "
        "LoadGen's early-stopping bound, by the best of the runner's ways of serving N cameras",
        "unit": "cameras",
        "fps": fps,
        "frame_ms": frame_ms,
        "percentile": percentile,
        "driver": "mlperf_loadgen",
        "rule": _rule(label, most, steps, screen_budget_s, bound_budget_s, percentile),
        "tried": [t.entry for t in _all_runs(book)],
        "mechanisms": mechanisms,
        "cost": {
            "seconds": round(sum(book.spent.values()), 3),
            "runs": sum(book.count.values()),
            **{f"{k}_s": round(v, 3) for k, v in book.spent.items()},
            **{f"{k}_runs": v for k, v in book.count.items()},
            "screen_budget_s": screen_budget_s,
            "bound_budget_s": bound_budget_s,
        },
    }
    if book.stopped:
        out["cost"]["stopped"] = book.stopped
    s = settled.get(best.key) if best is not None else None
    if best is None:
        out |= {"value": None, "valid": False, "interval": [None, None], "mechanism": None,
                "reason": "no mechanism of serving N cameras applies to this runner"}  # fmt: skip
        return out
    if s is None:  # not one camera passed by any mechanism
        one = next((t for t in book.order if t.cameras == 1), None)
        out |= {
            "value": None,
            "valid": False,
            "interval": [None, 1],
            "mechanism": best.key,
            "reason": "even one camera fails" + (f": {one.entry.get('reason')}" if one else ""),
            "nearest_miss": one.entry if one else None,
            "loadgen": one.entry.get("loadgen") if one else None,
        }
        return out
    value = s.value
    plan = best.plan(value) if best.plan is not None and value else None
    tied = [
        k for k, m in mechanisms.items()
        if k != best.key and m.get("settled") and m.get("value") == value and m.get("possibly") == s.possibly
    ]  # fmt: skip
    out |= {
        "value": value,
        "valid": value is not None,
        "interval": [value, s.fails],
        "possibly": s.possibly,
        "decided": s.decided,
        "mechanism": best.key,
        "deploy": plan.words if plan else None,
        "configuration": plan.to_dict() if plan else None,
        "tied_mechanisms": tied,
        "bound": _bound_runs(book, best, value, s),
    }
    if s.possibly is not None:
        runs = len(book.runs.get((best.key, s.possibly), []))
        out["undecided"] = (
            f"{_cameras(s.possibly)} undecided at this duration: LoadGen's early-stopping bound of the {label} and "
            f"its lower bound lie on either side of the {frame_ms:.4g} ms frame time after {runs} run(s), the "
            f"longest at x{2 ** _level(book, best, s.possibly)} the queries ({book.spent['bound']:.1f} s of the "
            f"{bound_budget_s:g} s bound budget spent)"
        )
    if value is None:
        one = book.latest(best, 1)
        out["reason"] = (
            f"not one camera decided to pass: {out['undecided']}"
            if s.possibly is not None
            else "even one camera fails on evidence" + (f": {one.entry.get('reason')}" if one else "")
        )
        out["nearest_miss"] = one.entry if one else None
        out["valid"] = False
    elif s.fails is None:
        out["reason_interval"] = (
            f"every N tried passed, up to {max(n for (k, n) in book.runs if k == best.key)}"
        )
    # LoadGen's section of the run that decided: the last passing N's longest run, else the first failing one
    chosen = book.latest(best, value) if value else None
    out["loadgen"] = chosen.entry.get("loadgen") if chosen else None
    return out


def _cameras(n: int) -> str:
    return "1 camera" if n == 1 else f"{n} cameras"


def _level(book: _Book, way: Way, n: int) -> int:
    t = book.latest(way, n)
    return t.level if t is not None else 0


def _all_runs(book: _Book) -> list[Trial]:
    """Every run as the record keeps it: each one run, then the mechanisms' shared ones (said so)."""
    out = list(book.order)
    seen = {id(t.entry) for t in out}
    for trials in book.runs.values():
        for t in trials:
            if id(t.entry) not in seen:
                out.append(t)
                seen.add(id(t.entry))
    return out


def _bound_runs(book: _Book, way: Way, value: int | None, s: Settled) -> dict:
    """The runs that decided the answer at the bound: their percentile, its interval and the verdict."""
    out = {}
    for name, n in (("passes", value), ("possibly", s.possibly), ("fails", s.fails)):
        t = book.latest(way, n) if n is not None else None
        if t is not None:
            out[name] = {k: t.entry.get(k) for k in ("cameras", "target_ms", "interval", "verdict", "queries",
                                                     "level", "percentile")}  # fmt: skip
    if s.notes:
        out["moves"] = s.notes
    return out


def _mechanisms(
    ways: list[Way],
    usable: list[Way],
    bounds: dict[str, list[int | None]],
    settled: dict[str, Settled],
    bisected: list[Way],
    book: _Book,
    frame_ms: float,
) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for w in sorted(ways, key=lambda w: w.rank):
        if w.at is None:
            out[w.key] = {"words": w.words, "applies": False, "why_not": w.why_not, "value": None}
            continue
        lo, hi = bounds.get(w.key, [None, None])
        s = settled.get(w.key)
        entry: dict[str, Any] = {"words": w.words, "applies": True}
        if s is not None:
            entry |= {"value": s.value, "interval": [s.value, s.fails], "possibly": s.possibly, "settled": True,
                      "decided": s.decided}  # fmt: skip
        else:
            entry |= {"value": lo, "interval": [lo, hi], "settled": False}
            if w in bisected:
                entry["note"] = "bisected; its bound not settled (another mechanism serves more)"
            elif lo is not None:
                entry["note"] = (
                    f"screened: passes at {lo}" + (f", fails at {hi}" if hi is not None else "")
                    + "; not bisected (others passed at as many cameras with a lower percentile, or more)"
                )  # fmt: skip
            else:
                entry["note"] = (
                    "fails at one camera" if hi == 1 else "not run (the screen's budget was spent)"
                )
        n = entry.get("value")
        if n and w.plan is not None:
            entry["deploy"] = w.plan(n).words
            t = book.latest(w, n)
            if t is not None:
                entry["target_ms"] = t.entry.get("target_ms")
                entry["target_interval"] = t.entry.get("interval")
        entry["runs"] = len([t for (k, _), ts in book.runs.items() if k == w.key for t in ts])
        out[w.key] = entry
    return out


def _rule(label: str, most: int, steps: int, screen_s: float, bound_s: float, percentile: float) -> str:
    return (
        f"every mechanism the runner declares; N = 1, 2, 4, ... each mechanism still passing once per N (at most "
        f"{most} cameras), then bisection of the best (and the next where its {label} is within {BISECT_WITHIN:g}x "
        f"the best's) to one camera apart ({steps} LoadGen runs and {screen_s:g} s at most; a run is cut at "
        f"{CUT_AT_FRAMES:g} frame times per query); the bound's runs judged on evidence: pass when LoadGen's "
        "early-stopping bound of "
        f"the {label} is within the frame time, fail when its lower bound (the 1% order statistic) is over it, "
        f"else repeated at x2 then x4 the queries and duration within {bound_s:g} s, and what stays open is said "
        "(N, possibly N+1)" + (" (short durations: the p90, not the p99)" if percentile < 0.99 else "")
    )


def longer(d: Durations, level: int, frame_ms: float | None = None) -> Durations:
    """The durations of a run at `level`: 0, the durations' own, cut at CUT_AT_FRAMES frame times per query where
    `frame_ms` is given (a screening run); k > 0, a bound's repeat: 2^k times the MultiStream queries and minimum
    duration, uncut."""
    if level <= 0:
        if frame_ms is None:
            return d
        cut = max(2 * d.multi_ms, math.ceil(d.multi_queries * frame_ms * CUT_AT_FRAMES))
        return replace(d, multi_max_ms=cut)
    k = 2**level
    return replace(d, name=f"{d.name} x{k}", multi_ms=d.multi_ms * k, multi_queries=d.multi_queries * k,
                   multi_max_ms=0)  # fmt: skip


def way_of(
    key: str, words: str, target: Target | None, plan: Callable[[int], Plan] | None, fps: float, expected_ms: float,
    why_not: str | None = None,
) -> Way:  # fmt: skip
    """A mechanism as LoadGen MultiStream runs of `target` (its streams made by the mechanism); each N logs under
    camera-capacity/<mechanism>-<N>[-x<k>]/."""
    if target is None:
        return Way(key, words, None, None, why_not)
    frame_ms = 1000.0 / fps
    tgt = target

    def at(n: int, level: int) -> Trial:
        name = f"{key}-{n}" + (f"-x{2**level}" if level else "")
        where = replace(
            tgt,
            log_dir=tgt.log_dir / "camera-capacity" / name,
            durations=longer(tgt.durations, level, frame_ms),
        )
        return trial_of(multi_stream(where, n, expected_ms), n, frame_ms, key, level)

    return Way(key, words, at, plan)


def camera_capacity(
    target: Target, fps: float, expected_ms: float, ways: list[Way] | None = None, **kw
) -> dict:
    """The search on LoadGen MultiStream runs, over `ways` (built by harness.scenarios.ways_for from the runner's
    declared mechanisms); without them, `target`'s own streams as the one mechanism."""
    if ways is None:
        ways = [way_of(STREAMS, "one stream per camera", target, None, fps, expected_ms)]
    # the budgets are the short durations' (1 s runs); longer durations (MLPerf's 600 s) scale them
    scale = max(1.0, target.durations.multi_ms / 1000.0)
    kw.setdefault("screen_budget_s", SCREEN_BUDGET_S * scale)
    kw.setdefault("bound_budget_s", BOUND_BUDGET_S * scale)
    return search(ways, fps, target.durations.multi_percentile, **kw)
