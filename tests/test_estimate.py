"""The remaining-time estimate (harness.plan.estimate) on hand-made timings: recorded stage times win, the export
cache decides hit or fresh export, the plan fills what no run recorded, and parts done leave the sum."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.execute.workload import workload_label
from harness.plan import estimate as est


def cell(backend: str, size: str = "n", side: int = 320) -> Cell:
    return Cell(size, "detect", "e2e", backend, "cpu", Shape(side, side))


ORT, OV, EAGER = cell("onnxruntime"), cell("openvino"), cell("torch-eager")
W320 = workload_label(ORT)
BIG = cell("onnxruntime", "x", 640)
W640 = workload_label(BIG)
DYN = Cell("n", "detect", "e2e", "onnxruntime", "cpu", Shape(0, 0, dynamic=True))


def timeline(run_id: str, **parts) -> dict:
    return {"version": est.TIMELINE_VERSION, "run_id": run_id, **parts}


def entry(cache: Path, c: Cell, export_s: float = 12.0) -> None:
    d = cache / "exports" / f"{c.id}-0123456789ab"
    d.mkdir(parents=True)
    (d / "meta.json").write_text(json.dumps({"format": 2, "outcome": {"status": "ok", "export_s": export_s}}))


def price(workloads, rec, cache=None, alone=(), **kw):
    args = {"cache_dir": cache, "workers": 2, "max_time_s": 3.0, "episodes": 3, **kw}
    return est.estimate(workloads, alone, rec, **args)


def test_recorded_stage_times_price_the_whole_run(tmp_path):
    rec = est.Recorded()
    rec.add(
        timeline(
            "w1",
            prep_s={c.id: (4.0, True) for c in (ORT, OV, EAGER)},
            parallelism=0.5,
            timing_s={W320: 30.0},
            workload_s={W320: 20.0},
            finish_s=3.0,
        )
    )
    for c in (ORT, OV, EAGER):
        entry(tmp_path, c)  # on disk: a cache hit, as the recorded run had
    e = price({W320: [ORT, OV, EAGER]}, rec, tmp_path)
    assert {k: p.source for k, p in e.parts.items()} == {
        est.EXPORT_PHASE: "recorded",
        est.TIMING_PHASE: "recorded",
        W320: "recorded",
        est.FINISH: "recorded",
    }
    # export phase: 3 x 4 s at the recorded parallelism 0.5 = 6 s; then 30 + 20 + 3
    assert e.remaining_s() == pytest.approx(6.0 + 30.0 + 20.0 + 3.0)
    e.done(est.EXPORT_PHASE)
    e.done(est.TIMING_PHASE)
    assert e.remaining_s() == pytest.approx(23.0)
    e.done(W320)
    assert e.remaining_s() == pytest.approx(3.0)


def test_the_cache_decides_hit_or_fresh_export(tmp_path):
    """A recorded fresh export does not price a cache hit, nor the other way round."""
    rec = est.Recorded()
    rec.add(timeline("cold", prep_s={ORT.id: (40.0, False)}))
    fresh = est.prep_part(ORT, rec, tmp_path, refresh=False)
    assert (fresh.seconds, fresh.source) == (40.0, "recorded")  # no entry now either: as recorded
    entry(tmp_path, ORT, export_s=35.0)
    hit = est.prep_part(ORT, rec, tmp_path, refresh=False)
    assert (hit.seconds, hit.source) == (est.PLAN["cached_prep"], "cache")  # an entry now: a hit, not 40 s
    again = est.prep_part(ORT, est.Recorded(), tmp_path, refresh=True)
    assert (again.seconds, again.source) == (
        35.0 + est.PLAN["probe"],
        "cache",
    )  # --refresh-cache: meta's export_s
    other = est.prep_part(OV, est.Recorded(), tmp_path, refresh=False)  # no entry, nothing recorded
    assert (other.seconds, other.source) == (est.fresh_export_s(OV), "plan")


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


def test_the_plan_prices_what_no_run_recorded():
    e = price({W320: [ORT, OV], W640: [BIG]}, est.Recorded(), alone=[DYN], scenario_cells=[BIG.id])
    assert {p.source for p in e.parts.values()} == {"plan"}
    # bigger models and the scenarios cost more; the timing phase is the backends' time caps plus their loads
    assert e.parts[W640].seconds > e.parts[W320].seconds / 2
    assert e.parts[W640].seconds >= est.PLAN["scenarios"]
    assert e.parts[est.TIMING_PHASE].seconds == pytest.approx(3 * (3.0 + est.PLAN["load"]))
    assert e.parts[DYN.id].seconds == est.PLAN["alone"]
    # export phase: the sum over 2 workers, never below the longest export
    preps = [est.fresh_export_s(c) for c in (ORT, OV, BIG)]
    assert e.parts[est.EXPORT_PHASE].seconds == pytest.approx(max(sum(preps) / 2, max(preps)))


def test_cells_that_cannot_run_here_cost_nothing():
    gpu = Cell("n", "detect", "e2e", "tensorrt", "cuda", Shape(320, 320))
    label = workload_label(gpu)
    without = price({W320: [ORT]}, est.Recorded())
    e = price({W320: [ORT], label: [gpu]}, est.Recorded(), cannot_run=lambda c: c.device == "cuda")
    assert label not in e.parts and e.remaining_s() == pytest.approx(without.remaining_s())
    counted = price({W320: [ORT], label: [gpu]}, est.Recorded())  # the other way: priced as a real export
    assert counted.remaining_s() > without.remaining_s() + est.PLAN["export"]["tensorrt"] / 4


def test_one_episode_times_each_workload_in_its_own_test():
    e = price({W320: [ORT, OV]}, est.Recorded(), episodes=1)
    assert est.TIMING_PHASE not in e.parts
    # 320x320 is a quarter of 640x640's pixels: a quarter of the stages' price, plus each backend's cap and load
    assert e.parts[W320].seconds == pytest.approx(2 * est.PLAN["stages"] / 4 + 2 * (3.0 + est.PLAN["load"]))


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
