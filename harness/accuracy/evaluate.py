"""mAP of a cell's own runner and post-processing on a dataset split, at the cell's input shape.

The images are letterboxed exactly as the timed input is (harness.yolo.inputs.letterbox_files), fed in batches of
the cell's batch size to a callable that returns the model's outputs, and decoded per head: the end-to-end head's
rows [B, K, 6] (x1, y1, x2, y2, score, class in letterboxed pixels) are taken as they are, the raw head
[B, 4 + nc, anchors] goes through ultralytics' non_max_suppression with the settings of its DetectionValidator
(`VALIDATOR_NMS`: multi-label, confidence 0.001, IoU 0.7, at most 300 per image), so that a raw-head mAP is the
figure `model.val()` reports; predictions use single-label NMS, the validator does not.
Boxes are mapped back to each image's pixels with ultralytics' scale_boxes and scored against the labels the way
ultralytics' DetectionValidator scores them (confidence floor 0.001, box_iou, greedy class-aware matching at the
ten COCO IoU thresholds, ap_per_class: harness.accuracy.detection_ap).

The split is small on purpose (`DEFAULT_IMAGES`): the pass must stay a fraction of a cell's wall time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import harness  # noqa: F401  (offline environment before ultralytics is imported)
from harness.accuracy import detection_ap

log = logging.getLogger(__name__)

DEFAULT_IMAGES = 32  # val images per cell (RunConfig.accuracy_images, --accuracy-images)
CONF = 0.001  # ultralytics' validator's confidence floor for mAP
NMS_IOU = 0.7
MAX_DET = 300
#: ultralytics' DetectionValidator.postprocess: non_max_suppression(preds, conf, iou, multi_label=True, max_det=...)
#: with val's defaults (cfg/default.yaml: conf 0.001 for val, iou 0.7, max_det 300, agnostic_nms False)
VALIDATOR_NMS = {
    "conf_thres": CONF,
    "iou_thres": NMS_IOU,
    "multi_label": True,
    "agnostic": False,
    "max_det": MAX_DET,
}


def postprocess_description(head: str) -> str:
    """What turned the head's outputs into scored detections (the record's `accuracy.postprocess`)."""
    if head == "raw":
        args = ", ".join(f"{k}={v}" for k, v in VALIDATOR_NMS.items())
        return f"ultralytics.utils.nms.non_max_suppression({args}), as DetectionValidator runs it"
    return f"end-to-end head rows as the model returns them (at most {MAX_DET}), scores above {CONF}"


Infer = Callable[[np.ndarray], "np.ndarray | Sequence[np.ndarray]"]


@dataclass(frozen=True)
class Split:
    """Images of one dataset split with their labels (rows: class, cx, cy, w, h normalised) and sizes (h, w)."""

    images: tuple[Path, ...]
    labels: tuple[np.ndarray, ...]
    shapes: tuple[tuple[int, int], ...]
    dataset: str

    def __len__(self) -> int:
        return len(self.images)

    def first(self, n: int) -> Split:
        """The first `n` images of this split."""
        return Split(self.images[:n], self.labels[:n], self.shapes[:n], self.dataset)


def load_split(
    data_yaml: Path | str | None = None, split: str = "val", limit: int | None = DEFAULT_IMAGES
) -> Split:
    """The first `limit` images (by name) of `split` of a YOLO dataset yaml and their labels; without a yaml, the
    generated dataset (harness.yolo.dataset) in its default place, generated if it is not there."""
    import cv2
    from ultralytics.data.utils import img2label_paths

    from harness.yolo import dataset as ds

    data_yaml = Path(data_yaml) if data_yaml is not None else ds.generate()
    images = ds.split_images(data_yaml, split)[:limit]
    if not images:
        raise ValueError(f"{data_yaml} has no images in its {split!r} split")
    labels, shapes = [], []
    for img, lab in zip(images, img2label_paths([str(p) for p in images]), strict=True):
        rows = np.loadtxt(lab, ndmin=2, dtype=np.float64) if Path(lab).is_file() else np.zeros((0, 5))
        labels.append(rows.reshape(-1, 5))
        h, w = cv2.imread(str(img)).shape[:2]  # header-only readers would do; these images are small
        shapes.append((h, w))
    return Split(tuple(images), tuple(labels), tuple(shapes), str(data_yaml))


def detections(out: np.ndarray, head: str, nc: int | None = None) -> np.ndarray:
    """One image's detections [n, 6] (x1, y1, x2, y2, score, class; letterboxed pixels), best first, scores above
    CONF: end-to-end rows as they are, raw-head channels [4 + nc, anchors] through ultralytics' NMS."""
    import torch
    from ultralytics.utils.nms import non_max_suppression

    out = np.asarray(out, np.float32)
    if head == "e2e":
        rows = out.reshape(-1, out.shape[-1])[:, :6]
    elif head == "raw":
        nc = nc if nc is not None else out.shape[0] - 4
        pred = torch.from_numpy(np.ascontiguousarray(out))[None]
        rows = non_max_suppression(pred, nc=nc, **VALIDATOR_NMS)[0].numpy()
    else:
        raise ValueError(f"head must be 'e2e' or 'raw', not {head!r}")
    rows = rows[rows[:, 4] > CONF]
    return rows[np.argsort(-rows[:, 4], kind="stable")]


