"""Detection-level agreement of a backend's detections with the reference's detections on the same input.

Detections (end-to-end rows, or raw-head outputs decoded with ultralytics' `non_max_suppression`; for the raw head
the pairs are also read index-aligned at the anchors the reference's NMS kept, `at_anchors`) are matched one
to one with `scipy.optimize.linear_sum_assignment`: a pair must overlap (IoU >= `MATCH_IOU`; rotated boxes by
ultralytics' `batch_probiou`), and the assignment prefers pairs of the same class, then pairs of near-equal score
(the end-to-end top-k can hold one anchor several times with different classes, identical boxes, so class and
score break ties that IoU alone cannot). The matched pairs are measured per quantity: box IoU (mean, minimum),
score difference, class agreement, mask IoU (seg, masks built with ultralytics' `process_mask`), keypoint
similarity (pose, ultralytics' `kpt_iou`: OKS, the keypoint distance normalised by the box area), and the
detections left unmatched on each side are counted. A detection-level agreement score treats the reference's
detections as ground truth and the backend's as predictions: mAP50, mAP50-95 and F1 from ultralytics'
`ap_per_class`, with true positives found by class-aware optimal assignment at each IoU threshold (what ultralytics'
validator does with `use_scipy`).

Which detections take part (the confidence floor) is decided by `harness.measure.parity`; see its docstring.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from harness.accuracy import detection_ap

log = logging.getLogger(__name__)

MATCH_IOU = 0.5  # a backend detection and a reference detection are the same object only above this IoU
IOU_THRESHOLDS = detection_ap.IOU_THRESHOLDS  # the COCO thresholds ap_per_class expects (mAP50 is the first)
SCORE_TIE_WEIGHT = 0.1  # weight of score closeness in the assignment: below one class (1.0) and IoU (0..1)
UNMATCHABLE = 1e6
POSE_AREA_FACTOR = 0.53  # box area to object area, as ultralytics' PoseValidator scales it for OKS


@dataclass
class Dets:
    """Detections of one image: boxes (n, 4) xyxy, or (n, 5) xywhr for rotated boxes, scores, classes and the
    task's extra columns (mask coefficients, keypoints as x, y, visibility); `proto` holds the seg prototypes."""

    boxes: np.ndarray
    scores: np.ndarray
    classes: np.ndarray
    extra: np.ndarray
    proto: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.scores)

    def take(self, keep: np.ndarray) -> Dets:
        return Dets(self.boxes[keep], self.scores[keep], self.classes[keep], self.extra[keep], self.proto)


def from_rows(rows: np.ndarray, task: str, proto: np.ndarray | None = None) -> Dets:
    """Detections from [n, 6 + extra] rows: x1 y1 x2 y2 score class extra..., or for obb cx cy w h score class
    angle (the layout of the end-to-end head and of ultralytics' NMS output)."""
    rows = np.asarray(rows, np.float64).reshape(-1, np.shape(rows)[-1])
    if task == "obb":
        boxes, extra = np.concatenate([rows[:, :4], rows[:, 6:7]], axis=1), rows[:, 7:]
    else:
        boxes, extra = rows[:, :4], rows[:, 6:]
    return Dets(boxes, rows[:, 4], np.rint(rows[:, 5]).astype(np.int64), extra, proto)


def from_raw(
    raw: np.ndarray, task: str, nc: int, conf: float, proto: np.ndarray | None = None
) -> tuple[Dets, np.ndarray]:
    """Detections of one image from the raw head [4 + nc + extra, anchors] (xywh boxes) via ultralytics'
    non_max_suppression (IoU 0.7 as its validators use, at most 300 detections, scores above `conf`), and the
    anchors they come from."""
    import torch
    from ultralytics.utils.nms import non_max_suppression

    pred = torch.from_numpy(np.ascontiguousarray(raw, np.float32))[None]
    out, keep = non_max_suppression(
        pred, conf_thres=conf, iou_thres=0.7, nc=nc, max_det=300, rotated=task == "obb", return_idxs=True
    )
    return from_rows(out[0].numpy(), task, proto), keep[0].numpy().reshape(-1).astype(np.int64)


def at_anchors(
    raw: np.ndarray, anchors: np.ndarray, task: str, nc: int, proto: np.ndarray | None = None
) -> Dets:
    """The raw head's detections [4 + nc + extra, anchors] at `anchors`, decoded as non_max_suppression decodes
    them (best class, its score, xyxy boxes; obb keeps xywh and the angle) but without suppressing any."""
    from ultralytics.utils.ops import xywh2xyxy

    cols = np.asarray(raw, np.float64)[:, anchors].T
    boxes, scores, extra = cols[:, :4], cols[:, 4 : 4 + nc], cols[:, 4 + nc :]
    if task == "obb":
        boxes, extra = np.concatenate([boxes, extra[:, :1]], axis=1), extra[:, 1:]
    else:
        boxes = xywh2xyxy(boxes)
    return Dets(boxes, scores.max(1), scores.argmax(1).astype(np.int64), extra, proto)


