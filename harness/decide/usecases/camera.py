"""Camera: one stream at --camera-fps (default 30), on each machine.

Two answers: the most accurate configuration whose end-to-end p99 at batch 1 keeps the frame time, among those
whose accuracy is known (measured on your data, or published), and the fastest that keeps it, with what it gives
up (harness.decide.most_accurate). Constraint: the e2e p99 within the frame time (1000/FPS ms, times --headroom),
then the common ones (accuracy floor, memory cap, --min-shape). A pick whose interval reaches the frame time is
marked at the limit, with the next candidate with margin named (harness.decide.headroom). Figure: the
single-stream scenario's p99, else screened from the record's end-to-end timing. Among the equally accurate, the
lowest p99 first; tie rule: the paired p50 ratio's 95% interval for two cells timed interleaved, else the overlap of
the figures' intervals. Within a tie: the least host memory, then the simplest deployment (harness.decide.tie_order),
said as "any of these; X if memory matters".
"""

from __future__ import annotations

from harness.decide.by_candidates import ByCandidates, camera_own, frame_ms
from harness.decide.candidate_types import CandidateCase
from harness.decide.candidates import camera_figure, fmt
from harness.decide.registry import register_use_case

CAMERA = CandidateCase(
    "camera",
    lambda c: f"Camera, {fmt(c.camera_fps)} FPS",
    "the most accurate configuration (any size, shape, precision, backend) whose end-to-end p99 at batch 1 keeps "
    "the frame time, and the fastest that keeps it",
    lambda c: (
        f"e2e p99 within the {fmt(frame_ms(c))} ms frame time"
        + (f" × {c.headroom:g} headroom ({fmt(frame_ms(c) * c.headroom)} ms)" if c.headroom < 1.0 else "")
    ),
    lambda r, c, ctx: camera_figure(r),
    camera_own,
    higher_is_better=False,
    batch1=True,
    scenario="single-stream",
    accuracy_first=True,
    limit_ms=lambda c: frame_ms(c) * c.headroom,
)

register_use_case(ByCandidates(CAMERA, order=10))
