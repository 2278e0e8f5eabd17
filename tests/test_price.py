"""The one estimator (harness.plan.price) on a small fake table, a fake history and a fake export cache: each source
wins where the documentation says, the cache hit drops the export, a cold plan prices every cell from the table for
its backend, size and shape, a cell the table lacks from its nearest entry scaled by work, and the machine's speed
scales each part as documented. Every figure here is invented (synthetic), never a measurement."""

from __future__ import annotations

import json

import pytest

from harness.core.axes import GFLOPS_640, Shape
from harness.core.cell import Cell
from harness.plan import durations, price
from harness.plan.estimate import compose

REF = {"python_s": 0.02, "compute_s": 0.03}  # the fake table's reference machine
RUN = "ref-run"


def cell(backend="onnxruntime", size="n", side=320, device="cpu", precision="fp32", batch=1) -> Cell:
    return Cell(size, "detect", "e2e", backend, device, Shape(side, side), batch, precision)


ORT, OV = cell(), cell("openvino")
ORT_X = cell(size="x", side=640)

#: parts at the reference: ORT is timed at its cap (floor 1 s below its 3 s), ORT_X at its floor
TABLE_CELLS = {
    "onnxruntime cpu fp32 n 320x320 b1": dict(backend="onnxruntime", device="cpu", precision="fp32", size="n",
        shape="320x320", batch=1, export=2.0, probe=3.0, load=0.5, timing=3.0, timing_floor=1.0, stages=2.0,
        scenarios=30.0, run=RUN),
    "onnxruntime cpu fp32 x 640x640 b1": dict(backend="onnxruntime", device="cpu", precision="fp32", size="x",
        shape="640x640", batch=1, export=12.0, probe=13.0, load=2.5, timing=11.0, timing_floor=11.0, stages=18.0,
        scenarios=0.0, run=RUN),
}  # fmt: skip
EXPONENTS = {"export": 0.25, "probe": 0.2, "load": 0.5, "timing": 0.0, "timing_floor": 0.5, "stages": 0.5}
FAMILY = dict(backend="(other)", size="n", shape="640x640", batch=1, export=4.0, probe=3.0, load=0.2, timing=3.0,
              timing_floor=2.0, stages=4.0, scenarios=0.0, run=RUN)  # fmt: skip


@pytest.fixture
def table(tmp_path) -> price.Table:
    doc = {
        "version": 1,
        "runs": [{"run_id": RUN, "machine_speed": REF}],
        "max_time_s": 3.0,
        "work_exponent": EXPONENTS,
        "cache_hit_s": 1.5,
        "scenarios_s": 30.0,
        "alone": {"dynamic": 20.0, "other": 0.0},
        "finish_s": 2.0,
        "families": {"other": FAMILY, "executorch": {**FAMILY, "backend": "(executorch)", "export": 20.0}},
        "cells": TABLE_CELLS,
    }
    path = tmp_path / "prices.yaml"
    path.write_text(json.dumps(doc))  # YAML reads JSON
    return price.Table.read(path)


def known(table, speed=REF, **kw) -> price.Known:
    return price.Known(table, speed=speed, **kw)


def test_a_cold_plan_prices_every_cell_from_the_table_for_its_backend_size_and_shape(table):
    prices = price.price_cells([ORT, ORT_X], known(table), scenario_cells=[ORT.id])
    assert {p.source for p in prices.values()} == {"plan"}
    t = TABLE_CELLS["onnxruntime cpu fp32 n 320x320 b1"]
    assert dict(prices[ORT.id].parts) == pytest.approx({k: t[k] for k in price.PARTS})  # the same machine
    assert "onnxruntime cpu fp32 n 320x320 b1" in prices[ORT.id].detail
    assert prices[ORT_X.id].parts["scenarios"] == 0.0  # not a scenario cell here
    # the cell's total: export and probe at the export phase's share, the rest whole
    assert prices[ORT.id].total(0.5) == pytest.approx((2.0 + 3.0) / 2 + 0.5 + 3.0 + 2.0 + 30.0)


