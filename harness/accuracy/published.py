"""The accuracy ultralytics publishes for each YOLO26 task, as data: the figure per model size and head, the input
size and the metric it was published at, and where it was read. Not measured by this harness.

Read from ultralytics' documentation (docs.ultralytics.com; the tables each task's page shows, and the YOLO26 model
page). Each table gives the end-to-end head's figures ("(e2e)"); only detect's also gives the one-to-many head's
with NMS, so for the other tasks the raw head has no published figure (`figure` answers None, never the e2e one).
Figures are in percent, as published.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Published:
    """One task's published table: `figures[head][size]` in percent, measured at `side` x `side` pixels."""

    task: str
    metric: str  # what the figure is, in words (dataset, split, metric)
    side: int
    figures: dict[str, dict[str, float]]
    source: str
    #: the task's other published figures, same layout (e.g. segment's box mAP beside its mask mAP)
    also: dict[str, dict[str, dict[str, float]]] | None = None

    def figure(self, head: str, size: str) -> float | None:
        return self.figures.get(str(head), {}).get(str(size))


TABLES: dict[str, Published] = {
    "detect": Published(
        "detect",
        "COCO val2017 mAP50-95",
        640,
        {
            "e2e": {"n": 40.1, "s": 47.8, "m": 52.5, "l": 54.4, "x": 56.9},
            "raw": {"n": 40.9, "s": 48.6, "m": 53.1, "l": 55.0, "x": 57.5},
        },
        "ultralytics YOLO26 detect table, COCO val2017 at 640 (https://docs.ultralytics.com/tasks/detect/): "
        "'mAPval 50-95' for the one-to-many head with NMS, 'mAPval 50-95(e2e)' for the end-to-end head",
    ),
    "seg": Published(
        "seg",
        "COCO val2017 mask mAP50-95",
        640,
        {"e2e": {"n": 33.9, "s": 40.0, "m": 44.1, "l": 45.5, "x": 47.0}},
        "ultralytics YOLO26 segment table, COCO val2017 at 640 (https://docs.ultralytics.com/tasks/segment/): "
        "'mAPmask 50-95(e2e)'",
        also={"box_map50_95": {"e2e": {"n": 39.6, "s": 47.3, "m": 52.5, "l": 54.4, "x": 56.5}}},
    ),
    "pose": Published(
        "pose",
        "COCO keypoints val2017 pose mAP50-95 (OKS)",
        640,
        {"e2e": {"n": 57.2, "s": 63.0, "m": 68.8, "l": 70.4, "x": 71.6}},
        "ultralytics YOLO26 pose table, COCO keypoints val2017 at 640 (https://docs.ultralytics.com/tasks/pose/, "
        "as also on https://docs.ultralytics.com/datasets/pose/coco/): 'mAPpose 50-95(e2e)'",
        also={"pose_map50": {"e2e": {"n": 83.3, "s": 86.6, "m": 89.6, "l": 90.5, "x": 91.6}}},
    ),
    "obb": Published(
        "obb",
        "DOTAv1 test mAP50 (single model, multi-scale)",
        1024,
        {"e2e": {"n": 78.9, "s": 80.9, "m": 81.0, "l": 81.6, "x": 81.7}},
        "ultralytics YOLO26 OBB table, DOTAv1 test at 1024 (https://docs.ultralytics.com/tasks/obb/): "
        "'mAPtest 50(e2e)'",
        also={"obb_map50_95": {"e2e": {"n": 52.4, "s": 54.8, "m": 55.3, "l": 56.2, "x": 56.7}}},
    ),
    "cls": Published(
        "cls",
        "ImageNet val top-1 accuracy",
        224,
        # a classifier has one head: its figure stands for whichever head the cell names
        {head: {"n": 71.4, "s": 76.0, "m": 78.1, "l": 79.0, "x": 79.9} for head in ("e2e", "raw")},
        "ultralytics YOLO26 classify table, ImageNet val at 224 (https://docs.ultralytics.com/tasks/classify/): "
        "'acc top1'",
        also={"top5": {h: {"n": 90.1, "s": 92.9, "m": 94.2, "l": 94.6, "x": 95.0} for h in ("e2e", "raw")}},
    ),
}


def table(task: str) -> Published | None:
    """The published table of `task` (the harness's task names), or None."""
    return TABLES.get(str(task))
