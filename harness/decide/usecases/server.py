"""Server: requests arriving at random (Poisson), on each machine.

Two answers: the most accurate configuration that serves requests within the bound, among those whose accuracy is
known (measured on your data, or published), and the fastest (the highest request rate served), with what it gives
up (harness.decide.most_accurate); among the equally accurate, the highest rate first. Constraint: the server
scenario's percentile (p90 under short durations, p99 under MLPerf's) within the bound (--server-bound-ms, else the
bound the run measured under, times --headroom), re-decided from the rates the scenario tried. Figure: the server scenario's rate,
else screened from the e2e p50. Tie rule: rate intervals (last passing to first failing rate) that overlap, strictly
(two intervals touching at one end are apart: one rate passed there, the other failed). Within a tie: the least host memory, then the simplest deployment
(harness.decide.tie_order), said as "any of these; X if memory matters".
"""

from __future__ import annotations

from harness.decide.by_candidates import ByCandidates, rate_own, server_case_figure
from harness.decide.candidate_types import CandidateCase
from harness.decide.candidates import fmt
from harness.decide.registry import register_use_case

SERVER = CandidateCase(
    "server",
    lambda c: "Server",
    "the most accurate configuration (any size, shape, precision, backend) that serves requests within the bound, "
    "and the one serving the highest rate (queries/s)",
    lambda c: (
        f"p99 within {fmt(c.server_bound_ms) if c.server_bound_ms else 'the recorded'} ms at that rate"
        + (f" × {c.headroom:g} headroom" if c.headroom < 1.0 else "")
    ),
    server_case_figure,
    rate_own,
    higher_is_better=True,
    batch1=False,
    scenario="server",
    strict_overlap=True,
    accuracy_first=True,
)

register_use_case(ByCandidates(SERVER, order=30))
