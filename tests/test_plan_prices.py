"""scripts/plan_prices.py: the plan's table generated from a fake (synthetic) cold run, read back by the estimator."""

from __future__ import annotations

import importlib.util
import json

import pytest

from harness.core.axes import GFLOPS_640, Shape
from harness.core.cell import Cell
from harness.execute.workload import workload_label
from harness.plan import price
from tests.conftest import REPO

spec = importlib.util.spec_from_file_location("plan_prices", REPO / "scripts" / "plan_prices.py")
plan_prices = importlib.util.module_from_spec(spec)
spec.loader.exec_module(plan_prices)


def cell(backend: str, size: str, side: int) -> Cell:
    return Cell(size, "detect", "e2e", backend, "cpu", Shape(side, side))


ORT, OV = cell("onnxruntime", "n", 320), cell("openvino", "n", 320)
ORT_X, OV_X = cell("onnxruntime", "x", 640), cell("openvino", "x", 640)
SPEED = {"python_s": 0.02, "compute_s": 0.03}


def record(c: Cell, export_s: float, load_s: float, trials: int, scenarios: bool = False) -> dict:
    return {
        "synthetic": True, "run_id": "cold", "cell_id": c.id, "status": "ok", "size": c.size, "task": c.task,
        "head": c.head, "backend": c.backend, "device": c.device, "height": c.shape.height,
        "width": c.shape.width, "dynamic": False, "batch": 1, "precision_requested": "fp32", "cache_hit": False,
        "export_s": export_s, "load_s": load_s, "first_run_ms": 0.0,
        "timing": {"elapsed_s": 6.0, "with": ["other"], "trials": trials},
        "scenarios": {"single-stream": {"duration_s": 1.0}} if scenarios else None,
    }  # fmt: skip


