"""Several cameras at --camera-fps each (default 30), on each machine, from the multi-stream scenario.

Objective: the most streams sustained, then the most images/s. Constraint: the multi-stream p99 per query within
the frame time, LoadGen's verdict valid, then the common ones. Figure: the multi-stream result (the stream count it
ran). Tie rule: as many streams and overlapping p99 95% intervals.
"""

from __future__ import annotations

from dataclasses import replace

from harness.decide import figures as fig
from harness.decide.by_scenario import FRAME, ByScenario, ScenarioCase, validity
from harness.decide.picks import Constraints
from harness.decide.registry import register_use_case
from harness.decide.scenario_results import CAMERA_FPS, ran_ips, result, span
from harness.decide.words import fmt_num

MULTI_CAMERA = ScenarioCase(
    key="multi-camera",
    title=f"Several cameras, {CAMERA_FPS} FPS each",
    objective="most streams sustained, then most images/s",
    constraint=f"multi-stream p99 per query within the {FRAME} frame time",
    scenario="multi-stream",
    value=fig.stream_count,
    higher_is_better=True,
    checks=(("frame time", fig.multi_check), validity("multi-stream")),
    interval=lambda r: span(result(r, "multi-stream"), "p99_interval"),
    figure=fig.multi_figure,
    numbers=fig.multi_numbers,
    tie_words="they sustain as many streams and their p99 95% intervals overlap",
    secondary=lambda r: ran_ips(result(r, "multi-stream")),
    same_level=lambda a, b: fig.stream_count(a) == fig.stream_count(b),
)


def at_fps(case: ScenarioCase, cons: Constraints) -> ScenarioCase:
    """Several cameras at --camera-fps: the frame time its multi-stream p99 is checked against."""
    fps = cons.camera_fps
    if fps == CAMERA_FPS:
        return case
    frame = f"{fmt_num(1000.0 / fps)} ms"
    checks = (("frame time", fig.multi_check_at(fps)), *case.checks[1:])
    return replace(
        case,
        title=f"Several cameras, {fps:g} FPS each",
        constraint=f"multi-stream p99 per query within the {frame} frame time",
        checks=checks,
    )


register_use_case(ByScenario(MULTI_CAMERA, order=20, at=at_fps))
