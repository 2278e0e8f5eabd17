"""Headroom: a pick whose deciding figure's interval reaches the use case's limit sits at the limit (it may miss
it on the next run, and leaves the user no margin); it is marked so, with the next candidate that meets the limit
with margin named. `--headroom 0.8` asks instead for figures within 80% of each bound (Constraints.headroom).
"""

from __future__ import annotations

import logging

from harness.decide.candidate_types import Scored
from harness.decide.candidates import Figure, fmt

log = logging.getLogger(__name__)


def upper_end(fig: Figure) -> float:
    """The upper end of the interval of the statistic the limit is judged on: the figure's own interval's; where
    another statistic ranks (the p90 beside a p99 open above at ~100 queries), the judged p99 stretched by the
    ranking statistic's relative interval; the value itself where there is no interval."""
    if fig.interval is None:
        return fig.limit_value
    if fig.judged is not None and fig.value > 0:
        return max(fig.judged, fig.judged * fig.interval.hi / fig.value)
    return max(fig.interval.hi, fig.limit_value)


def at_limit(s: Scored, limit: float) -> str:
    """`at the limit: ...` when `s`'s interval reaches `limit` (ms), else ""."""
    hi = upper_end(s.fig)
    if hi < limit:
        return ""
    how = (
        "the p99 stretched by its p90's interval" if s.fig.judged is not None else "its interval's upper end"
    )
    return f"at the limit: {how} ({fmt(hi)} ms) reaches the {fmt(limit)} ms limit"


def with_margin(order: list[Scored], limit: float, after: Scored) -> Scored | None:
    """The first candidate of `order` (the use case's order: most accurate first) other than `after` whose interval
    stays below `limit`."""
    return next((s for s in order if s is not after and upper_end(s.fig) < limit), None)
