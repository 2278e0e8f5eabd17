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

    def text(self, fps: float) -> str:
        """`11 cameras at 30 FPS (passes at 11, fails at 12)`; a bound from the multi-stream figures says that no
        search ran; `not one camera at 30 FPS` when one fails."""
        at = f"at {fps:g} FPS"
        if self.lo is None:
            return f"not one camera {at}"
        note = {SEARCH: "", BOUNDED: "; no search ran"}.get(self.source, "; no multi-stream or search ran")
        how = (
            f" by {MECHANISM_WORDS.get(self.mechanism, self.mechanism)}"
            if self.mechanism and self.source == SEARCH
            else ""
        )
        if self.hi is None:
            said = {SEARCH: "none tried failed", BOUNDED: f"multi-stream at {self.lo} passed"}.get(
                self.source, "one stream within the frame time"
            )
            return f"at least {_cameras(self.lo)} {at}{how} ({said}{note})"
        count = _cameras(self.lo) if self.hi - 1 == self.lo else f"{self.lo}–{self.hi - 1} cameras"
        return f"{count} {at}{how} (passes at {self.lo}, fails at {self.hi}{note})"


#: the search's mechanisms (harness.scenarios.capacity) in words
MECHANISM_WORDS = {"streams": "one stream per camera", "batched": "one batched call of every camera's frame"}


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
        how = f"searched: {tried} LoadGen MultiStream runs, per-query {label} within {fmt_num(frame)} ms"
        mechanisms = found.get("mechanisms") or {}
        if len(mechanisms) > 1:  # both searched: what each sustained
            how += "; " + ", ".join(
                f"{MECHANISM_WORDS.get(m, m)}: {r.get('value') if r.get('value') is not None else 'not one'}"
                for m, r in mechanisms.items()
            )
        return Capacity(lo, hi, SEARCH, how, str(found.get("mechanism") or ""))
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
    how = f"{fig.text} {'within' if fig.value <= frame else 'over'} {fmt_num(frame)} ms; no multi-stream ran"
    if fig.value <= frame:
        return Capacity(1, None, SCREENED, how)
    return Capacity(None, 1, SCREENED, how, miss_ms=fig.value)
