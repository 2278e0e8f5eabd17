"""The nightly plan within a time budget (harness.plan.budget), on a fake history: costs and last-measured dates
are invented here (synthetic), never measurements."""

from __future__ import annotations

import random

import pytest

from harness.core.axes import SelectionError
from harness.plan.budget import (
    GROUP_PRIORITY,
    GROUP_ROTATION,
    WAIT_FULL,
    WAIT_SLICE,
    merge_plans,
    parse_budget,
    plan_night,
)
from harness.plan.price import CellCost


def costs_of(seconds: dict[str, float]) -> dict[str, CellCost]:
    return {c: CellCost(s, "history", "synthetic") for c, s in seconds.items()}


def night(n: int) -> str:
    return f"2026-12-{n + 1:02d}T01:23:00+00:00"


@pytest.mark.parametrize(
    ("text", "seconds"), [("6h", 21600), ("90m", 5400), ("1h30m", 5400), ("45min", 2700), ("3600", 3600)]
)
def test_budget_parses(text, seconds):
    assert parse_budget(text) == seconds


@pytest.mark.parametrize("text", ["six hours", "6x", "0h", "h", "-1h"])
def test_bad_budget_is_one_error_line(text):
    with pytest.raises(SelectionError) as e:
        parse_budget(text)
    assert "--time-budget" in str(e.value) and "\n" not in str(e.value)


def test_budget_selects_cells_whose_estimates_sum_within_it():
    rng = random.Random(1)
    seconds = {f"c{i:03d}": rng.uniform(5, 300) for i in range(200)}
    plan = plan_night(list(seconds), costs_of(seconds), 3600)
    total = sum(seconds[c] for c in plan.selected)
    assert total <= 3600
    assert 0 < len(plan.selected) < 200
    assert sorted(plan.selected + plan.left_out[WAIT_SLICE]) == sorted(seconds)  # every cell is in the plan
    # the other way: a budget above the whole profile takes every cell and leaves none out
    big = plan_night(list(seconds), costs_of(seconds), total_s := sum(seconds.values()) + 1)
    assert len(big.selected) == 200 and not big.left_out and big.selected_s <= total_s


def test_regressed_cell_is_taken_before_a_rotating_one():
    seconds = {"old": 100.0, "regressed": 100.0}
    last = {"old": night(0), "regressed": night(5)}
    plan = plan_night(["old", "regressed"], costs_of(seconds), 150, priority={"regressed": "regressed"},
                      last_measured=last)  # fmt: skip
    assert plan.selected == ["regressed"] and plan.groups[GROUP_PRIORITY]["cells"] == 1
    # the other way: with nothing regressed, the rotation takes the cell measured longest ago
    plan = plan_night(["old", "regressed"], costs_of(seconds), 150, last_measured=last)
    assert plan.selected == ["old"] and GROUP_PRIORITY not in plan.groups


def test_cell_measured_last_night_waits_for_an_older_one():
    seconds = {"a": 100.0, "b": 100.0}
    plan = plan_night(["a", "b"], costs_of(seconds), 150, last_measured={"a": night(9), "b": night(2)})
    assert plan.selected == ["b"] and plan.left_out[WAIT_SLICE] == ["a"]
    # the other way round: now "b" was measured last night and "a" is the older
    plan = plan_night(["a", "b"], costs_of(seconds), 150, last_measured={"a": night(2), "b": night(9)})
    assert plan.selected == ["a"] and plan.left_out[WAIT_SLICE] == ["b"]


