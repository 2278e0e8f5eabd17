"""Which cells run the use-case scenarios in the default mode: the ones a screen keeps.

The scenarios (MLPerf LoadGen's single-stream, multi-stream, offline and server, and the camera check) cost tens of
seconds per cell, too much for every cell of a matrix. The use cases they decide (camera, server, offline) all
favour the configuration with the least time per image, so the screen ranks every cell the timing phase timed by
a figure the run already has, its model-only p50 per image (p50 / batch), and keeps the `SCREEN_KEEP` fastest. The
others get the reason they were screened out, with their figure and the cut-off, in the record.
"""

from __future__ import annotations

from collections.abc import Iterable

from harness.measure.stats import median

#: cells per run that the screen keeps for the scenarios
SCREEN_KEEP = 3


def per_image_ms(state) -> float | None:
    """A timed attempt's model-only p50 per image (ms), or None when it was not timed."""
    timed = getattr(state, "timed", None)
    key = state.attempt.cell_id
    t = timed.timings.get(key) if timed is not None else None
    if t is None or t.error is not None or not t.samples:
        return None
    return median(t.samples) / max(1, state.cell.batch)


def screen(states: Iterable, keep: int = SCREEN_KEEP) -> dict[str, str | None]:
    """cell id -> None for the cells kept for the scenarios, else why the screen left it out; for the plain (not
    remedy) attempts the timing phase timed without error, at static shapes (a kept cell that then fails parity
    runs no scenarios: it is not a candidate)."""
    ranked = []
    for s in states:
        if s.attempt.remedy or s.cell.shape.dynamic:
            continue
        ms = per_image_ms(s)
        if ms is not None:
            ranked.append((ms, s.attempt.cell_id))
    ranked.sort()
    kept = ranked[:keep]
    cutoff = kept[-1][0] if kept else None
    out: dict[str, str | None] = {cid: None for _, cid in kept}
    for ms, cid in ranked[keep:]:
        out[cid] = (
            f"screened out: model-only p50 {ms:.1f} ms per image in the timing phase; the scenarios ran on the "
            f"{len(kept)} fastest cells of this run (up to {cutoff:.1f} ms per image; --scenarios all runs them on "
            "every cell)"
        )
    return out
