"""harness.plan.phase_answers and the scenario phase's price: answers a CPU quota puts out of reach are not priced,
both ways (a quota whose stall is shorter than the frame, no quota, a slow frame rate keep every answer)."""

from __future__ import annotations

import pytest

from harness.core.cpu_quota import Quota
from harness.plan import price
from harness.plan.durations import Recorded
from harness.plan.phase_answers import CAMERA_ANSWERS, out_of_reach, quota_stall_s

HALF = Quota(cpus=0.5, quota_us=50_000, period_us=100_000, source="synthetic cpu.cfs_quota_us")
NEARLY_FOUR = Quota(cpus=3.5, quota_us=350_000, period_us=100_000, source="synthetic cpu.max")
NONE = Quota(cpus=None, reason="no quota (synthetic)")
ANSWERS = ("camera", "camera-capacity", "offline", "server")


def test_a_stall_longer_than_the_frame_puts_the_camera_answers_out_of_reach():
    assert quota_stall_s(HALF, 1) == pytest.approx(0.05)
    gone = out_of_reach(30.0, 1, HALF)
    assert (
        set(gone) == set(CAMERA_ANSWERS) and "50 ms" in gone["camera"] and "33.3 ms frame" in gone["camera"]
    )


def test_every_answer_stays_in_reach_where_no_stall_reaches_the_frame():
    assert quota_stall_s(NEARLY_FOUR, 4) == pytest.approx(0.0125) and out_of_reach(30.0, 4, NEARLY_FOUR) == {}
    assert quota_stall_s(NEARLY_FOUR, 3) is None  # fewer threads than the quota's CPUs: never held
    assert out_of_reach(30.0, 2, NONE) == {}
    assert out_of_reach(5.0, 1, HALF) == {}  # a 200 ms frame outlasts the 50 ms stall
    assert out_of_reach(0.0, 1, HALF) == {}  # no camera use case


def test_the_phase_is_priced_at_the_share_of_the_answers_in_reach():
    table = price.Table(scenario_phase_s=180.0, scenario_phase_answers=ANSWERS)
    known = price.Known(table)
    whole = price.scenario_phase_price(known, 240.0)
    assert whole.parts["scenarios"] == 180.0 and "4 answers" in whole.detail
    half = price.scenario_phase_price(known, 240.0, out_of_reach(30.0, 1, HALF))
    assert (
        half.parts["scenarios"] == pytest.approx(90.0)
        and "camera, camera-capacity out of reach" in half.detail
    )
    assert price.scenario_phase_price(known, 60.0, out_of_reach(30.0, 1, HALF)).parts["scenarios"] == 60.0
    # an earlier run's phase in the same results directory measured this machine: it stands as recorded
    recorded = price.Known(table, recorded=Recorded(scenario_phase_s=70.0))
    assert price.scenario_phase_price(recorded, 240.0, out_of_reach(30.0, 1, HALF)).parts["scenarios"] == 70.0
    # a table that does not say which answers its phase measured keeps its whole figure
    bare = price.Known(price.Table(scenario_phase_s=180.0))
    assert price.scenario_phase_price(bare, 240.0, out_of_reach(30.0, 1, HALF)).parts["scenarios"] == 180.0