def fake_run(root):
    """A cold run: yolo26n at 320 (ONNX Runtime ran the scenarios) and yolo26x at 640 (held up by its floor)."""
    run = root / "cold"
    run.mkdir()
    records = [record(ORT, 2.0, 0.5, 40, True), record(OV, 2.0, 0.5, 40),
               record(ORT_X, 10.0, 1.0, 20), record(OV_X, 8.0, 1.0, 20)]  # fmt: skip
    (run / "cells.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    w320, w640 = workload_label(ORT), workload_label(ORT_X)
    timeline = {
        "version": 1, "run_id": "cold", "wall_s": 200.0, "finish_s": 1.5, "parallelism": 0.5,
        "prep_s": {ORT.id: [5.0, False], OV.id: [4.0, False], ORT_X.id: [16.0, False], OV_X.id: [12.0, False]},
        "timing_s": {w320: 7.0, w640: 22.0}, "workload_s": {w320: 44.0, w640: 40.0}, "alone_s": {},
    }  # fmt: skip
    (run / "timeline.json").write_text(json.dumps(timeline))
    env = {"run_id": "cold", "started_at": "2026-12-01T00:00:00+00:00", "git_commit": "abc",
           "host": {"cpu_model": "Synthetic CPU", "cpu_cores_physical": 2}, "machine_speed": SPEED}  # fmt: skip
    (run / "env.json").write_text(json.dumps(env))
    return run


def test_the_table_holds_each_cells_parts_from_the_run(tmp_path):
    table = plan_prices.build([fake_run(tmp_path)], 3.0)
    x = table["cells"]["onnxruntime cpu fp32 x 640x640 b1"]
    # export as recorded; probe: its export-phase seconds less its export; timing: the workload's share less its
    # loads, evenly; held up by the floor (20 trials, the run's fewest): its floor is its timing
    assert (x["export"], x["probe"], x["load"]) == (10.0, 6.0, 1.0)
    assert x["timing"] == x["timing_floor"] == pytest.approx((22.0 - 2.0) / 2)
    n = table["cells"]["onnxruntime cpu fp32 n 320x320 b1"]
    assert n["timing"] == pytest.approx((7.0 - 1.0) / 2) and n["timing_floor"] == pytest.approx(3.0 * 20 / 40)
    # stages: yolo26x's workload (no scenarios) evenly; yolo26n's from the x cell of its backend scaled by work,
    # the rest of its workload to the cell that ran the scenarios
    assert x["stages"] == 20.0 and x["scenarios"] == 0.0
    e = table["work_exponent"]["stages"]
    guess = 20.0 * (GFLOPS_640["n"] / 4 / GFLOPS_640["x"]) ** e
    assert n["stages"] == pytest.approx(guess, abs=1e-3) and n["scenarios"] == pytest.approx(
        44.0 - 2 * guess, abs=1e-3
    )
    assert table["cells"]["openvino cpu fp32 n 320x320 b1"]["scenarios"] == 0.0
    assert min(table["work_exponent"].values()) >= 0.0 and max(table["work_exponent"].values()) <= 1.0
    # the families: measured where the run has entries, the generator's priors (run null) where not
    assert table["families"]["other"]["run"] == "cold" and table["families"]["compile"]["run"] is None
    assert table["runs"][0]["machine_speed"] == SPEED and table["finish_s"] == 1.5


def test_the_written_table_is_what_the_estimator_reads(tmp_path):
    run = fake_run(tmp_path)
    out = tmp_path / "prices.yaml"
    assert plan_prices.main([str(run), "-o", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("# The plan's prices") and f"python scripts/plan_prices.py {run}" in text
    table = price.Table.read(out)
    parts, entry, _ = table.lookup(ORT_X)
    assert parts["export"] == 10.0 and entry.run == "cold" and table.speed_of(entry) == SPEED
    # priced on a machine measured 2x slower at Python: the export doubles
    slower = price.Known(table, speed={"python_s": 0.04, "compute_s": 0.03})
    assert price.price_cells([ORT_X], slower)[ORT_X.id].parts["export"] == pytest.approx(20.0)


def test_the_committed_table_prices_the_default_profiles_cells_from_its_own_entries():
    """harness/plan/prices.yaml is generated (its header says how) and holds the CPU cells of a default run."""
    table = price.Table.read()
    assert "GENERATED" in price.PRICES_FILE.read_text()
    for c in (ORT, OV, ORT_X, cell("executorch-xnnpack", "m", 640), cell("torch-eager", "n", 1280)):
        _, entry, how = table.lookup(c)
        assert entry is not None and how.startswith("prices.yaml ") and "nearest" not in how, (c.id, how)


def traced_run(root):
    """A --fake-cuda run (synthetic): AOTInductor cuda traced at yolo26n 640, its dynamic probe and a remedy left
    out, ONNX Runtime that ran as usual; its machine 2x slower at Python than the cold run's."""
    run = root / "fake"
    run.mkdir()
    aoti = Cell("n", "detect", "e2e", "aoti", "cuda", Shape(640, 640))
    dyn = Cell("n", "detect", "e2e", "aoti", "cuda", Shape(0, 0, dynamic=True))
    records = [
        {**record(aoti, 14.0, 0.0, 0), "status": "traced", "timing": None},
        {**record(dyn, 6.0, 0.0, 0), "status": "trace_failed", "timing": None, "dynamic": True},
        {
            **record(aoti, 30.0, 0.0, 0),
            "cell_id": aoti.id + "+raw-head",
            "status": "traced",
            "remedy_of": aoti.id,
        },
        {**record(ORT_X, 99.0, 9.0, 20)},
    ]
    (run / "cells.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    timeline = {"version": 1, "run_id": "fake", "wall_s": 500.0, "finish_s": 9.0,
                "prep_s": {aoti.id: [15.5, False], ORT_X.id: [120.0, False]}, "alone_s": {dyn.id: 34.0}}  # fmt: skip
    (run / "timeline.json").write_text(json.dumps(timeline))
    env = {"run_id": "fake", "started_at": "2026-12-02T00:00:00+00:00", "git_commit": "def",
           "host": {"cpu_model": "Synthetic CPU", "cpu_cores_physical": 2},
           "machine_speed": {"python_s": 0.04, "compute_s": 0.06}}  # fmt: skip
    (run / "env.json").write_text(json.dumps(env))
    return run, aoti


def test_an_extra_run_adds_only_its_traced_exports_and_probes_and_they_price_only_their_cells(tmp_path):
    cold = fake_run(tmp_path)
    fake, aoti = traced_run(tmp_path)
    alone = plan_prices.build([cold], 3.0)
    both = plan_prices.build([cold], 3.0, [fake])
    # the cold run's table is unchanged: the fake run's ONNX Runtime cell, its end and the medians alone stay out
    kept = ("runs", "traced", "alone_cells")
    assert {k: both[k] for k in alone if k not in kept} == {k: alone[k] for k in alone if k not in kept}
    assert both["alone"] == alone["alone"] == plan_prices.PRIORS["alone"]
    assert alone["alone_cells"] == {} and both["alone_cells"] == {
        "aoti cuda fp32 n 0x0 b1": {"seconds": 34.0, "run": "fake"}
    }
    assert alone["traced"] == {} and list(both["traced"]) == ["aoti cuda fp32 n 640x640 b1"]
    t = both["traced"]["aoti cuda fp32 n 640x640 b1"]
    assert t["export"] == 15.5 and t["run"] == "fake"  # its export-phase seconds, the remedy not counted
    assert all(t[p] == 0.0 for p in ("probe", "load", "timing", "stages", "scenarios"))
    assert [r["run_id"] for r in both["runs"]] == ["fake", "cold"]  # the cold run stays the reference speed

    out = tmp_path / "prices.yaml"
    assert plan_prices.main([str(cold), "--extra", str(fake), "-o", str(out)]) == 0
    assert f"--extra {fake}" in out.read_text()
    table = price.Table.read(out)
    assert table.reference_speed() == SPEED
    parts, entry, _ = table.lookup(aoti, traced=True)
    assert parts["export"] == 15.5 and table.speed_of(entry)["python_s"] == 0.04
    # the other way: a real AOTInductor cuda cell (a GPU machine) is never priced from a trace
    real, real_entry, how = table.lookup(aoti)
    assert real["load"] > 0  # the family default times a real cell
    assert real_entry.key == "family default compile" and "family default" in how
    # priced on the cold run's machine (2x faster at Python than the fake run's): the traced export halves, alone
    known = price.Known(table, speed=SPEED)
    p = price.price_cells([aoti], known, traced={aoti.id})[aoti.id]
    assert p.parts["export"] == pytest.approx(15.5 / 2) and p.prep_s() == p.total(1.0) == p.parts["export"]

    # its dynamic probe run alone: its own seconds, from its run's machine; another backend's probe: the median
    dyn = Cell("n", "detect", "e2e", "aoti", "cuda", Shape(0, 0, dynamic=True))
    own = price.alone_price(dyn, known)
    assert own.parts["load"] == pytest.approx(34.0 / 2) and "alone_cells" in own.detail
    other = price.alone_price(Cell("n", "detect", "e2e", "openvino", "cpu", Shape(0, 0, dynamic=True)), known)
    assert (
        other.parts["load"] == pytest.approx(plan_prices.PRIORS["alone"]["dynamic"])
        and "alone.dynamic" in other.detail
    )