def similarity(ref: Dets, out: Dets, task: str) -> np.ndarray:
    """IoU of every reference box with every backend box (nr, no); rotated boxes by probabilistic IoU."""
    import torch
    from ultralytics.utils.metrics import batch_probiou, box_iou

    if len(ref) == 0 or len(out) == 0:
        return np.zeros((len(ref), len(out)))
    a, b = torch.from_numpy(ref.boxes).float(), torch.from_numpy(out.boxes).float()
    if task != "obb":
        # the rectangle the corners span: YOLO26 regresses box distances without DFL, and random-init weights
        # give some boxes x2 < x1 or y2 < y1, whose IoU box_iou cannot measure
        a, b = _spanned(a), _spanned(b)
    sim = batch_probiou(a, b) if task == "obb" else box_iou(a, b)
    return np.nan_to_num(sim.numpy().astype(np.float64))


def _spanned(boxes):
    """xyxy boxes with their corners ordered (x1 <= x2, y1 <= y2)."""
    import torch

    return torch.cat(
        [torch.minimum(boxes[:, :2], boxes[:, 2:]), torch.maximum(boxes[:, :2], boxes[:, 2:])], 1
    )


def match(ref: Dets, out: Dets, sim: np.ndarray, score_scale: float) -> tuple[np.ndarray, np.ndarray]:
    """One-to-one optimal assignment of reference to backend detections; returns the matched index pairs."""
    # imported here: scipy.optimize takes ~0.7 s to import, and a suite run imports this module (through the runner)
    # before it checks its options
    from scipy.optimize import linear_sum_assignment

    if sim.size == 0:
        return np.zeros(0, int), np.zeros(0, int)
    same = ref.classes[:, None] == out.classes[None, :]
    gap = np.abs(ref.scores[:, None] - out.scores[None, :]) / max(score_scale, 1e-12)
    gain = sim + same + SCORE_TIE_WEIGHT * (1.0 - np.minimum(gap, 1.0))
    allowed = sim >= MATCH_IOU
    ri, oi = linear_sum_assignment(np.where(allowed, -gain, UNMATCHABLE))
    keep = allowed[ri, oi]
    return ri[keep], oi[keep]


def true_positives(ref: Dets, out: Dets, sim: np.ndarray) -> np.ndarray:
    """(n_out, 10) bool: backend detection i is a true positive at IoU threshold j, by class-aware optimal
    assignment at each threshold (ultralytics' BaseValidator.match_predictions with use_scipy=True)."""
    return detection_ap.true_positives(sim, ref.classes, out.classes, one_to_one=True)


def _masks(d: Dets, idx: np.ndarray, imgsz: tuple[int, int]):
    """Binary masks (n, mh*mw) at prototype resolution of the detections `idx` (ultralytics' process_mask)."""
    import torch
    from ultralytics.utils.ops import process_mask

    proto = torch.from_numpy(np.ascontiguousarray(d.proto, np.float32))
    coef = torch.from_numpy(np.ascontiguousarray(d.extra[idx, : proto.shape[0]], np.float32))
    boxes = torch.from_numpy(np.ascontiguousarray(d.boxes[idx], np.float32))
    return process_mask(proto, coef, boxes, imgsz, upsample=False).flatten(1).float()


def pair_mask_iou(ref: Dets, out: Dets, ri: np.ndarray, oi: np.ndarray, imgsz: tuple[int, int]) -> np.ndarray:
    """Mask IoU of each matched pair (ultralytics' mask_iou); two empty masks agree (IoU 1)."""
    from ultralytics.utils.metrics import mask_iou

    if len(ri) == 0:
        return np.zeros(0)
    a, b = _masks(ref, ri, imgsz), _masks(out, oi, imgsz)
    iou = np.array([float(mask_iou(a[i : i + 1], b[i : i + 1])[0, 0]) for i in range(len(ri))])
    both_empty = ((a.sum(1) == 0) & (b.sum(1) == 0)).numpy()
    return np.where(both_empty, 1.0, iou)


