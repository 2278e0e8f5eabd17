"""The main job's plan within a time budget (harness.plan.screen_budget): the default profile's cells on a fake
price table (every cell's seconds invented here, never measured), so what is taken is deterministic."""

from __future__ import annotations

import pytest

from harness.core.axes import SelectionError
from harness.plan.budget import GROUP_FREE
from harness.plan.matrix import Selection, build
from harness.plan.price import CellCost
from harness.plan.price_table import Entry, Table
from harness.plan.screen_budget import (
    DEFAULT_BUDGET,
    GROUP_LADDER,
    GROUP_REST,
    GROUP_SCREEN,
    WAIT_BUDGET,
    TimeBudget,
    about,
    group_of,
    in_words,
    plan_screen,
    speed_rank,
    suggested_budget,
    time_budget,
)
from harness.report.header import integrity_notes

CPU = ("openvino", "onnxruntime", "executorch-xnnpack", "torch-eager")


def default_cells():
    """The default profile's CPU cells (no export-only target, no GPU): 4 backends x 8 fp32 workloads + 3 int8."""
    planned = build("default", Selection())
    return [p.cell for p in planned if not p.excluded and p.cell.backend in CPU and p.cell.device == "cpu"]


def fake_costs(cells, each: float = 30.0, big: dict | None = None) -> dict[str, CellCost]:
    """Every cell `each` seconds; yolo26{size} cells as `big` says."""
    big = big or {}
    return {c.id: CellCost(big.get(c.size, each), "plan", "fake") for c in cells}


def fake_table(p50: dict[str, float]) -> Table:
    """A table whose only figures are each backend's yolo26n 640 fp32 p50 (its speed order)."""
    cells = {
        c.backend: c
        for c in default_cells()
        if c.size == "n" and c.shape.height == 640 and c.precision == "fp32"
    }
    return Table(entries=[Entry(b, cells[b], {}, "fake", ms) for b, ms in p50.items()])


RANK = speed_rank(fake_table({"openvino": 20.0, "onnxruntime": 22.0, "executorch-xnnpack": 24.0,
                              "torch-eager": 40.0}), default_cells())  # fmt: skip


def test_speed_rank_is_the_tables_p50_order_and_keeps_unknown_backends_after():
    cells = default_cells()
    rank = speed_rank(fake_table({"torch-eager": 10.0, "openvino": 20.0}), cells)
    assert rank[("torch-eager", "cpu")] == 0 and rank[("openvino", "cpu")] == 1
    assert {rank[("onnxruntime", "cpu")], rank[("executorch-xnnpack", "cpu")]} == {2, 3}


def test_plan_under_a_budget_keeps_the_first_screen_cells_first():
    cells = default_cells()
    costs = fake_costs(cells)
    screen = [c for c in cells if group_of(c) == GROUP_SCREEN]
    ladder = [c for c in cells if group_of(c) == GROUP_LADDER]
    assert len(screen) == 4 * 2 + 3 and len(ladder) == 4 * 4  # n at 640 and 320, int8; s m l x at 640
    # room for the first screen and 5 more cells: the fastest backend's ladder (s, m, l, x), then the next's s
    plan = plan_screen(cells, costs, (len(screen) + 5) * 30.0 + 10.0, RANK, reserve_s=10.0)
    assert set(plan.selected) >= {c.id for c in screen}
    ladder_taken = [c for c in ladder if c.id in plan.selected]
    assert [(c.backend, c.size) for c in sorted(ladder_taken, key=lambda c: (RANK[(c.backend, c.device)],
            "smlx".index(c.size)))] == [("openvino", s) for s in "smlx"] + [("onnxruntime", "s")]  # fmt: skip
    assert not any(group_of(c) == GROUP_REST and c.id in plan.selected for c in cells)
    assert plan.left_out[WAIT_BUDGET] and plan.warning is None
    line = plan.lines()[0]
    budget = in_words((len(screen) + 5) * 30.0 + 10.0)
    assert line.startswith(f"plan: {len(screen) + 5} of {len(cells)} cells in {budget}; left for later: ")
    assert line.endswith(f"(about {about((len(cells) - len(screen) - 5) * 30)} more): --time-budget "
                         f"{suggested_budget(len(cells) * 30 + 10)}, or --time-budget none")  # fmt: skip
    assert "yolo26n at 1280 (4 cells)" in line
    # the other way: a budget that holds every cell takes the same cells as no budget, and leaves none out
    whole = plan_screen(cells, costs, len(cells) * 30.0 + 10.0, RANK, reserve_s=10.0)
    assert whole.selected == [c.id for c in cells] and not whole.left_out
    assert "every cell fits" in whole.lines()[0] and len(whole.lines()) == 1


