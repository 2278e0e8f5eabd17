"""The re-plan's rules (harness.plan.replan, harness.pytest_plugin.replan_session, harness.plan.estimate.Estimate.drop)
on invented prices and a fake clock: which cells a run slower than its estimate leaves for later, what that takes
out of the estimate, what env.json's plan says, and the scenario phase's budget within what the run has left."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.results_dir import read_env, write_env
from harness.plan import estimate as est
from harness.plan.matrix import PlannedCell
from harness.plan.price import Price
from harness.plan.replan import WAIT_REPLAN, choose
from harness.pytest_plugin import plugin, replan_session


# -- which cells ---------------------------------------------------------------------------------------------------
def test_choose_takes_the_lowest_ranked_until_the_overrun_is_covered():
    order = ["a", "b", "c", "d"]  # the plan took them in this order: d ranks lowest
    seconds = {"b": 10.0, "c": 20.0, "d": 30.0}  # a has started: not a candidate
    assert choose(order, seconds, 25.0) == ["d"]
    assert choose(order, seconds, 45.0) == ["d", "c"]
    assert choose(order, seconds, 500.0) == ["d", "c", "b"]  # all of them where they cannot cover it
    assert choose(order, seconds, 0.0) == [] and choose(order, seconds, -5.0) == []  # within the budget: none
    assert choose(order, {"c": 0.0, "d": 30.0}, 40.0) == ["d"]  # a cell that saves nothing is never left
    assert choose(["b"], {"b": 5.0, "x": 1.0}, 1.0) == ["x"]  # a cell the plan did not rank goes first


# -- what it takes out of the estimate -----------------------------------------------------------------------------
def cell(backend: str, side: int) -> Cell:
    return Cell("n", "detect", "e2e", backend, "cpu", Shape(side, side))


A, B, C = cell("onnxruntime", 640), cell("openvino", 640), cell("onnxruntime", 320)
PRICES = {
    A.id: Price(
        {"export": 10.0, "probe": 2.0, "load": 1.0, "timing": 3.0, "stages": 4.0, "scenarios": 0.0}, "plan"
    ),
    B.id: Price(
        {"export": 20.0, "probe": 2.0, "load": 2.0, "timing": 3.0, "stages": 6.0, "scenarios": 5.0}, "plan"
    ),
    C.id: Price(
        {"export": 5.0, "probe": 1.0, "load": 1.0, "timing": 2.0, "stages": 2.0, "scenarios": 0.0}, "plan"
    ),
}
WORKLOADS = {"w640": [A, B], "w320": [C]}


def composed(episodes: int = 3) -> est.Estimate:
    return est.compose(WORKLOADS, PRICES, share=0.5, episodes=episodes, finish=Price({"stages": 7.0}, "plan"))


@pytest.mark.parametrize("episodes", [3, 1])
def test_dropping_a_cell_takes_its_share_out_of_the_parts_not_done(episodes):
    e = composed(episodes)
    e.done(est.EXPORT_PHASE, e.parts[est.EXPORT_PHASE].seconds * 2)  # the run goes 2x slower than priced
    assert e.ratio() == 2.0
    before = e.remaining_s()
    left_b = e.cell_left_s(B.id)
    # load, timing and stages at the run's pace, its scenarios as they are (wall-clock); its export was done
    assert left_b == pytest.approx((2.0 + 3.0 + 6.0) * 2 + 5.0)
    assert e.drop(B.id) == pytest.approx(left_b)
    assert e.remaining_s() == pytest.approx(before - left_b)
    assert e.parts["w640"].fixed == 0.0  # its scenarios (wall-clock) went with it
    # a workload whose every cell is left goes whole; the end stays
    e.drop(C.id)
    assert "w320" not in e.parts and est.FINISH in e.parts


def test_a_cell_whose_workload_ran_saves_only_what_is_still_ahead():
    e = composed()
    for key, actual in ((est.EXPORT_PHASE, 15.0), (est.TIMING_PHASE, 12.0), ("w320", 2.0)):
        e.done(key, actual)
    assert e.cell_left_s(C.id) == 0.0  # its workload ran: nothing of it is ahead
    assert e.cell_left_s(A.id) == pytest.approx(4.0 * e.ratio())  # only its stages are


# -- the session's re-plan -----------------------------------------------------------------------------------------
class FakeSession:
    """What replan_session reads of the plugin's session: a budget, a clock whose estimate is `composed()`."""

    def __init__(self, tmp_path, *, budget_s: float, elapsed_s: float) -> None:
        self.time_budget_s, self.time_budget_text, self.budget_order = budget_s, "2m", "screen"
        self.t0 = time.perf_counter() - elapsed_s
        e = composed()
        e.done(est.EXPORT_PHASE, e.parts[est.EXPORT_PHASE].seconds)  # as priced: the rest x1
        self.clock = SimpleNamespace(estimate=e, pending={"w640", "w320"}, workloads=2)
        self.plan_order = [C.id, A.id, B.id]  # the plan took B last: it ranks lowest
        self.left_for_later: dict[str, str] = {}
        self.selected = self.planned = [PlannedCell(c) for c in (A, B, C)]
        self.recorded, self.rerun, self.run_id = {}, {}, "r1"
        self.run_config = SimpleNamespace(run_dir=tmp_path / "r1")
        self.run_config.run_dir.mkdir()
        write_env(self.run_config.run_dir, {"run_id": "r1"})
        self.lines: list[str] = []

    def notice(self, msg: str) -> None:
        self.lines.append(msg)