def test_the_speed_factor_scales_each_part_as_documented(table):
    slower = {"python_s": 0.04, "compute_s": 0.06}  # 2x slower at Python and at compute
    p = price.price_cells([ORT, ORT_X], known(table, slower), scenario_cells=[ORT.id])
    n, x = TABLE_CELLS["onnxruntime cpu fp32 n 320x320 b1"], TABLE_CELLS["onnxruntime cpu fp32 x 640x640 b1"]
    for part in ("export", "probe", "load"):  # by the Python figure
        assert p[ORT.id].parts[part] == pytest.approx(2 * n[part])
    assert p[ORT.id].parts["stages"] == pytest.approx(2 * n["stages"])  # by the compute figure
    assert p[ORT.id].parts["scenarios"] == pytest.approx(n["scenarios"])  # wall-clock: not at all
    assert p[ORT.id].parts["timing"] == pytest.approx(3.0)  # ended by the cap: max(3, 1 x 2) = 3
    assert p[ORT_X.id].parts["timing"] == pytest.approx(2 * x["timing"])  # held up by its floor: x 2
    # the other way: a machine 2x faster halves the floor-bound timing, not the capped one
    faster = {"python_s": 0.01, "compute_s": 0.015}
    q = price.price_cells([ORT, ORT_X], known(table, faster))
    assert q[ORT.id].parts["timing"] == pytest.approx(3.0) and q[ORT.id].parts["export"] == pytest.approx(1.0)
    assert q[ORT_X.id].parts["timing"] == pytest.approx(x["timing"] / 2)
    # a figure not measured (null) is a factor of 1, and a factor stays within FACTOR_RANGE
    assert price.speed_factors(REF, {"python_s": None, "compute_s": 0.06}) == {
        "python_s": 1.0,
        "compute_s": 2.0,
    }
    assert price.speed_factors(REF, {"python_s": 2.0, "compute_s": 0.0003}) == {
        "python_s": price.FACTOR_RANGE[1], "compute_s": price.FACTOR_RANGE[0]}  # fmt: skip


def test_a_cell_the_table_lacks_is_priced_from_its_nearest_entry_scaled_by_work(table):
    s640 = cell(size="s", side=640)
    p = price.price_cells([s640], known(table))[s640.id]
    assert p.source == "plan" and "nearest" in p.detail
    # export and probe: the model's work (s is nearest n by GFLOPs: 20.7 vs 5.4 and 193.9)
    model = GFLOPS_640["s"] / GFLOPS_640["n"]
    assert p.parts["export"] == pytest.approx(2.0 * model ** EXPONENTS["export"])
    assert p.parts["probe"] == pytest.approx(3.0 * model ** EXPONENTS["probe"])
    # the rest: the entry nearest in GFLOPs x pixels (x at 640: 193.9, against n at 320: 1.35)
    full = GFLOPS_640["s"] / GFLOPS_640["x"]
    assert p.parts["stages"] == pytest.approx(18.0 * full ** EXPONENTS["stages"])
    assert p.parts["load"] == pytest.approx(2.5 * full ** EXPONENTS["load"])
    # its timing: the x entry's was held up by its floor (11 s): scaled by work as the floor (3.6 s), above the
    # time cap's 3 s
    assert p.parts["timing"] == pytest.approx(11.0 * full ** EXPONENTS["timing_floor"])
    # yolo26n int8 at 640 (no int8 entry: the nearest of any precision, n at 320): ended by the cap there (3 s),
    # its floor 1 s x 4 ** 0.5 = 2 s stays under the cap
    n640 = cell(side=640, batch=1, precision="int8")
    assert price.price_cells([n640], known(table))[n640.id].parts["timing"] == pytest.approx(3.0)
    # a backend the table lacks: its family's default at yolo26n 640, scaled by work
    et = cell("executorch-xnnpack", size="n", side=640)
    q = price.price_cells([et], known(table))[et.id]
    assert q.parts["export"] == pytest.approx(20.0) and "family default executorch" in q.detail