def test_the_rest_goes_by_what_each_adds_per_second():
    cells = default_cells()
    costs = fake_costs(cells)
    rest = [c for c in cells if group_of(c) == GROUP_REST]
    costs[rest[-1].id] = CellCost(5.0, "plan", "fake: the cheapest of the rest")
    need = sum(costs[c.id].seconds for c in cells if group_of(c) != GROUP_REST)
    plan = plan_screen(cells, costs, need + 5.0, RANK)
    assert [c.id for c in rest if c.id in plan.selected] == [rest[-1].id]


def test_a_budget_too_small_for_the_first_screen_says_so_in_one_line_and_runs_what_fits():
    cells = default_cells()
    costs = fake_costs(cells)
    plan = plan_screen(cells, costs, 95.0, RANK)  # three 30 s cells fit
    warnings = [line for line in plan.lines() if "WARNING" in line]
    assert (
        len(warnings) == 1
        and "too small for the first-screen cells (11 cells, about 5 min 30 s)" in warnings[0]
    )
    taken = [c for c in cells if c.id in plan.selected]
    assert len(taken) == 3 and all(group_of(c) == GROUP_SCREEN and c.backend == "openvino" for c in taken)


def test_cells_already_recorded_cost_nothing_so_a_larger_budget_takes_only_the_missing():
    """What --resume does with a larger budget: the cells the run holds are priced at nothing (free, always taken:
    the runner skips them as recorded), the budget goes to the cells still missing."""
    cells = default_cells()
    costs = fake_costs(cells)
    first = plan_screen(cells, costs, 600.0, RANK)
    done = set(first.selected)
    resumed = {
        cid: CellCost(0.0, "skip", "already recorded") if cid in done else c for cid, c in costs.items()
    }
    second = plan_screen(cells, resumed, 1e6, RANK)
    assert second.selected == [c.id for c in cells] and not second.left_out
    assert second.groups[GROUP_FREE]["cells"] == len(done)
    assert second.selected_s == pytest.approx(30.0 * (len(cells) - len(done)))


def test_time_budget_option_defaults_to_the_main_jobs_budget_on_the_default_profile_only():
    def opt_of(value):
        return lambda name: value if name == "time_budget" else None

    assert time_budget(opt_of(None), "default") == TimeBudget(DEFAULT_BUDGET, 900.0, True, "screen")
    assert time_budget(opt_of("none"), "default").seconds is None
    assert time_budget(opt_of("45m"), "default") == TimeBudget("45m", 2700.0, False, "screen")
    assert (
        time_budget(opt_of(None), "nightly").seconds is None
    )  # the nightly and quick profiles: only if given
    assert time_budget(opt_of(None), "default", worker=True).seconds is None
    # a narrowed selection is a choice, run whole (the tests' tiny suite runs, .ci/run's, the GPU kit's)
    assert time_budget(opt_of(None), "default", Selection(sizes=("n",))).seconds is None
    assert time_budget(opt_of(None), "default", Selection()).seconds == 900.0
    with pytest.raises(SelectionError):
        time_budget(opt_of("soon"), "default")


def test_the_reports_first_screen_names_the_cells_left_for_later_never_as_failures():
    cells = default_cells()
    plan = plan_screen(cells, fake_costs(cells), 600.0, RANK)
    env = {"run_id": "r1", "plan": {**plan.to_env(), "budget": "15m (the main job's default)"}}
    (note,) = integrity_notes(env, [])
    n = len(plan.left_out[WAIT_BUDGET])
    assert note.startswith(
        f"{n} cell(s) not run within the budget 15m (the main job's default) (not failures: "
    )
    assert note.endswith(f"`--resume --run-id r1 --time-budget {plan.suggested}` runs them)")
    assert "failed" not in note
    # the other way: a plan that left nothing out, and a night's plan (its own coverage section), add no note
    whole = plan_screen(cells, fake_costs(cells), 1e6, RANK)
    assert integrity_notes({"run_id": "r1", "plan": whole.to_env()}, []) == []
    night = {**plan.to_env(), "kind": None}
    assert integrity_notes({"run_id": "r1", "plan": night}, []) == []