def test_a_run_past_its_budget_leaves_the_lowest_ranked_cells_and_says_so(tmp_path):
    # remaining: A 8 + B 16 + C 5 + end 7 = 36 s; 100 s so far; budget 121 s: 15 s over, B (16 s) covers it
    s = FakeSession(tmp_path, budget_s=121.0, elapsed_s=100.0)
    done = replan_session.check(s, "export_phase_done", 15.0, {})
    assert done is not None and done.cells == [B.id] and done.saved_s == pytest.approx(16.0)
    assert list(s.left_for_later) == [B.id] and "the export phase" in s.left_for_later[B.id]
    assert len(s.lines) == 1 and s.lines[0].startswith("re-plan after the export phase: ")
    assert "left for later: yolo26n at 640 (1 cell)" in s.lines[0] and "--resume --run-id r1" in s.lines[0]
    plan = read_env(s.run_config.run_dir)["plan"]
    assert plan["left_out"] == {WAIT_REPLAN: [B.id]} and plan["selected_ids"] == [A.id, C.id]
    assert plan["kind"] == "screen" and plan["replans"][0]["cells"] == [B.id]
    # within the budget now: a second check leaves nothing more
    assert replan_session.check(s, "timing_phase_done", 1.0) is None and len(s.lines) == 1


def test_a_run_within_its_budget_is_left_alone(tmp_path):
    s = FakeSession(tmp_path, budget_s=200.0, elapsed_s=100.0)  # 100 + 36 <= 200
    assert replan_session.check(s, "export_phase_done", 15.0, {}) is None
    assert not s.left_for_later and not s.lines and "plan" not in read_env(s.run_config.run_dir)


def test_a_workload_that_ran_is_never_left_even_when_it_ranks_lowest(tmp_path):
    s = FakeSession(tmp_path, budget_s=110.0, elapsed_s=100.0)  # 26 s over
    s.clock.pending.discard("w640")  # A and B ran
    s.clock.estimate.done("w640", 10.0)
    done = replan_session.check(s, "workload_done", "w640", 10.0, [])
    assert done is not None and done.cells == [C.id]  # the only one not started
    assert s.clock.workloads == 1 and "w320" not in s.clock.pending  # its workload will not run


def test_no_re_plan_without_a_budget_or_after_another_part(tmp_path):
    s = FakeSession(tmp_path, budget_s=10.0, elapsed_s=100.0)
    assert replan_session.check(s, "alone_done", "x", 1.0) is None  # not a re-plan point
    s.time_budget_s = None
    assert replan_session.check(s, "export_phase_done", 15.0, {}) is None and not s.lines


# -- the scenario phase within what is left --------------------------------------------------------------------------
@pytest.mark.parametrize(("elapsed_s", "expected"), [(90.0, 5.0), (70.0, 25.0), (0.0, 60.0)])
def test_the_scenario_phase_gets_what_the_budget_has_left_never_the_plans_share_beyond_it(
    tmp_path, monkeypatch, elapsed_s, expected
):
    budgets = []
    runner = SimpleNamespace(measure_decision=lambda cons, budget: budgets.append(budget))
    bench = SimpleNamespace(
        run_config=SimpleNamespace(scenario_phase=True, scenario_budget_s=60.0, run_dir=tmp_path),
        stopped=None,
        time_budget_s=100.0,
        t0=time.perf_counter() - elapsed_s,
        # the plan set 40 s aside for the phase: a late run (90 s of 100 gone) must not spend it past the budget
        clock=SimpleNamespace(scenario_phase_left=lambda: 40.0),
        runner=runner,
        report_constraints=None,
    )
    monkeypatch.setattr(plugin, "recorded_cells", lambda run_dir: {"x": "ok"})
    monkeypatch.setattr(plugin, "tick", lambda *a: None)
    plugin.run_scenario_phase(bench)
    # 100 s less the time so far less the end's 5% (5 s), never more than --scenario-budget (60 s)
    assert budgets == [pytest.approx(expected, abs=0.5)]
