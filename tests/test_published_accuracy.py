"""Published accuracy per task: each task's ultralytics YOLO26 table at the shape and metric it was published at, as
data; a record is published only at that shape, in fp32, with a figure for its head; elsewhere not known, saying
why."""

from __future__ import annotations

import pytest

from harness.accuracy import published
from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.record import CellRecord, new_record
from harness.decide.accuracy import NOT_KNOWN, PUBLISHED, PUBLISHED_MAP_640, accuracy_of, published_map


def _rec(task: str, side: int, head: str = "e2e", precision: str = "fp32") -> CellRecord:
    cell = Cell("n", task, head, "onnxruntime", "cpu", Shape(side, side), 1, precision)
    rec = new_record("r", cell, "random-init:0")
    rec.status = "ok"
    return rec


@pytest.mark.parametrize(
    ("task", "side", "figure", "label"),
    [
        ("detect", 640, 40.1, "COCO mAP50-95 40.1"),
        ("seg", 640, 33.9, "COCO mask mAP50-95 33.9"),
        ("pose", 640, 57.2, "COCO keypoints mAP50-95 57.2"),
        ("obb", 1024, 78.9, "DOTAv1 mAP50 78.9"),
        ("cls", 224, 71.4, "ImageNet top-1 71.4"),
    ],
)
def test_each_task_is_published_at_its_own_shape(task, side, figure, label):
    acc = accuracy_of(_rec(task, side), [])
    assert acc.source == PUBLISHED and acc.coco == figure and label in acc.short()
    assert (
        published.table(task).side == side and "docs.ultralytics.com/tasks/" in published.table(task).source
    )
    # the other way: another shape, or int8, is not known, and says why
    other = 320 if side != 320 else 640
    off = accuracy_of(_rec(task, other), [])
    assert off.source == NOT_KNOWN and off.coco is None and f"published mAP is at {side}" in off.why
    q = accuracy_of(_rec(task, side, precision="int8"), [])
    assert q.source == NOT_KNOWN and "for fp32, not int8" in q.why


def test_only_detect_publishes_the_raw_head_and_classify_has_one_head():
    assert published_map(_rec("detect", 640, "raw")) == 40.9 == PUBLISHED_MAP_640["raw"]["n"]
    for task, side in (("seg", 640), ("pose", 640), ("obb", 1024)):
        assert published_map(_rec(task, side, "raw")) is None  # the tables give the end-to-end head only
    assert published_map(_rec("cls", 224, "raw")) == published_map(_rec("cls", 224, "e2e")) == 71.4


def test_the_tables_hold_every_size_and_their_companion_figures():
    for task, table in published.TABLES.items():
        assert table.task == task
        assert set(table.figures["e2e"]) == {"n", "s", "m", "l", "x"}
        assert all(0 < v < 100 for v in table.figures["e2e"].values())
    assert published.TABLES["seg"].also["box_map50_95"]["e2e"]["n"] == 39.6
    assert published.TABLES["obb"].also["obb_map50_95"]["e2e"]["n"] == 52.4
    assert published.TABLES["cls"].also["top5"]["e2e"]["n"] == 90.1
