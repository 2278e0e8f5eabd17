"""What ultralytics publishes for the model families a user migrates from (YOLO11, YOLOv8), beside YOLO26's own
tables (harness.accuracy.published), as data: the accuracy per task, size and head, and the detect models' CPU
speed at 640. Not measured by this harness.

Read from ultralytics' documentation: the YOLO11 model page (docs.ultralytics.com/models/yolo11/, its source
docs/en/models/yolo11.md) and the YOLOv8 model page (docs.ultralytics.com/models/yolov8/, docs/en/models/yolov8.md),
"Performance Metrics". Both families have the one-to-many head only, so their figures are the `raw` head's (with
NMS); an `e2e` figure does not exist and answers None. Figures are in percent and milliseconds, as published.

The CPU speeds are ultralytics' ProfileModels figures: the model alone (no pre-processing, no NMS) exported to ONNX,
ONNX Runtime on the CPU of each table's benchmark machine, the mean after 2-sigma clipping. YOLO26's and YOLO11's
tables come from one benchmark setup (the YOLO11 table was re-measured for the YOLO26 release, ultralytics PR
#26025: an Intel Xeon CPU @ 2.00 GHz, 8 intra-op threads); YOLOv8's table is older (its GPU column is an A100's),
so a ratio against it mixes two machines.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.accuracy import published
from harness.accuracy.published import Published
from harness.core.axes import DEFAULT_FAMILY

YOLO11_SOURCE = (
    "ultralytics YOLO11 model page (https://docs.ultralytics.com/models/yolo11/, 'Performance Metrics')"
)
YOLOV8_SOURCE = (
    "ultralytics YOLOv8 model page (https://docs.ultralytics.com/models/yolov8/, 'Performance Metrics')"
)


def _raw(figures: dict[str, float]) -> dict[str, dict[str, float]]:
    return {"raw": figures}


def _both(figures: dict[str, float]) -> dict[str, dict[str, float]]:
    # a classifier has one head: its figure stands for whichever head the cell names
    return {"e2e": figures, "raw": figures}


TABLES: dict[str, dict[str, Published]] = {
    "yolo11": {
        "detect": Published(
            "detect",
            "COCO val2017 mAP50-95",
            640,
            _raw({"n": 39.5, "s": 47.0, "m": 51.5, "l": 53.4, "x": 54.7}),
            f"{YOLO11_SOURCE}, Detection (COCO), 'mAPval 50-95' at 640",
        ),
        "seg": Published(
            "seg",
            "COCO val2017 mask mAP50-95",
            640,
            _raw({"n": 32.0, "s": 37.8, "m": 41.5, "l": 42.9, "x": 43.8}),
            f"{YOLO11_SOURCE}, Segmentation (COCO), 'mAPmask 50-95' at 640",
            also={"box_map50_95": _raw({"n": 38.9, "s": 46.6, "m": 51.5, "l": 53.4, "x": 54.7})},
        ),
        "pose": Published(
            "pose",
            "COCO keypoints val2017 pose mAP50-95 (OKS)",
            640,
            _raw({"n": 50.0, "s": 58.9, "m": 64.9, "l": 66.1, "x": 69.5}),
            f"{YOLO11_SOURCE}, Pose (COCO), 'mAPpose 50-95' at 640",
            also={"pose_map50": _raw({"n": 81.0, "s": 86.3, "m": 89.4, "l": 89.9, "x": 91.1})},
        ),
        "obb": Published(
            "obb",
            "DOTAv1 test mAP50 (single model, multi-scale)",
            1024,
            _raw({"n": 78.4, "s": 79.5, "m": 80.9, "l": 81.0, "x": 81.3}),
            f"{YOLO11_SOURCE}, OBB (DOTAv1), 'mAPtest 50' at 1024",
        ),
        "cls": Published(
            "cls",
            "ImageNet val top-1 accuracy",
            224,
            _both({"n": 70.0, "s": 75.4, "m": 77.3, "l": 78.3, "x": 79.5}),
            f"{YOLO11_SOURCE}, Classification (ImageNet), 'acc top1' at 224",
            also={"top5": _both({"n": 89.4, "s": 92.7, "m": 93.9, "l": 94.3, "x": 94.9})},
        ),
    },
    "yolov8": {
        "detect": Published(
            "detect",
            "COCO val2017 mAP50-95",
            640,
            _raw({"n": 37.3, "s": 44.9, "m": 50.2, "l": 52.9, "x": 53.9}),
            f"{YOLOV8_SOURCE}, Detection (COCO), 'mAPval 50-95' at 640",
        ),
        "seg": Published(
            "seg",
            "COCO val2017 mask mAP50-95",
            640,
            _raw({"n": 30.5, "s": 36.8, "m": 40.8, "l": 42.6, "x": 43.4}),
            f"{YOLOV8_SOURCE}, Segmentation (COCO), 'mAPmask 50-95' at 640",
            also={"box_map50_95": _raw({"n": 36.7, "s": 44.6, "m": 49.9, "l": 52.3, "x": 53.4})},
        ),
        "pose": Published(
            "pose",
            "COCO keypoints val2017 pose mAP50-95 (OKS)",
            640,
            _raw({"n": 50.4, "s": 60.0, "m": 65.0, "l": 67.6, "x": 69.2}),
            f"{YOLOV8_SOURCE}, Pose (COCO), 'mAPpose 50-95' at 640",
            also={"pose_map50": _raw({"n": 80.1, "s": 86.2, "m": 88.8, "l": 90.0, "x": 90.2})},
        ),
        "obb": Published(
            "obb",
            "DOTAv1 test mAP50 (single model, multi-scale)",
            1024,
            _raw({"n": 78.0, "s": 79.5, "m": 80.5, "l": 80.7, "x": 81.36}),
            f"{YOLOV8_SOURCE}, OBB (DOTAv1), 'mAPtest 50' at 1024",
        ),
        "cls": Published(
            "cls",
            "ImageNet val top-1 accuracy",
            224,
            _both({"n": 69.0, "s": 73.8, "m": 76.8, "l": 76.8, "x": 79.0}),
            f"{YOLOV8_SOURCE}, Classification (ImageNet), 'acc top1' at 224",
            also={"top5": _both({"n": 88.3, "s": 91.7, "m": 93.5, "l": 93.5, "x": 94.6})},
        ),
    },
}


def table(family: str, task: str) -> Published | None:
    """The published table of `task` for `family` (YOLO26's from harness.accuracy.published), or None."""
    if family == DEFAULT_FAMILY:
        return published.table(task)
    return TABLES.get(str(family), {}).get(str(task))


@dataclass(frozen=True)
class CpuSpeeds:
    """A family's published detect speeds at 640: ms per size, the model alone, ONNX Runtime on a CPU."""

    family: str
    ms: dict[str, float]
    source: str
    #: the conditions the figures were measured under, in words
    conditions: str


#: ProfileModels' conditions for the YOLO26 and YOLO11 tables (ultralytics PR #26025)
PROFILE_CONDITIONS = (
    "ONNX, ONNX Runtime on an Intel Xeon CPU @ 2.00 GHz, 8 intra-op threads, ultralytics' ProfileModels: the model "
    "alone (no pre-processing, no NMS), the mean after 2-sigma clipping"
)

CPU_SPEEDS: dict[str, CpuSpeeds] = {
    "yolo26": CpuSpeeds(
        "yolo26",
        {"n": 38.9, "s": 87.2, "m": 220.0, "l": 286.2, "x": 525.8},
        "ultralytics YOLO26 detect table (https://docs.ultralytics.com/tasks/detect/), 'Speed CPU ONNX (ms)' at 640",
        PROFILE_CONDITIONS,
    ),
    "yolo11": CpuSpeeds(
        "yolo11",
        {"n": 56.1, "s": 90.0, "m": 183.2, "l": 238.6, "x": 462.8},
        f"{YOLO11_SOURCE}, Detection (COCO), 'Speed CPU ONNX (ms)' at 640",
        PROFILE_CONDITIONS,
    ),
    "yolov8": CpuSpeeds(
        "yolov8",
        {"n": 80.4, "s": 128.4, "m": 234.7, "l": 375.2, "x": 479.1},
        f"{YOLOV8_SOURCE}, Detection (COCO), 'Speed CPU ONNX (ms)' at 640",
        "ONNX on the CPU of the YOLOv8 release's benchmark machine (an older table than YOLO26's and YOLO11's)",
    ),
}