def pair_oks(ref: Dets, out: Dets, ri: np.ndarray, oi: np.ndarray, kpt_shape: tuple[int, int]) -> np.ndarray:
    """Object keypoint similarity of each matched pair: ultralytics' kpt_iou (COCO sigmas for 17 keypoints), the
    keypoint distance normalised by the reference box's area as ultralytics' pose validator does."""
    import torch
    from ultralytics.utils.metrics import OKS_SIGMA, kpt_iou

    if len(ri) == 0:
        return np.zeros(0)
    n, dims = kpt_shape
    k1 = torch.from_numpy(np.ascontiguousarray(ref.extra[ri, : n * dims])).float().view(-1, n, dims)[..., :2]
    k2 = torch.from_numpy(np.ascontiguousarray(out.extra[oi, : n * dims])).float().view(-1, n, dims)[..., :2]
    # kpt_iou skips reference keypoints whose visibility is exactly 0; compare every keypoint's position
    k1 = torch.cat([k1, torch.ones_like(k1[..., :1])], -1)
    k2 = torch.cat([k2, torch.ones_like(k2[..., :1])], -1)
    sigma = list(OKS_SIGMA) if n == len(OKS_SIGMA) else [1.0 / n] * n
    wh = np.abs(ref.boxes[ri, 2:4] - ref.boxes[ri, :2])
    area = torch.from_numpy(wh[:, 0] * wh[:, 1] * POSE_AREA_FACTOR).float()
    return np.array(
        [float(kpt_iou(k1[i : i + 1], k2[i : i + 1], area[i : i + 1], sigma)[0, 0]) for i in range(len(ri))]
    )


@dataclass
class Tally:
    """What the images of a batch contribute, pooled before the metrics are taken."""

    iou: list[np.ndarray] = field(default_factory=list)
    offset: list[np.ndarray] = field(default_factory=list)
    score_diff: list[np.ndarray] = field(default_factory=list)
    same_class: list[np.ndarray] = field(default_factory=list)
    mask_iou: list[np.ndarray] = field(default_factory=list)
    oks: list[np.ndarray] = field(default_factory=list)
    tp: list[np.ndarray] = field(default_factory=list)
    conf: list[np.ndarray] = field(default_factory=list)
    pred_cls: list[np.ndarray] = field(default_factory=list)
    target_cls: list[np.ndarray] = field(default_factory=list)
    score_scale: float = 0.0
    floors: list[float] = field(default_factory=list)
    rows_ref: int = 0
    rows_out: int = 0
    ref_above: int = 0
    out_above: int = 0
    matched: int = 0
    unmatched_ref: int = 0
    unmatched_out: int = 0


@dataclass(frozen=True)
class Floors:
    """The confidence floor of one image: detections at or above `floor` are compared; candidates for a match
    reach down to `low`, so a detection just above the floor on one side finds its counterpart just below it on
    the other."""

    floor: float
    low: float


def compare_image(
    ref: Dets,
    out: Dets,
    floors: Floors,
    task: str,
    tally: Tally,
    imgsz: tuple[int, int],
    kpt_shape: tuple[int, int] | None = None,
    aligned: tuple[Dets, Dets] | None = None,
) -> None:
    """Match one image's detections and add what the pairs and the leftovers say to `tally`.

    The detection sets are always matched one to one (unmatched counts, agreement score). The pairs whose boxes,
    scores, classes, masks and keypoints are measured are the matched pairs, or, when `aligned` is given, its
    index-aligned pairs: the raw head's detections at the anchors the reference's NMS kept, taken from both sides,
    so that which of two near-tied overlapping boxes NMS keeps does not decide what is compared."""
    tally.rows_ref += len(ref)
    tally.rows_out += len(out)
    scale = float(ref.scores.max()) if len(ref) else 0.0
    tally.score_scale = max(tally.score_scale, scale)
    ref_c, out_c = ref.take(ref.scores >= floors.low), out.take(out.scores >= floors.low)
    sim = similarity(ref_c, out_c, task)
    ri, oi = match(ref_c, out_c, sim, scale)
    ref_above, out_above = ref_c.scores >= floors.floor, out_c.scores >= floors.floor
    tally.ref_above += int(ref_above.sum())
    tally.out_above += int(out_above.sum())
    matched_r, matched_o = np.zeros(len(ref_c), bool), np.zeros(len(out_c), bool)
    matched_r[ri], matched_o[oi] = True, True
    tally.unmatched_ref += int((ref_above & ~matched_r).sum())
    tally.unmatched_out += int((out_above & ~matched_o).sum())
    if aligned is None:
        pair = ref_above[ri] | out_above[oi]  # a pair is compared when either side is above the floor
        pairs = (ref_c, out_c, ri[pair], oi[pair], sim[ri[pair], oi[pair]])
    else:
        a_ref, a_out = aligned
        keep = np.flatnonzero((a_ref.scores >= floors.floor) | (a_out.scores >= floors.floor))
        a_ref, a_out = a_ref.take(keep), a_out.take(keep)
        idx = np.arange(len(keep))
        pairs = (a_ref, a_out, idx, idx, np.diagonal(similarity(a_ref, a_out, task)).copy())
    _measure_pairs(*pairs, task, tally, imgsz, kpt_shape)
    # agreement score: the reference's detections above the floor are the ground truth, every backend candidate
    # a prediction ranked by its own score
    targets = ref_c.take(ref_above)
    tally.tp.append(true_positives(targets, out_c, sim[ref_above]))
    # confidences relative to the reference's top score: ap_per_class reads its F1 off a 0..1 confidence grid,
    # on which random-init scores (a few hundredths) would fill only the first few steps; the ranking is unchanged
    tally.conf.append(np.clip(out_c.scores / max(scale, 1e-12), 0.0, 1.0))
    tally.pred_cls.append(out_c.classes)
    tally.target_cls.append(targets.classes)