def test_every_cell_of_a_26400_cell_plan_is_covered_within_k_nights():
    rng = random.Random(7)
    cells = [f"cell{i:05d}" for i in range(26_400)]
    # about half the cells a skip here (no cost), the others 5 to 40 s (the "even 20 s a cell")
    seconds = {c: rng.choice([0.0, rng.uniform(5, 40)]) for c in cells}
    costs = costs_of(seconds)
    budget = 6 * 3600.0
    last: dict[str, str] = {}
    first = plan_night(cells, costs, budget, last_measured=last)
    k = first.period_nights
    assert k is not None and k > 1
    assert f"covered every {k} nights at 6 h" in first.period_line()
    covered: set[str] = set()
    for n in range(k):
        plan = first if n == 0 else plan_night(cells, costs, budget, last_measured=last)
        assert plan.selected_s <= budget
        if n < 2:
            assert plan.rotation["position"] == f"night {n + 1} of {k}"
        for c in plan.selected:
            last[c] = night(n)
        covered.update(plan.selected)
    assert covered == set(cells)
    # the other way: fewer nights than the profile's seconds over the budget cannot cover it
    runnable = sum(seconds.values())
    short = int(runnable // budget) - 1
    assert short >= 1
    last, covered = {}, set()
    for n in range(short):
        plan = plan_night(cells, costs, budget, last_measured=last)
        for c in plan.selected:
            last[c] = night(n)
        covered.update(plan.selected)
    assert covered != set(cells)


def test_budget_too_small_for_the_regressed_cells_says_so_and_takes_the_most_important_first():
    seconds = {"missing": 100.0, "failed": 100.0, "regressed": 100.0, "other": 10.0}
    prio = {"missing": "missing", "failed": "failed", "regressed": "regressed"}
    plan = plan_night(list(seconds), costs_of(seconds), 250, priority=prio)
    assert plan.warning is not None and "\n" not in plan.warning
    assert "too small for the regressed, failed and missing cells alone" in plan.warning
    assert [line for line in plan.lines() if "WARNING" in line] == [f"plan: WARNING: {plan.warning}"]
    # the two most important; "missing" waits; the 50 s left go to the rotation
    assert plan.selected == ["failed", "regressed", "other"]
    assert plan.left_out == {WAIT_FULL: ["missing"]}
    # the other way: a budget that holds them says nothing and takes them all
    plan = plan_night(list(seconds), costs_of(seconds), 400, priority=prio)
    assert plan.warning is None and set(plan.selected) == set(seconds)


def test_plan_for_env_json_lists_every_left_out_cell_with_its_reason():
    seconds = {"a": 10.0, "b": 10.0, "c": 5000.0, "skip": 0.0}
    plan = plan_night(list(seconds), costs_of(seconds), 15)
    env = plan.to_env()
    assert env["selected_ids"] == ["a", "skip"] and env["selected"] == 2
    assert sorted(c for ids in env["left_out"].values() for c in ids) == ["b", "c"]
    assert any(reason.startswith("its estimate alone exceeds the budget") for reason in env["left_out"])
    assert env["rotation"]["never_measured"] == 2  # a and b; c can never fit, the skip costs nothing
    assert GROUP_ROTATION in env["groups"] and env["period_nights"] == 4  # 20 s over (15 - 10) s


def test_sessions_of_one_run_unite_their_plans():
    """GPU shards then the CPU cells (--resume) each plan their part; env.json keeps one plan of the run."""
    gpu = plan_night(["g1", "g2"], costs_of({"g1": 10.0, "g2": 10.0}), 15).to_env()
    cpu = plan_night(["c1", "c2"], costs_of({"c1": 10.0, "c2": 10.0}), 25).to_env()
    first = merge_plans(None, gpu)
    run = merge_plans(first, cpu)
    assert run["selected_ids"] == ["g1", "c1", "c2"] and run["selected"] == 3
    assert run["left_out"] == {WAIT_SLICE: ["g2"]}
    assert [s["selected"] for s in run["sessions"]] == [1, 2]
    # the other way: a later session that selects a cell an earlier one left out takes it out of left_out
    again = merge_plans(run, plan_night(["g2"], costs_of({"g2": 10.0}), 15).to_env())
    assert "g2" in again["selected_ids"] and again["left_out"] == {}
