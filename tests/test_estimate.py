"""The remaining-time estimate (harness.plan.estimate) on hand-made prices and timings: the run's phases composed
from its cells' parts, recorded stage times win, the export cache decides hit or fresh export, parts done leave the
sum and rescale what is left by how the run is going. Every figure is invented (synthetic)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.execute.workload import workload_label
from harness.plan import estimate as est
from harness.plan import price
from harness.plan.price import Price


def cell(backend: str, size: str = "n", side: int = 320) -> Cell:
    return Cell(size, "detect", "e2e", backend, "cpu", Shape(side, side))


ORT, OV, EAGER = cell("onnxruntime"), cell("openvino"), cell("torch-eager")
W320 = workload_label(ORT)
BIG = cell("onnxruntime", "x", 640)
W640 = workload_label(BIG)
DYN = Cell("n", "detect", "e2e", "onnxruntime", "cpu", Shape(0, 0, dynamic=True))


def parts(export=0.0, probe=0.0, load=0.0, timing=0.0, stages=0.0, scenarios=0.0) -> dict[str, float]:
    return dict(export=export, probe=probe, load=load, timing=timing, stages=stages, scenarios=scenarios)


def table() -> price.Table:
    """A table of one family default (every cell priced from it: 10 s export, 2 s probe, 1 s load, 3 s timing,
    4 s stages at yolo26n 640; no work scaling), 20 s for a dynamic probe, 5 s for the end."""
    entry = price.Entry("family default other", Cell("n", "detect", "e2e", "(other)", "", Shape(640, 640)),
                        parts(10.0, 2.0, 1.0, 3.0, 4.0), None)  # fmt: skip
    return price.Table(families={"other": entry}, alone={"dynamic": 20.0, "other": 0.1}, finish_s=5.0,
                       cache_hit_s=1.0, scenarios_s=30.0)  # fmt: skip


def timeline(run_id: str, **fields) -> dict:
    return {"version": est.TIMELINE_VERSION, "run_id": run_id, **fields}


def entry(cache: Path, c: Cell, export_s: float = 12.0) -> None:
    d = cache / "exports" / f"{c.id}-0123456789ab"
    d.mkdir(parents=True)
    (d / "meta.json").write_text(json.dumps({"format": 2, "outcome": {"status": "ok", "export_s": export_s}}))


def test_the_phases_are_composed_from_the_cells_parts():
    prices = {
        ORT.id: Price(parts(4.0, 2.0, 1.0, 3.0, 2.0, 30.0), "plan"),
        OV.id: Price(parts(2.0, 2.0, 1.0, 3.0, 2.0), "plan"),
        BIG.id: Price(parts(5.0, 3.0, 2.0, 10.0, 15.0), "history"),
    }
    alone = {DYN.id: Price({"load": 20.0}, "plan")}
    e = est.compose({W320: [ORT, OV], W640: [BIG]}, prices, share=0.5, episodes=3, alone=alone,
                    finish=Price({"stages": 5.0}, "plan"))  # fmt: skip
    p = e.parts
    assert p[est.EXPORT_PHASE].seconds == pytest.approx((6 + 4 + 8) * 0.5)  # the sum at the share...
    assert p[est.TIMING_PHASE].seconds == pytest.approx(4 + 4 + 12)  # loads and timings
    assert p[W320].seconds == pytest.approx(2 + 30 + 2) and p[W320].fixed == pytest.approx(30.0)  # scenarios
    assert p[W640].seconds == pytest.approx(15.0) and p[W640].source == "history"
    assert p[DYN.id].seconds == 20.0 and p[est.FINISH].seconds == 5.0
    assert e.remaining_s() == pytest.approx(9 + 20 + 34 + 15 + 20 + 5)
    assert e.sources() == {"plan": 2, "history": 1}
    # ...never less than the longest single export: 4 workers' share would give 4.5 s, BIG's own takes 8 s
    e4 = est.compose({W640: [BIG], W320: [ORT, OV]}, prices, share=0.25, episodes=3)
    assert e4.parts[est.EXPORT_PHASE].seconds == pytest.approx(8.0)


def test_one_episode_times_each_workload_in_its_own_test():
    prices = {
        ORT.id: Price(parts(1.0, 1.0, 1.0, 3.0, 2.0), "plan"),
        OV.id: Price(parts(1.0, 1.0, 1.0, 3.0, 2.0), "plan"),
    }
    e = est.compose({W320: [ORT, OV]}, prices, share=0.5, episodes=1)
    assert est.TIMING_PHASE not in e.parts
    assert e.parts[W320].seconds == pytest.approx(2 * (1 + 3 + 2))  # its loads and timing, then its stages


def test_a_done_part_rescales_what_is_left_but_not_the_scenarios():
    prices = {ORT.id: Price(parts(40.0, 0.0, 1.0, 9.0, 10.0, 30.0), "plan")}
    e = est.compose({W320: [ORT]}, prices, share=1.0, episodes=3, finish=Price({"stages": 10.0}, "plan"))
    assert e.remaining_s() == pytest.approx(40 + 10 + 40 + 10)
    e.done(est.EXPORT_PHASE, 60.0)  # 1.5x its estimate
    assert e.ratio() == pytest.approx(1.5)
    # the timing phase (10), the workload's stages (10) and the end (10) x 1.5; its scenarios (30) as they are
    assert e.remaining_s() == pytest.approx(1.5 * 30 + 30)
    # the other way: a run going faster than priced is expected to stay so
    f = est.compose({W320: [ORT]}, prices, share=1.0, episodes=3)
    f.done(est.EXPORT_PHASE, 30.0)
    assert f.ratio() == pytest.approx(0.75) and f.remaining_s() == pytest.approx(0.75 * 20 + 30)
    # within RESCALE_RANGE; and nothing rescaled before RESCALE_MIN_S of estimate are done
    g = est.compose({W320: [ORT]}, prices, share=1.0, episodes=3)
    g.done(est.EXPORT_PHASE, 4000.0)
    assert g.ratio() == est.RESCALE_RANGE[1]
    small = {ORT.id: Price(parts(5.0, 0.0, 1.0, 9.0, 10.0), "plan")}
    h = est.compose({W320: [ORT]}, small, share=1.0, episodes=3)
    h.done(est.EXPORT_PHASE, 15.0)
    assert h.ratio() == 1.0 and h.remaining_s() == pytest.approx(20.0)
    h.done(W320)  # done without a figure: it leaves the sum, nothing else
    assert h.remaining_s() == pytest.approx(10.0)


def test_recorded_stage_times_price_the_whole_run(tmp_path):
    rec = est.Recorded()
    rec.add(
        timeline(
            "w1",
            prep_s={c.id: (4.0, True) for c in (ORT, OV, EAGER)},
            parallelism=0.5,
            timing_s={W320: 30.0},
            workload_s={W320: 21.0},
            finish_s=3.0,
        )
    )
    for c in (ORT, OV, EAGER):
        entry(tmp_path, c)  # on disk: a cache hit, as the recorded run had
    known = price.Known(table(), recorded=rec, cached=frozenset(price_cached(tmp_path)))
    e = est.estimate({W320: [ORT, OV, EAGER]}, [], known, workers=2, episodes=3)
    assert {k: p.source for k, p in e.parts.items()} == {
        est.EXPORT_PHASE: "recorded", est.TIMING_PHASE: "recorded", W320: "recorded", est.FINISH: "recorded",
    }  # fmt: skip
    # export phase: 3 x 4 s at the recorded parallelism 0.5 = 6 s; then 30 + 21 + 3
    assert e.remaining_s() == pytest.approx(6.0 + 30.0 + 21.0 + 3.0)
    e.done(est.EXPORT_PHASE)
    e.done(est.TIMING_PHASE)
    assert e.remaining_s() == pytest.approx(24.0)


def price_cached(cache: Path) -> set[str]:
    from harness.plan.durations import cached_cells

    return cached_cells(cache)


def test_the_cache_decides_hit_or_fresh_export(tmp_path):
    """A recorded fresh export does not price a cache hit, nor the other way round."""
    rec = est.Recorded()
    rec.add(timeline("cold", prep_s={ORT.id: (40.0, False)}))

    def prep(**kw) -> tuple[float, str]:
        p = price.price_cells([ORT], price.Known(table(), recorded=rec, **kw))[ORT.id]
        return p.prep_s(), p.detail

    assert prep()[0] == 40.0  # no entry now either: as recorded
    entry(tmp_path, ORT, export_s=35.0)
    hit = prep(cached=frozenset(price_cached(tmp_path)))
    assert hit[0] == 1.0 and "export cached" in hit[1]  # an entry now: a hit (the table's 1 s), not 40 s
    fresh = price.price_cells([OV], price.Known(table(), entry_export_s={OV.id: 35.0}))[OV.id]
    assert fresh.parts["export"] == 35.0  # --refresh-cache: the stale entry's export time


def test_an_entry_of_another_cell_is_not_this_cells(tmp_path):
    entry(tmp_path, ORT)
    longer = Cell("n", "detect", "e2e", "onnxruntime", "cpu", Shape(320, 320), precision="int8")
    remedy = tmp_path / "exports" / f"{OV.id}-opset17-0123456789ab"  # a remedy's entry: options in the name
    remedy.mkdir(parents=True)
    (remedy / "meta.json").write_text("{}")
    assert est.cache_entry(tmp_path, OV.id) is None
    assert est.cache_entry(tmp_path, ORT.id) is not None
    assert est.cache_entry(tmp_path, longer.id) is None
    assert est.cache_entry(tmp_path, ORT.id[:-5]) is None  # a prefix of the id is not the cell
    assert price_cached(tmp_path) == {ORT.id, f"{OV.id}-opset17"}  # the remedy's is another id


def test_the_plan_prices_what_no_run_recorded():
    e = est.estimate({W320: [ORT, OV], W640: [BIG]}, [DYN], price.Known(table()), workers=2, episodes=3,
                     scenario_cells=[BIG.id])  # fmt: skip
    assert {p.source for p in e.parts.values()} == {"plan"}
    assert e.parts[W640].seconds >= 30.0  # the scenarios of its scenario cell
    assert e.parts[DYN.id].seconds == 20.0 and e.parts[est.FINISH].seconds == 5.0


def test_cells_that_cannot_run_here_cost_nothing():
    gpu = Cell("n", "detect", "e2e", "tensorrt", "cuda", Shape(320, 320))
    label = workload_label(gpu)
    k = price.Known(table())
    without = est.estimate({W320: [ORT]}, [], k, workers=2, episodes=3)
    e = est.estimate(
        {W320: [ORT], label: [gpu]}, [], k, workers=2, episodes=3, cannot_run=lambda c: c.device == "cuda"
    )
    assert label not in e.parts and e.remaining_s() == pytest.approx(without.remaining_s())
    counted = est.estimate({W320: [ORT], label: [gpu]}, [], k, workers=2, episodes=3)  # the other way
    assert counted.remaining_s() > without.remaining_s() + 5.0


def test_newest_timeline_wins_own_run_and_bad_files_left_out(tmp_path):
    for i, (run_id, s) in enumerate([("old", 50.0), ("new", 20.0), ("this", 1.0)]):
        d = tmp_path / run_id
        d.mkdir()
        (d / est.TIMELINE).write_text(json.dumps(timeline(run_id, workload_s={W320: s}, alone_s={run_id: s})))
        os.utime(d / est.TIMELINE, (1000 + i, 1000 + i))
    (tmp_path / "torn").mkdir()
    (tmp_path / "torn" / est.TIMELINE).write_text("{not json")
    rec = est.read_recorded(tmp_path, exclude="this")
    assert rec.workload_s == {W320: 20.0}  # the newer run's time, not the older one's, never this run's own
    assert set(rec.alone_s) == {"old", "new"}  # the older run still prices what the newer did not record
    assert rec.runs == ["new", "old"]


def test_fmt_duration():
    assert [est.fmt_duration(s) for s in (4.4, 75, 3725, -3)] == ["4 s", "1 min 15 s", "1 h 02 min", "0 s"]


def test_a_cell_traced_on_a_fake_cuda_device_costs_its_export_alone():
    gpu = Cell("n", "detect", "e2e", "aoti", "cuda", Shape(320, 320))
    label = workload_label(gpu)
    k = price.Known(table())
    without = est.estimate({W320: [ORT]}, [], k, workers=1, episodes=3)
    traced = est.estimate(
        {W320: [ORT], label: [gpu]}, [], k, workers=1, episodes=3,
        cannot_run=lambda c: c.device == "cuda", traced=lambda c: c.device == "cuda",
    )  # fmt: skip
    p = traced.prices[gpu.id]
    assert p.source == "plan" and "fake CUDA device" in p.detail
    assert p.parts["export"] == 10.0 and sum(p.parts.values()) == 10.0  # no probe, load, timing, stages
    assert traced.parts[est.EXPORT_PHASE].seconds == pytest.approx(
        without.parts[est.EXPORT_PHASE].seconds + 10.0
    )
    assert traced.remaining_s() == pytest.approx(without.remaining_s() + 10.0)
    # the other way: without --fake-cuda the same cell is a skip here and costs nothing
    skipped = est.estimate(
        {W320: [ORT], label: [gpu]}, [], k, workers=1, episodes=3, cannot_run=lambda c: c.device == "cuda"
    )
    assert skipped.prices[gpu.id].source == "skip" and skipped.remaining_s() == pytest.approx(
        without.remaining_s()
    )
