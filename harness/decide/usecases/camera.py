"""Camera: one stream at --camera-fps (default 30), on each machine.

Objective: the lowest end-to-end p99 at batch 1, any size, shape, precision and backend. Constraint: the e2e p99
within the frame time (1000/FPS ms), then the common ones (accuracy floor, memory cap, --min-shape). Figure: the
single-stream scenario's p99, else screened from the record's end-to-end timing. Tie rule: the paired p50 ratio's 95%
interval for two cells timed interleaved, else the overlap of the figures' intervals. Within a tie: the least host memory, then the simplest deployment
(harness.decide.tie_order), said as "any of these; X if memory matters".
"""

from __future__ import annotations

from harness.decide.by_candidates import ByCandidates, camera_own, frame_ms
from harness.decide.candidate_types import CandidateCase
from harness.decide.candidates import camera_figure, fmt
from harness.decide.registry import register_use_case

CAMERA = CandidateCase(
    "camera",
    lambda c: f"Camera, {fmt(c.camera_fps)} FPS",
    "lowest end-to-end p99 at batch 1 (any size, shape, precision, backend)",
    lambda c: f"e2e p99 within the {fmt(frame_ms(c))} ms frame time",
    lambda r, c, ctx: camera_figure(r),
    camera_own,
    higher_is_better=False,
    batch1=True,
    scenario="single-stream",
)

register_use_case(ByCandidates(CAMERA, order=10))