def _first_output(y) -> np.ndarray:
    if isinstance(y, list | tuple):
        y = y[0]
    return np.asarray(y)


def evaluate(
    infer: Infer,
    head: str,
    height: int,
    width: int,
    *,
    split: Split | None = None,
    batch: int = 1,
    nc: int | None = None,
    source: str | None = None,
) -> dict:
    """mAP50-95 and mAP50 of `infer` on `split` (default: the generated dataset's first DEFAULT_IMAGES val images).

    `infer` maps a float32 NCHW batch of `batch` letterboxed images (harness.yolo.inputs.letterbox_files at
    height x width) to the model's outputs (an array or a list whose first element is the detections). A short
    last batch is filled up with repeats of its first image, whose outputs are dropped. Returns
    {map50_95, map50, images, dataset, source, postprocess}.
    """
    import torch
    from ultralytics.utils.metrics import box_iou
    from ultralytics.utils.ops import scale_boxes, xywh2xyxy

    from harness.yolo.inputs import letterbox_files

    split = split if split is not None else load_split()
    tp, conf, pred_cls, target_cls = [], [], [], []
    for start in range(0, len(split), batch):
        idx = list(range(start, min(start + batch, len(split))))
        paths = [split.images[i] for i in idx]
        paths += [paths[0]] * (batch - len(paths))
        out = _first_output(infer(letterbox_files(paths, height, width)))
        for b, i in enumerate(idx):
            det = detections(out[b], head, nc)
            h0, w0 = split.shapes[i]
            boxes = scale_boxes((height, width), torch.from_numpy(det[:, :4].copy()), (h0, w0))
            labels = split.labels[i]
            gt = xywh2xyxy(torch.from_numpy(labels[:, 1:5].copy())) * torch.tensor([w0, h0, w0, h0])
            iou = box_iou(gt.float(), boxes.float()).numpy()
            classes = np.rint(det[:, 5]).astype(np.int64)
            gt_cls = labels[:, 0].astype(np.int64)
            tp.append(detection_ap.true_positives(iou, gt_cls, classes))
            conf.append(det[:, 4])
            pred_cls.append(classes)
            target_cls.append(gt_cls)
    ap = detection_ap.average_precision(
        np.concatenate(tp), np.concatenate(conf), np.concatenate(pred_cls), np.concatenate(target_cls)
    )
    return {
        "map50_95": ap["map50_95"],
        "map50": ap["map50"],
        "images": len(split),
        "dataset": split.dataset,
        "source": source or f"{head} head at {height}x{width}, batch {batch}",
        "postprocess": postprocess_description(head),
    }


def torch_reference(checkpoint: Path | str, head: str, height: int, width: int) -> Infer:
    """The PyTorch fp32 eager reference as an `infer` callable (the prepared model parity compares against)."""
    import torch

    from harness.backends.torch_eager import flatten_outputs
    from harness.yolo.models import prepared_model

    model = prepared_model(Path(checkpoint), head, (height, width))

    def infer(x: np.ndarray) -> list[np.ndarray]:
        with torch.inference_mode():
            return flatten_outputs(model(torch.from_numpy(np.ascontiguousarray(x))))

    return infer


def accuracy_record(result: dict, reference: dict) -> dict:
    """The record's `accuracy` section: the cell's mAP beside the PyTorch fp32 reference's on the same images."""
    if (result["images"], result["dataset"]) != (reference["images"], reference["dataset"]):
        raise ValueError("the cell and the reference were scored on different images")
    ref = reference["map50_95"]
    return {
        "map50_95": result["map50_95"],
        "map50": result["map50"],
        "reference_map50_95": ref,
        "ratio": None if not ref else result["map50_95"] / ref,
        "images": result["images"],
        "dataset": result["dataset"],
        "postprocess": result.get("postprocess"),
    }
