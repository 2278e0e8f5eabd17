"""Accuracy of a segment, pose, obb or classify cell's outputs, scored as ultralytics' validators score them.

Each task's figure is its field's metric, through ultralytics' own code, doing what its validator does
(ultralytics/models/yolo/{segment,pose,obb,classify}/val.py and DetectionValidator):

- The images are letterboxed as the timed input is (harness.yolo.inputs.letterbox_files; classify: ultralytics'
  `classify_transforms`, shorter side resized and centre crop, as its ClassificationDataset feeds the validator),
  fed in batches of the cell's batch size to `infer`.
- Decoding is the validator's `postprocess`: ultralytics' `non_max_suppression` with conf 0.001, IoU 0.7,
  multi-label, at most 300, `nc` the model's classes (the channels after them are the task's extra: mask
  coefficients, keypoints, the angle), `end2end=True` for the end-to-end head's rows, `rotated=True` for obb;
  masks from the prototypes with `process_mask` at the prototypes' resolution; keypoints reshaped to kpt_shape.
- Scoring is in the letterboxed image, where the validator scores: the labels mapped there by the letterbox's
  gain and padding (ultralytics' LetterBox arithmetic); segment masks rasterised by `polygons2masks_overlap` at a
  quarter of the input (the polygons resampled to 1000 points first, as its dataset does, the instances sorted by
  area, as its Format does); OBB labels to x y w h r by `xyxyxyxy2xywhr` (resampled to 100 points first).
  True positives at the ten IoU thresholds by `match_predictions` on `box_iou`, `mask_iou`, `kpt_iou` (OKS with
  the validator's sigmas, area = box area x 0.53) or `batch_probiou`; precision-recall by `ap_per_class`
  (harness.accuracy.detection_ap); classify by `ClassifyMetrics` on the top-5 classes.

`PRIMARY` names each task's primary figure: the record's `accuracy.map50_95` holds it, `accuracy.metric` says which.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

import harness  # noqa: F401  (offline environment before ultralytics is imported)
from harness.accuracy import detection_ap
from harness.accuracy.evaluate import CONF, MAX_DET, NMS_IOU
from harness.accuracy.task_split import TaskSplit

log = logging.getLogger(__name__)

#: task -> (the result key of its primary figure, its name in words)
PRIMARY = {
    "detect": ("map50_95", "box mAP50-95"),
    "seg": ("mask_map50_95", "mask mAP50-95"),
    "pose": ("pose_map50_95", "pose mAP50-95 (keypoint OKS)"),
    "obb": ("obb_map50", "obb mAP50 (rotated boxes, probiou)"),
    "cls": ("top1", "top-1 accuracy"),
}
#: the result keys each task reports beside its primary figure
TASK_KEYS = {
    "detect": ("map50_95", "map50"),
    "seg": ("mask_map50_95", "mask_map50", "box_map50_95", "box_map50"),
    "pose": ("pose_map50_95", "pose_map50", "box_map50_95", "box_map50"),
    "obb": ("obb_map50", "obb_map50_95"),
    "cls": ("top1", "top5"),
}
MASK_RATIO = 4  # ultralytics' mask_ratio: masks are scored at a quarter of the input
SEG_RESAMPLE, OBB_RESAMPLE = 1000, 100  # points ultralytics' dataset resamples polygons and OBB corners to
POSE_AREA = 0.53  # PoseValidator: the OKS area is the box area times this (xtcocotools' factor)

Infer = Callable[[np.ndarray], "np.ndarray | Sequence[np.ndarray]"]


def postprocess_description(task: str, head: str) -> str:
    """What turned the outputs into scored predictions (the record's `accuracy.postprocess`)."""
    if task == "cls":
        return "class probabilities, top-5 classes (ClassificationValidator)"
    rows = "end2end=True (rows above conf)" if head == "e2e" else "multi_label=True, iou_thres=0.7"
    extra = {
        "seg": "; masks by ultralytics.utils.ops.process_mask at the prototypes' resolution",
        "pose": "; keypoints reshaped to kpt_shape",
        "obb": ", rotated=True",
    }.get(task, "")
    return f"ultralytics.utils.nms.non_max_suppression(conf_thres={CONF}, {rows}, max_det={MAX_DET}){extra}"


def letterbox_geometry(h0: int, w0: int, height: int, width: int) -> tuple[float, float, float]:
    """(gain, left, top) of ultralytics' LetterBox from an h0 x w0 image to height x width (centred, scale up)."""
    r = min(height / h0, width / w0)
    new_w, new_h = round(w0 * r), round(h0 * r)
    dw, dh = (width - new_w) / 2, (height - new_h) / 2
    return r, float(round(dw - 0.1)), float(round(dh - 0.1))


def _match(iou, gt_cls, pred_cls) -> np.ndarray:
    """True positives at the ten IoU thresholds: ultralytics' match_predictions (DetectionValidator's greedy)."""
    return detection_ap.true_positives(np.asarray(iou, np.float64), gt_cls, pred_cls)


def decode(outputs: list[np.ndarray], b: int, task: str, head: str, nc: int) -> dict:
    """Image `b`'s predictions as the task's validator post-processes them: bboxes (letterboxed pixels; obb x y w h r),
    conf, cls and the task's extra columns."""
    import torch
    from ultralytics.utils.nms import non_max_suppression

    pred = torch.from_numpy(np.ascontiguousarray(outputs[0][b : b + 1], np.float32))
    (x,) = non_max_suppression(
        pred,
        CONF,
        NMS_IOU,
        nc=nc,
        multi_label=True,
        agnostic=False,
        max_det=MAX_DET,
        end2end=head == "e2e",
        rotated=task == "obb",
    )
    out = {"bboxes": x[:, :4], "conf": x[:, 4], "cls": x[:, 5], "extra": x[:, 6:]}
    if task == "obb":
        out["bboxes"] = torch.cat([out["bboxes"], out.pop("extra")], dim=-1)
    return out


def targets(split: TaskSplit, i: int, height: int, width: int) -> dict:
    """Image `i`'s labels in the letterboxed image, as the validator's `_prepare_batch` has them."""
    import torch
    from ultralytics.data.utils import polygons2masks_overlap
    from ultralytics.utils.ops import resample_segments, xywh2xyxy, xyxyxyxy2xywhr

    lab, (h0, w0) = split.labels[i], split.shapes[i]
    gain, left, top = letterbox_geometry(h0, w0, height, width)
    scale, pad = np.array([w0, h0]) * gain, np.array([left, top])
    cls = torch.from_numpy(np.asarray(lab.cls, np.float32))
    boxes = xywh2xyxy(np.asarray(lab.boxes, np.float64).reshape(-1, 4)) * np.tile(scale, 2) + np.tile(pad, 2)
    out = {"cls": cls, "bboxes": torch.from_numpy(boxes).float()}
    if split.task == "seg":
        n = len(cls)
        if n:
            longest = max(len(s) for s in lab.segments)
            segs = resample_segments([s.copy() for s in lab.segments], n=max(SEG_RESAMPLE, longest + 1))
            segs = [s * scale + pad for s in segs]
            overlap, index = polygons2masks_overlap((height, width), segs, downsample_ratio=MASK_RATIO)
            masks = torch.from_numpy(overlap)[None] == torch.arange(1, n + 1).view(n, 1, 1)
            out["cls"], out["bboxes"] = cls[index], out["bboxes"][index]
        else:
            masks = torch.zeros((0, height // MASK_RATIO, width // MASK_RATIO), dtype=torch.bool)
        out["masks"] = masks.float()
    elif split.task == "pose":
        kpts = np.asarray(lab.keypoints, np.float64).copy()
        kpts[..., :2] = kpts[..., :2] * scale + pad
        out["keypoints"] = torch.from_numpy(kpts).float()
    elif split.task == "obb":
        if len(cls):
            longest = max(len(s) for s in lab.segments)
            segs = resample_segments([s.copy() for s in lab.segments], n=max(OBB_RESAMPLE, longest + 1))
            corners = np.stack([s * scale + pad for s in segs]).astype(np.float32)
            out["bboxes"] = xyxyxyxy2xywhr(torch.from_numpy(corners)).float()
        else:
            out["bboxes"] = torch.zeros((0, 5))
    return out


def oks_sigmas(split: TaskSplit, kpt_shape: tuple[int, int]) -> np.ndarray:
    """PoseValidator.init_metrics' sigmas: the dataset's kpt_oks_sigmas, else COCO's for [17, 3], else 1/nkpt."""
    from ultralytics.utils.metrics import OKS_SIGMA

    if split.kpt_oks_sigmas:
        return np.asarray(split.kpt_oks_sigmas, np.float32)
    return OKS_SIGMA if list(kpt_shape) == [17, 3] else np.ones(kpt_shape[0]) / kpt_shape[0]


def image_stats(task: str, pred: dict, gt: dict, proto, shape: tuple[int, int], sigma, kpt_shape) -> dict:
    """One image's true positives (box `tp`, and `tp_m` masks / `tp_p` keypoints), as `_process_batch` finds them."""
    import torch
    from ultralytics.utils.metrics import batch_probiou, box_iou, kpt_iou, mask_iou
    from ultralytics.utils.ops import process_mask, xyxy2xywh

    n_pred, gt_cls = len(pred["cls"]), gt["cls"].numpy().astype(np.int64)
    pred_cls = pred["cls"].numpy().astype(np.int64)
    empty = np.zeros((n_pred, len(detection_ap.IOU_THRESHOLDS)), bool)
    if task == "obb":
        iou = batch_probiou(gt["bboxes"], pred["bboxes"]) if len(gt_cls) and n_pred else None
    else:
        iou = box_iou(gt["bboxes"], pred["bboxes"]) if len(gt_cls) and n_pred else None
    stats = {"tp": empty if iou is None else _match(iou, gt_cls, pred_cls)}
    if task == "seg":
        coefficients = pred["extra"]
        masks = process_mask(torch.as_tensor(proto), coefficients, pred["bboxes"], shape=shape)
        iou = mask_iou(gt["masks"].flatten(1), masks.flatten(1).float()) if len(gt_cls) and n_pred else None
        stats["tp_m"] = empty if iou is None else _match(iou, gt_cls, pred_cls)
    elif task == "pose":
        kpts = pred["extra"].view(-1, *kpt_shape)
        if len(gt_cls) and n_pred:
            area = xyxy2xywh(gt["bboxes"])[:, 2:].prod(1) * POSE_AREA
            iou = kpt_iou(gt["keypoints"], kpts, sigma=sigma, area=area)
            stats["tp_p"] = _match(iou, gt_cls, pred_cls)
        else:
            stats["tp_p"] = empty
    return stats


def _batches(n: int, batch: int):
    for start in range(0, n, batch):
        yield list(range(start, min(start + batch, n)))


def _outputs(y) -> list[np.ndarray]:
    return [np.asarray(o) for o in y] if isinstance(y, list | tuple) else [np.asarray(y)]


def cls_inputs(paths: Sequence[Path], height: int, width: int) -> np.ndarray:
    """A float32 NCHW batch as ultralytics' ClassificationDataset makes it for validation: BGR read, RGB PIL image,
    `classify_transforms` (shorter side resized to the size, centre crop; (h, w) resized exactly when not square)."""
    import cv2
    from PIL import Image

    from harness.accuracy.validator import torchvision_placeholder

    torchvision_placeholder()  # its transforms need torchvision's Python parts (this stack: without its compiled ops)
    from ultralytics.data.augment import classify_transforms

    transform = classify_transforms(size=height if height == width else (height, width))
    frames = []
    for p in paths:
        im = cv2.imread(str(p))
        if im is None:
            raise FileNotFoundError(f"cannot read image {p}")
        frames.append(transform(Image.fromarray(cv2.cvtColor(im, cv2.COLOR_BGR2RGB))).numpy())
    return np.ascontiguousarray(np.stack(frames), np.float32)


def evaluate_task(
    infer: Infer,
    split: TaskSplit,
    head: str,
    height: int,
    width: int,
    *,
    nc: int,
    names: dict[int, str] | None = None,
    kpt_shape: tuple[int, int] | None = None,
    batch: int = 1,
    source: str | None = None,
) -> dict:
    """The task's metrics of `infer` on `split` at height x width: its TASK_KEYS, `map50_95` (the primary figure,
    PRIMARY), `map50` (mAP50 of the primary quantity; None for classify), `metric`, images, dataset, source,
    postprocess. `names` are the model's classes (classify aligns the class folders to them by name, as
    ultralytics does); `kpt_shape` the pose model's."""
    from harness.yolo.inputs import letterbox_files

    task = split.task
    if task == "cls":
        return _evaluate_cls(infer, split, head, height, width, names or {}, batch, source)
    kpt_shape = kpt_shape or split.kpt_shape
    sigma = oks_sigmas(split, kpt_shape) if task == "pose" else None
    stats: dict[str, list] = {"tp": [], "tp_m": [], "tp_p": [], "conf": [], "pred_cls": [], "target_cls": []}
    for idx in _batches(len(split), batch):
        paths = [split.images[i] for i in idx]
        paths += [paths[0]] * (batch - len(paths))
        outs = _outputs(infer(letterbox_files(paths, height, width)))
        for b, i in enumerate(idx):
            pred = decode(outs, b, task, head, nc)
            gt = targets(split, i, height, width)
            proto = outs[1][b] if task == "seg" else None
            for k, v in image_stats(task, pred, gt, proto, (height, width), sigma, kpt_shape).items():
                stats[k].append(v)
            stats["conf"].append(pred["conf"].numpy())
            stats["pred_cls"].append(pred["cls"].numpy())
            stats["target_cls"].append(gt["cls"].numpy())
    cat = {k: np.concatenate(v) if v else None for k, v in stats.items()}

    def ap(tp_key: str) -> dict:
        return detection_ap.average_precision(cat[tp_key], cat["conf"], cat["pred_cls"], cat["target_cls"])

    box = ap("tp")
    result: dict = {}
    if task == "seg":
        mask = ap("tp_m")
        result |= {"mask_map50_95": mask["map50_95"], "mask_map50": mask["map50"]}
        result |= {"box_map50_95": box["map50_95"], "box_map50": box["map50"]}
        result |= {"map50_95": mask["map50_95"], "map50": mask["map50"]}
    elif task == "pose":
        pose = ap("tp_p")
        result |= {"pose_map50_95": pose["map50_95"], "pose_map50": pose["map50"]}
        result |= {"box_map50_95": box["map50_95"], "box_map50": box["map50"]}
        result |= {"map50_95": pose["map50_95"], "map50": pose["map50"]}
    else:  # obb: the field's figure is mAP50
        result |= {"obb_map50": box["map50"], "obb_map50_95": box["map50_95"]}
        result |= {"map50_95": box["map50"], "map50": box["map50"]}
    return result | _about(split, task, head, height, width, batch, source)


def _about(split: TaskSplit, task: str, head: str, height: int, width: int, batch: int, source) -> dict:
    return {
        "metric": PRIMARY[task][1],
        "images": len(split),
        "dataset": split.dataset,
        "source": source or f"{task} {head} head at {height}x{width}, batch {batch}",
        "postprocess": postprocess_description(task, head),
    }


def _evaluate_cls(infer, split: TaskSplit, head, height, width, names: dict[int, str], batch, source) -> dict:
    import torch
    from ultralytics.utils.metrics import ClassifyMetrics

    index = {str(n): int(i) for i, n in names.items()}
    kept = [i for i in range(len(split)) if split.labels[i].class_name in index]
    if not kept:
        raise ValueError(
            f"no val image of {split.dataset} is of a class the model knows ({', '.join(index)})"
        )
    if len(kept) < len(split):
        log.warning("%d val images of classes the model lacks are left out", len(split) - len(kept))
    preds, tgts = [], []
    for idx in _batches(len(kept), batch):
        paths = [split.images[kept[i]] for i in idx]
        paths += [paths[0]] * (batch - len(paths))
        probs = _outputs(infer(cls_inputs(paths, height, width)))[0][: len(idx)]
        n5 = min(len(names), 5)
        preds.append(torch.from_numpy(np.asarray(probs)).argsort(1, descending=True)[:, :n5].int())
        tgts.append(torch.tensor([index[split.labels[kept[i]].class_name] for i in idx], dtype=torch.int32))
    metrics = ClassifyMetrics()
    metrics.process(tgts, preds)
    top1, top5 = float(metrics.top1), float(metrics.top5)
    about = _about(split, "cls", head, height, width, batch, source)
    about["images"] = len(kept)
    return {"top1": top1, "top5": top5, "map50_95": top1, "map50": None} | about


def model_names(checkpoint: Path | str) -> dict[int, str]:
    """The class names a checkpoint's model carries (loaded through the harness's safe path)."""
    from harness.yolo.models import load_yolo

    names = load_yolo(Path(checkpoint)).names
    return {int(k): str(v) for k, v in dict(names).items()}