def _measure_pairs(
    ref: Dets,
    out: Dets,
    ri: np.ndarray,
    oi: np.ndarray,
    iou: np.ndarray,
    task: str,
    tally: Tally,
    imgsz: tuple[int, int],
    kpt_shape: tuple[int, int] | None,
) -> None:
    """Add what the pairs (ref[ri[k]], out[oi[k]]) say to `tally`."""
    tally.matched += len(ri)
    tally.iou.append(iou)
    tally.offset.append(_centers(out.boxes[oi], task) - _centers(ref.boxes[ri], task))
    tally.score_diff.append(np.abs(ref.scores[ri] - out.scores[oi]))
    tally.same_class.append(ref.classes[ri] == out.classes[oi])
    if task == "seg" and ref.proto is not None and out.proto is not None:
        tally.mask_iou.append(pair_mask_iou(ref, out, ri, oi, imgsz))
    if task == "pose" and kpt_shape:
        tally.oks.append(pair_oks(ref, out, ri, oi, kpt_shape))


def _centers(boxes: np.ndarray, task: str) -> np.ndarray:
    return boxes[:, :2] if task == "obb" else (boxes[:, :2] + boxes[:, 2:4]) / 2


def _mean(parts: list[np.ndarray]) -> float | None:
    v = np.concatenate(parts) if parts else np.zeros(0)
    return float(v.mean()) if v.size else None


def _min(parts: list[np.ndarray]) -> float | None:
    v = np.concatenate(parts) if parts else np.zeros(0)
    return float(v.min()) if v.size else None


def _max(parts: list[np.ndarray]) -> float | None:
    v = np.concatenate(parts) if parts else np.zeros(0)
    return float(v.max()) if v.size else None


def agreement(tally: Tally) -> dict[str, float | None]:
    """mAP50, mAP50-95 and F1 of the backend's detections against the reference's (ultralytics' ap_per_class)."""
    if not tally.target_cls:
        return detection_ap.average_precision(np.zeros((0, 10), bool), np.zeros(0), np.zeros(0), np.zeros(0))
    return detection_ap.average_precision(
        np.concatenate(tally.tp),
        np.concatenate(tally.conf),
        np.concatenate(tally.pred_cls),
        np.concatenate(tally.target_cls),
    )


def metrics(tally: Tally, task: str) -> dict[str, float | int | None]:
    """The detection metrics of a tally (None where nothing was there to measure)."""
    diff = _max(tally.score_diff)
    offsets = np.concatenate(tally.offset) if tally.offset else np.zeros((0, 2))
    m: dict[str, float | int | None] = {
        "box_iou_mean": _mean(tally.iou),
        "box_iou_min": _min(tally.iou),
        # the mean displacement of matched boxes: rounding errors scatter and average out, a systematic shift (a
        # padding or anchor-offset bug) does not
        "box_offset_px": float(np.linalg.norm(offsets.mean(0))) if len(offsets) else None,
        "score_max_diff": diff,
        "score_max_diff_rel": None if diff is None else diff / max(tally.score_scale, 1e-12),
        "class_agreement": _mean([s.astype(float) for s in tally.same_class]),
        "unmatched_ref": tally.unmatched_ref,
        "unmatched_out": tally.unmatched_out,
        "unmatched_frac": (tally.unmatched_ref + tally.unmatched_out)
        / max(1, tally.ref_above + tally.out_above),
        **agreement(tally),
    }
    if task == "seg":
        m["mask_iou_mean"], m["mask_iou_min"] = _mean(tally.mask_iou), _min(tally.mask_iou)
    if task == "pose":
        m["oks_mean"], m["oks_min"] = _mean(tally.oks), _min(tally.oks)
    return m
