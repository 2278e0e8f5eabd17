"""Offline batch processing: a backlog of images, on each machine.

Objective: the highest images/s, any batch and concurrency, any size, shape, precision and backend. Constraint: no
latency bound (the common ones only). Figure: the offline scenario's images/s, else screened from the e2e p50. Tie
rule: images/s intervals that overlap (the paired p50 ratio for two cells timed interleaved). Within a tie: the least host memory, then the simplest deployment
(harness.decide.tie_order), said as "any of these; X if memory matters".
"""

from __future__ import annotations

from harness.decide.by_candidates import ByCandidates, rate_own
from harness.decide.candidate_types import CandidateCase
from harness.decide.candidates import offline_figure
from harness.decide.registry import register_use_case

OFFLINE = CandidateCase(
    "offline",
    lambda c: "Offline batch processing",
    "highest images/s, any batch and concurrency (any size, shape, precision, backend)",
    lambda c: "no latency bound",
    lambda r, c, ctx: offline_figure(r, ctx["offline"]),
    rate_own,
    higher_is_better=True,
    batch1=False,
    scenario="offline",
)

register_use_case(ByCandidates(OFFLINE, order=40))
