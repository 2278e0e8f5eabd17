"""A configuration's camera capacity at a frame rate, read from its records: the camera-capacity search's answer
(harness.scenarios.capacity) where it ran at that rate, else bounded by the figures the run has: a multi-stream run
at S streams within the frame time says "at least S"; one over it says "fewer than S", and at least one when the
single-stream p99 is within the frame time. Each figure says which it is.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from harness.core.record import CellRecord
from harness.decide.candidates import camera_figure
from harness.decide.load import number
from harness.decide.scenario_results import e2e_p99, percentile_label, result
from harness.decide.words import fmt_num

log = logging.getLogger(__name__)

SEARCH, BOUNDED, SCREENED = "search", "bounded by multi-stream", "screened from one stream"


@dataclass(frozen=True)
class Capacity:
    """`lo`: cameras known to be served (None: not even one); `hi`: the first count known to fail (None: none
    failed); `source`: SEARCH or BOUNDED; `how`: the figures behind it in words."""

    lo: int | None
    hi: int | None
    source: str
    how: str
    mechanism: str = ""
    miss_ms: float | None = None  # not one camera: the figure that missed the frame time
    #: a larger count the search's runs left undecided at their durations (None: the bound is decided)
    possibly: int | None = None
    #: what the winning mechanism deploys at `lo` cameras, in words ("2 InferenceSessions x 1 thread")
    deploy: str = ""

    def text(self, fps: float) -> str:
        """`11 cameras at 30 FPS by one worker, frames in turn, 2 threads (passes at 11, fails at 12)`; an undecided
        bound `2 cameras, possibly 3, at 30 FPS ... (passes at 2; 3 undecided at this duration)`; a bound from the
        multi-stream figures says that no search ran; `not one camera at 30 FPS` when one fails."""
        at = f"at {fps:g} FPS"
        if self.lo is None:
            if self.possibly is not None:
                return f"not one camera decided {at} (possibly {_cameras(self.possibly)}: undecided at this duration)"
            return f"not one camera {at}"
        note = {SEARCH: "", BOUNDED: "; no search ran"}.get(self.source, "; no multi-stream or search ran")
        said = self.deploy or MECHANISM_WORDS.get(self.mechanism, self.mechanism)
        how = f" by {said}" if said and self.source == SEARCH else ""
        if self.possibly is not None:
            fails = f", fails at {self.hi}" if self.hi is not None and self.hi > self.possibly else ""
            return (
                f"{_cameras(self.lo)}, possibly {self.possibly}, {at}{how} (passes at {self.lo}; {self.possibly} "
                f"undecided at this duration{fails})"
            )
        if self.hi is None:
            said = {SEARCH: "none tried failed", BOUNDED: f"multi-stream at {self.lo} passed"}.get(
                self.source, "one stream within the frame time"
            )
            return f"at least {_cameras(self.lo)} {at}{how} ({said}{note})"
        count = _cameras(self.lo) if self.hi - 1 == self.lo else f"{self.lo}–{self.hi - 1} cameras"
        return f"{count} {at}{how} (passes at {self.lo}, fails at {self.hi}{note})"


#: the search's mechanisms (harness.scenarios.capacity) in words, where a record does not say what it deployed
MECHANISM_WORDS = {
    "streams": "one stream per camera",
    "batched": "one batched call of every camera's frame",
    "serial": "one worker, frames in turn",
    "split": "the thread budget split between workers",
    "instances": "runtime instances, one per worker",
}


def _bound_words(found: dict, label: str) -> str:
    """The runs at the bound: `; at 2: p90 28.1 ms [26.0-31.9] pass; at 3: p90 38.2 ms [35.1-44.0] fail`."""
    bound = found.get("bound") if isinstance(found.get("bound"), dict) else {}
    parts = []
    for name in ("passes", "possibly", "fails"):
        run = bound.get(name)
        if not isinstance(run, dict):
            continue
        at, iv = number(run, "target_ms"), run.get("interval")
        ivs = (
            f" [{fmt_num(iv[0])}–{fmt_num(iv[1])}]"
            if isinstance(iv, list) and len(iv) == 2 and all(isinstance(v, int | float) for v in iv)
            else ""
        )
        queries = number(run, "queries")
        parts.append(
            f"at {run.get('cameras')}: {label} {fmt_num(at) if at is not None else 'n/a'} ms{ivs} "
            f"{run.get('verdict')}" + (f" ({int(queries)} queries)" if queries else "")
        )
    return ("; " + "; ".join(parts)) if parts else ""


def _mechanism_words(key: str, r: dict) -> str:
    name = MECHANISM_WORDS.get(key, key)
    if r.get("applies") is False:
        return f"{name}: does not apply ({r.get('why_not')})"
    value = r.get("value")
    said = "not one" if value is None else str(value)
    if isinstance(r.get("possibly"), int):
        said += f", possibly {r['possibly']}"
    deploy = str(r.get("deploy") or "")
    if deploy.startswith(name):  # the words say it already: "one worker, frames in turn, 2 threads: 4"
        name = deploy
    elif deploy:
        said += f" ({deploy})"
    if r.get("settled") is False and r.get("note"):
        said += f", {r['note'].split(';')[0]}"
    return f"{name}: {said}"


def _cameras(n: int) -> str:
    return "1 camera" if n == 1 else f"{n} cameras"


def capacity(rec: CellRecord, fps: float) -> Capacity | None:
    """The record's camera capacity at `fps`, or None when it has neither a search nor a multi-stream result."""
    frame = 1000.0 / fps
    found = result(rec, "camera-capacity")
    if found and number(found, "fps") == fps:
        iv = found.get("interval") or [None, None]
        lo = iv[0] if isinstance(iv[0], int) else None
        hi = iv[1] if len(iv) > 1 and isinstance(iv[1], int) else None
        label = percentile_label(found)
        tried = len(found.get("tried") or [])
        cost = found.get("cost") if isinstance(found.get("cost"), dict) else {}
        runs = int(number(cost, "runs") or tried)
        secs = number(cost, "seconds")
        how = f"searched: {runs} LoadGen MultiStream runs" + (f" in {fmt_num(secs)} s" if secs else "")
        how += f", per-query {label} within {fmt_num(frame)} ms"
        if (
            "decided" in found
        ):  # the bound judged on LoadGen's early-stopping bound (since the mechanisms' search)
            how += ", decided on LoadGen's early-stopping bound" + _bound_words(found, label)
        mechanisms = found.get("mechanisms") or {}
        if len(mechanisms) > 1:  # several searched: what each sustained
            how += "; by mechanism: " + "; ".join(_mechanism_words(m, r) for m, r in mechanisms.items())
        possibly = found.get("possibly")
        return Capacity(
            lo, hi, SEARCH, how, str(found.get("mechanism") or ""),
            possibly=possibly if isinstance(possibly, int) else None, deploy=str(found.get("deploy") or ""),
        )  # fmt: skip
    multi = result(rec, "multi-stream")
    streams = number(multi or {}, "streams")
    if multi is None or streams is None:
        return _one_stream(rec, frame)
    label = percentile_label(multi)
    at = number(multi, f"{label}") or number(multi, "value")
    s = int(streams)
    single = e2e_p99(rec)
    no_search = "no camera-capacity search ran"
    if multi.get("valid") is not False and at is not None and at <= frame:
        how = f"multi-stream at {s} streams kept {label} {fmt_num(at)} ms within {fmt_num(frame)} ms; {no_search}"
        return Capacity(s, None, BOUNDED, how, str(multi.get("mechanism") or ""))
    over = f"{label} {fmt_num(at)} ms" if at is not None else "a run LoadGen called INVALID"
    if s > 1 and single is not None and single <= frame:
        how = (
            f"multi-stream at {s} streams missed ({over}); single-stream e2e p99 {fmt_num(single)} ms within "
            f"{fmt_num(frame)} ms; {no_search}"
        )
        return Capacity(1, s, BOUNDED, how)
    miss = single if single is not None else at
    how = f"multi-stream at {s} streams missed ({over})" + (
        f"; single-stream e2e p99 {fmt_num(single)} ms over {fmt_num(frame)} ms" if single is not None else ""
    )
    return Capacity(None, 1 if single is not None or s == 1 else s, BOUNDED, how, miss_ms=miss)


def _one_stream(rec: CellRecord, frame: float) -> Capacity | None:
    """No multi-stream run: one camera at most, from the camera's own figure (the single-stream p99, else screened
    from the record's end-to-end timing), said so; None without either."""
    fig = camera_figure(rec)
    if fig is None:
        return None
    value = fig.limit_value  # the p99 a camera keeps within the frame time (also where the p90 ranks)
    text = fig.text if fig.judged is None else f"e2e p99 {fmt_num(value)} ms"
    how = f"{text} {'within' if value <= frame else 'over'} {fmt_num(frame)} ms; no multi-stream ran"
    if value <= frame:
        return Capacity(1, None, SCREENED, how)
    return Capacity(None, 1, SCREENED, how, miss_ms=value)
