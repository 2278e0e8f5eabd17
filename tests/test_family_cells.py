"""A YOLO11n cell beside the YOLO26n cell of the same backend, on real exports (yolo11n built offline from
ultralytics' YAML, ONNX Runtime at 160): one interleaved group, the YOLO11 record's end-to-end stages with
ultralytics' NMS, and a paired ratio to YOLO26, model-only and end to end; the other way, the YOLO11 cell timed
without its YOLO26 counterpart has no such ratio, and the migration answer says there is no pair."""

from __future__ import annotations

import pytest

from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.null_reasons import unexplained_nulls
from harness.decide.decision import decide
from harness.decide.picks import Constraints
from harness.execute import workload
from harness.execute.runner import CellRunner, RunConfig
from tests.family_records import indexes

pytestmark = [pytest.mark.slow, pytest.mark.export]

SHAPE = Shape(160, 160)
Y26 = Cell("n", "detect", "e2e", "onnxruntime", "cpu", SHAPE)
Y11 = Cell("n", "detect", "raw", "onnxruntime", "cpu", SHAPE, family="yolo11")


def _run(tmp_path_factory, cache_dir, cells: list[Cell], run_id: str) -> dict:
    out = tmp_path_factory.mktemp(run_id)
    cfg = RunConfig(
        run_id=run_id,
        results_dir=out,
        cache_dir=cache_dir,
        max_time_s=0.3,
        block_s=0.02,
        warmup=1,
        accuracy=False,
        e2e=True,
        scenarios="none",
    )
    r = CellRunner(cfg, progress=lambda m: None)
    (group,) = workload.group(cells)  # one interleaved group, whatever the families
    r.prepare(group)
    by_id = r.run_workload(group)
    return {c.family: by_id[c.id][0] for c in cells}


@pytest.fixture(scope="module")
def together(tmp_path_factory, cache_dir):
    return _run(tmp_path_factory, cache_dir, [Y26, Y11], "families")


def test_the_yolo11_cell_records_its_nms_stages_and_a_paired_ratio_to_yolo26(together):
    y11, y26 = together["yolo11"], together["yolo26"]
    assert (y11.status, y26.status) == ("ok", "ok"), (y11.reason, y26.reason)
    assert y11.family == "yolo11" and y11.model == "yolo11n" and y11.head == "raw"
    assert not unexplained_nulls(y11)
    # end to end: the same pre-processing, ultralytics' NMS after the one-to-many head, each stage timed
    assert "non_max_suppression" in y11.e2e["postprocess"] and y11.e2e["check"]["rule"]
    assert y11.stages_ms["postprocess"] > 0 and y11.stages_ms["model"] > 0
    assert isinstance(y11.e2e["postprocess_input"]["above_conf"], int)
    assert y11.head_selection["export_args"] == {"nms": None}
    assert y26.head_selection["export_args"] == {"nms": False}
    # timed in one session, each paired with the other, model-only and end to end, each with its interval
    assert y11.timing["session"] == y26.timing["session"] and Y26.id in y11.timing["with"]
    for rec, other in ((y11, Y26), (y26, Y11)):
        for section in (rec.paired["others"], rec.paired_e2e["others"]):
            entry = section[other.id]
            lo, hi = entry["ratio_ci"]
            assert lo <= entry["ratio"] <= hi and entry["trials"] >= 2
    back = y11.paired["others"][Y26.id]["ratio"] * y26.paired["others"][Y11.id]["ratio"]
    assert 0.8 < back < 1.25  # the same trials read both ways
    # the migration answer reads the pair
    d = decide(indexes(y26, y11), Constraints())
    (entry,) = [e for e in d.entries if e["use_case"] == "from-yolo11"]
    (p,) = entry["pairs"]
    assert p["e2e"]["paired"] and p["model_only"]["paired"] and p["relation"] in ("faster", "slower", "tied")


def test_timed_without_its_yolo26_cell_it_has_no_pair(tmp_path_factory, cache_dir, together):
    alone = _run(tmp_path_factory, cache_dir, [Y11], "alone")["yolo11"]
    assert alone.status == "ok" and alone.paired is None and alone.paired_e2e is None
    assert "the only ok backend of its workload" in alone.null_reasons["paired"]
    d = decide(indexes(together["yolo26"], alone), Constraints())
    (entry,) = [e for e in d.entries if e["use_case"] == "from-yolo11"]
    assert entry["verdict"] is None and entry["pairs"][0]["relation"] == "not known"