def synthetic_history(*records) -> durations.History:
    return durations.history_from_runs([("night-1", "2026-12-01T01:00:00+00:00", list(records), {})])


def rec(c: Cell, *, load_s=10.0, export_s=4.0, cache_hit=False, duration_s=14.0) -> dict:
    """The fields of a record the estimator reads (synthetic)."""
    return {
        "synthetic": True, "cell_id": c.id, "status": "ok", "backend": c.backend, "device": c.device,
        "size": c.size, "height": c.shape.height, "width": c.shape.width, "batch": c.batch,
        "cache_hit": cache_hit, "export_s": export_s, "load_s": load_s, "started_at": "2026-12-01T01:00:00+00:00",
        "duration_s": duration_s,
    }  # fmt: skip


def test_history_and_the_export_cache_price_a_plan_as_documented(table):
    # one run of one cell: 4 s of export at the export share 0.5 + 10 s of load = its 12 s wall
    hist = synthetic_history(rec(ORT, duration_s=12.0))
    p = price.price_cells([ORT, OV], known(table, history=hist))
    assert p[ORT.id].source == "history" and p[ORT.id].parts["load"] == pytest.approx(10.0)
    assert p[ORT.id].parts["export"] == pytest.approx(4.0) and p[ORT.id].total(0.5) == pytest.approx(12.0)
    assert p[OV.id].source == "plan"  # no openvino cell measured: the table's family default
    # the export cache holds ORT now: no export, the table's cache-hit cost; the rest still from the history
    cached = price.price_cells([ORT, OV], known(table, history=hist, cached=frozenset({ORT.id, OV.id})))
    assert cached[ORT.id].source == "history" and "export cached" in cached[ORT.id].detail
    assert cached[ORT.id].parts["export"] == pytest.approx(1.5) and cached[ORT.id].parts["load"] == 10.0
    assert cached[OV.id].source == "export cache" and cached[OV.id].parts["export"] == pytest.approx(1.5)
    assert cached[OV.id].parts["probe"] == 0.0
    # the other way: --refresh-cache exports afresh, whatever the cache holds
    again = price.price_cells([ORT], known(table, history=hist, cached=frozenset({ORT.id}), refresh=True))
    assert again[ORT.id].parts["export"] == pytest.approx(4.0)
    # a cell of the same backend and device with no record of its own: the nearest measured one, scaled by work
    big = cell(size="m", side=640)
    near = price.price_cells([big], known(table, history=hist))[big.id]
    assert near.source == "nearest" and ORT.id in near.detail
    full = GFLOPS_640["m"] / (GFLOPS_640["n"] / 4)
    assert near.parts["load"] == pytest.approx(10.0 * full ** EXPONENTS["load"])
    assert near.parts["export"] == pytest.approx(
        4.0 * (GFLOPS_640["m"] / GFLOPS_640["n"]) ** EXPONENTS["export"]
    )


def test_recorded_timelines_win_over_the_history_in_their_own_cache_state(table):
    hist = synthetic_history(rec(ORT, duration_s=12.0))
    recorded = durations.Recorded()
    recorded.add({"run_id": "t1", "prep_s": {ORT.id: (7.0, False)},
                  "cell_s": {ORT.id: {"load": 1.0, "timing": 3.0, "timing_floor": 1.0, "stages": 5.0}}})  # fmt: skip
    p = price.price_cells([ORT], known(table, history=hist, recorded=recorded))[ORT.id]
    assert p.source == "recorded" and p.parts["export"] == 7.0 and p.parts["stages"] == 5.0
    # a cache hit now is not the fresh export the timeline recorded: the cache's cost for the export part
    hit = price.price_cells([ORT], known(table, recorded=recorded, cached=frozenset({ORT.id})))[ORT.id]
    assert hit.source == "recorded" and hit.parts["export"] == pytest.approx(1.5)
    # an older timeline that recorded workloads, not cells: the workload's figures split over its cells
    old = durations.Recorded()
    old.add({"run_id": "t0", "timing_s": {"w": 8.0}, "workload_s": {"w": 6.0}})
    q = price.price_cells([ORT, OV], known(table, recorded=old), label_of=lambda c: "w")
    assert {c: (x.source, x.parts["timing"], x.parts["stages"]) for c, x in q.items()} == {
        ORT.id: ("recorded", 4.0, 3.0), OV.id: ("recorded", 4.0, 3.0)}  # fmt: skip


def test_a_dynamic_probe_is_priced_as_a_cell_run_alone(table):
    dyn = Cell("n", "detect", "e2e", "onnxruntime", "cpu", Shape(0, 0, dynamic=True))
    p = price.price_cells([dyn], known(table, {"python_s": 0.04, "compute_s": 0.03}))[dyn.id]
    assert p.source == "plan" and p.total(0.5) == pytest.approx(2 * 20.0)  # alone.dynamic at 2x the Python
    recorded = durations.Recorded(alone_s={dyn.id: 33.0})
    assert price.price_cells([dyn], known(table, recorded=recorded))[dyn.id].total(0.5) == 33.0


def test_a_skip_costs_nothing_and_the_costs_are_the_totals(table):
    gpu = cell("tensorrt", device="cuda")
    p = price.price_cells([ORT, gpu], known(table), skips=[gpu.id])
    assert p[gpu.id].source == "skip" and p[gpu.id].total(0.5) == 0.0
    costs = price.cell_costs(p, 0.5)
    assert costs[ORT.id].seconds == pytest.approx(p[ORT.id].total(0.5)) and costs[ORT.id].source == "plan"


def test_split_own_gives_the_scenario_cells_what_the_stages_leave():
    split = price.split_own(40.0, {"a": 2.0, "b": 2.0, "c": 4.0}, ["a", "b"])
    assert split == {"a": {"stages": 2.0, "scenarios": 16.0}, "b": {"stages": 2.0, "scenarios": 16.0},
                     "c": {"stages": 4.0, "scenarios": 0.0}}  # fmt: skip
    # without scenarios: in proportion to the guesses; guesses above the total are brought down to it
    assert price.split_own(8.0, {"a": 1.0, "b": 3.0}, []) == {
        "a": {"stages": 2.0, "scenarios": 0.0}, "b": {"stages": 6.0, "scenarios": 0.0}}  # fmt: skip
    assert price.split_own(4.0, {"a": 4.0, "b": 4.0}, ["a"])["a"] == {"stages": 2.0, "scenarios": 0.0}


def test_the_estimate_of_the_run_the_table_came_from_is_within_its_wall_and_not_on_a_slower_machine(table):
    """The verdict of docs/options.md's table, on the fake table: its own run priced back (every part as it was)
    is within 1.3x of that run's wall; the same plan on a machine measured 2x slower is priced about 2x, out of
    1.3x of the reference's wall (the speed reaches the estimate)."""
    cells = [ORT, ORT_X]
    wl = {"w320": [ORT], "w640": [ORT_X]}
    wall = (2 + 3 + 12 + 13) * 0.5 + (0.5 + 3 + 2.5 + 11) + (2 + 30 + 18) + 2.0  # the run the table came from

    def estimate(speed) -> float:
        prices = price.price_cells(cells, known(table, speed), scenario_cells=[ORT.id])
        est = compose(wl, prices, share=0.5, episodes=3, finish=price.finish_price(known(table, speed)))
        return est.remaining_s()

    assert 1 / 1.3 <= estimate(REF) / wall <= 1.3
    slow = estimate({"python_s": 0.04, "compute_s": 0.06}) / wall
    assert slow > 1.3 and slow < 2.0  # the capped timing and the scenarios do not double
