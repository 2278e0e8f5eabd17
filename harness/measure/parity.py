"""Agreement of a backend's outputs with the PyTorch fp32 eager reference on the same input, per output and per
quantity, by task.

What is compared (`compare`):

- detect, seg, pose, obb with the end-to-end head ([B, K, 6 + extra] rows): detections, matched one to one with the
  reference's (harness.measure.parity_detections): box IoU (rotated-box IoU for obb), score difference, class
  agreement, mask IoU (seg), keypoint similarity (pose), detections left unmatched on each side, and a
  detection-level agreement score (mAP50 of the backend's detections against the reference's, ultralytics'
  metrics).
- the raw head ([B, 4 + nc + extra, anchors]): each channel group element-wise on its own (boxes, class scores, the
  task's extra channels, seg prototypes: relative L2 within the group, never pooled across groups), then as
  detections: boxes, scores, classes, masks and keypoints at the anchors the reference's ultralytics
  non_max_suppression kept, read from both sides (NMS among near-tied overlapping boxes may keep a different one
  of two on each side, which says nothing about the backend); unmatched detections and mAP50 between each side's
  own NMS output.
- cls: top-1 and top-5 agreement and the largest probability difference.
- anything else (a remedy's different layout): each output element-wise, relative L2 per output.

Thresholds are one table, `THRESHOLDS`, each metric's bound per requested precision (fp32 strict, fp16 looser, int8
loosest); a metric outside its bound is named in `failed`, and a bounded metric that could not be measured (nothing
matched) fails too. Non-finite values in the backend's outputs always fail.

The confidence floor. The weights are random-init with BatchNorm statistics calibrated on two images
(harness.yolo.models): scores are low and near-tied (yolo26n at 320: the top score 0.067, the 50th 0.009, the
300th 0.002), so a fixed absolute floor (0.25, as for a trained model) would compare nothing, and comparing all K
rows would compare the tail, where which rows make the top-k is decided by float rounding. The floor is therefore
relative to the reference's top score in the image, `FLOOR_REL` of it (76 of the 300 rows at yolo26n 320, 73 at
yolo26x 640), and at least `TRUNCATION_MARGIN` times the last score of a full top-k or NMS list, so a detection
above the floor cannot have lost its counterpart to the list's cut on the other side. Detections at or above the
floor on either side are compared, and a match may reach down to `LOW_REL` of the top score on the other side, so a
detection just above the floor whose counterpart scores just below it is matched, not counted as unmatched. For a
trained model (top scores near 1) this is a floor of about `FLOOR_REL`, a usual confidence threshold. Score
differences are relative to the reference's top score too (`score_max_diff_rel`), so zeroed scores fail however
small the scores are.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from harness.measure import parity_detections as det

log = logging.getLogger(__name__)

REFERENCE = "torch-eager-cpu-fp32"
PRECISIONS = ("fp32", "fp16", "int8")
FLOOR_REL = 0.1  # detections scoring at least this fraction of the reference's top score are compared
LOW_REL = 0.05  # ... and may be matched by a detection down to this fraction on the other side
TRUNCATION_MARGIN = 2.0  # the floor stays this factor above the last score of a full top-k (or NMS) list
MAX_DET = 300  # the most detections the end-to-end head and non_max_suppression return per image

# One table: metric -> (kind, fp32, fp16, int8). kind "min": the value must be at least the bound; "max": at
# most. None: recorded, not judged at that precision. fp32 bounds hold with a wide margin for ONNX Runtime,
# OpenVINO and ExecuTorch-XNNPACK against torch from yolo26n at 320 to yolo26x at 640. fp16 bounds are set from
# measured fp16 runs of the random-init models at 320 (an ONNX graph converted to fp16, torch in half precision
# on the CPU, the input rounded to fp16; every task): these networks amplify rounding far more than trained ones
# (input noise of 1e-4 moves the mean box IoU to 0.95), so the fp16 bounds are what random weights allow, and every
# corruption of harness.measure.corrupt still fails them (tests/test_parity_mutation.py). int8 is not measured here.
THRESHOLDS: dict[str, tuple[str, float | None, float | None, float | None]] = {
    "comparable": ("min", 1, 1, 1),  # 0 when output counts or shapes differ: nothing else can be measured
    "nonfinite": ("max", 0, 0, 0),
    # detections (end-to-end rows, or the raw head after NMS)
    "box_iou_mean": ("min", 0.99, 0.85, 0.75),
    "box_iou_min": ("min", 0.9, None, None),
    "box_offset_px": ("max", 0.25, 2.0, 3.0),
    "score_max_diff_rel": ("max", 0.01, 0.4, 0.5),
    "class_agreement": ("min", 0.99, 0.9, 0.8),
    "unmatched_frac": ("max", 0.05, 0.1, 0.25),
    "map50": ("min", 0.95, 0.75, 0.6),
    "mask_iou_mean": ("min", 0.97, 0.8, 0.6),
    "oks_mean": ("min", 0.99, 0.85, 0.7),
    # raw-head channel groups, element-wise (relative L2 within the group)
    "boxes_rel_l2": ("max", 1e-3, 1e-2, 5e-2),
    "scores_rel_l2": ("max", 1e-3, 0.25, 0.5),
    "extra_rel_l2": ("max", 1e-3, 0.25, 0.5),
    "proto_rel_l2": ("max", 1e-3, 0.25, 0.5),
    # classification
    "top1_agreement": ("min", 1.0, 1.0, None),
    "top5_agreement": ("min", 0.8, 0.6, 0.4),
    "prob_max_diff_rel": ("max", 1e-3, 3e-2, 0.2),
    # any other layout, per output
    "rel_l2": ("max", 1e-3, 0.25, 0.5),
}


def bounds(precision: str) -> dict[str, tuple[str, float]]:
    """The judged metrics at `precision`: name -> (kind, bound)."""
    col = 1 + PRECISIONS.index(precision)
    out: dict[str, tuple[str, float]] = {}
    for m, row in THRESHOLDS.items():
        bound = row[col]
        if bound is not None:
            out[m] = (row[0], bound)
    return out


@dataclass(frozen=True)
class Layout:
    """What the outputs hold: the task, the head, the detection head's classes and keypoint shape, the input size,
    and how raw-head boxes are encoded (the backbone-only remedy emits the one-to-one head's xyxy boxes)."""

    task: str
    head: str
    nc: int | None = None
    kpt_shape: tuple[int, int] | None = None
    imgsz: tuple[int, int] = (640, 640)
    raw_boxes: str = "xywh"


@dataclass
class Parity:
    """The comparison of one cell's outputs: every metric, what was compared, and the verdict."""

    precision: str
    method: str
    metrics: dict[str, float | int | None]
    compared: dict
    null_reasons: dict[str, str] = field(default_factory=dict)
    reference: str = REFERENCE
    corrupted: list[str] | None = None

    @property
    def judged(self) -> dict[str, tuple[str, float]]:
        return {m: b for m, b in bounds(self.precision).items() if m in self.metrics}

    @property
    def failed(self) -> list[str]:
        return [m for m, (kind, bound) in self.judged.items() if not _within(self.metrics[m], kind, bound)]

    @property
    def ok(self) -> bool:
        return not self.failed

    def reason(self) -> str:
        """One line naming each failing metric, its value and its bound."""
        parts = []
        for m in self.failed:
            kind, bound = self.judged[m]
            v = self.metrics[m]
            shown = "n/a" if v is None else f"{v:.3g}"
            why = f" ({self.null_reasons[m]})" if v is None and m in self.null_reasons else ""
            parts.append(f"{m} {shown}{why} {'<' if kind == 'min' else '>'} {bound:g}")
        return f"parity ({self.precision} thresholds): " + "; ".join(parts)

    def to_dict(self) -> dict:
        d = {
            "reference": self.reference,
            "precision": self.precision,
            "method": self.method,
            "metrics": dict(self.metrics),
            "thresholds": {m: [kind, bound] for m, (kind, bound) in self.judged.items()},
            "compared": dict(self.compared),
            "failed": self.failed,
            "ok": self.ok,
        }
        if self.corrupted:
            d["corrupted"] = list(self.corrupted)
        return d


def _within(value, kind: str, bound: float) -> bool:
    if value is None or not np.isfinite(value):
        return False
    return value >= bound if kind == "min" else value <= bound


def _rel_l2(out: np.ndarray, ref: np.ndarray) -> float:
    diff = np.linalg.norm((out - ref).ravel())
    denom = np.linalg.norm(ref.ravel())
    return float(diff / denom) if denom > 0 else (0.0 if diff == 0 else float("inf"))


def _broken(precision: str, method: str, what: str) -> Parity:
    """Outputs that cannot be compared at all (count or shape differs): `comparable` is 0 and says why."""
    return Parity(precision, method, {"comparable": 0}, {"what": what})


def compare(outputs: list[np.ndarray], reference: list[np.ndarray], layout: Layout, precision: str) -> Parity:
    """Compare a backend's outputs with the reference's; see the module docstring for what is compared."""
    if precision not in PRECISIONS:
        raise ValueError(f"no parity thresholds for precision {precision!r}; valid: {', '.join(PRECISIONS)}")
    outs = [np.asarray(o, np.float64) for o in outputs]
    refs = [np.asarray(r, np.float64) for r in reference]
    if len(outs) != len(refs):
        return _broken(precision, "none", f"{len(outs)} outputs vs {len(refs)} in the reference")
    nonfinite = int(sum(np.size(o) - np.isfinite(o).sum() for o in outs))
    if nonfinite:
        what = f"{nonfinite} NaN/inf values in the outputs"
        return Parity(precision, "none", {"comparable": 1, "nonfinite": nonfinite}, {"what": what})
    method = _method(refs, layout)
    if method in ("classification", "raw-head", "elementwise"):
        for k, (o, r) in enumerate(zip(outs, refs, strict=True)):
            if o.shape != r.shape:
                return _broken(precision, method, f"output {k} shape {o.shape} vs reference {r.shape}")
    if method == "classification":
        p = classification(outs[0], refs[0], precision)
    elif method == "detections":
        p = detections_e2e(outs, refs, layout, precision)
    elif method == "raw-head":
        p = raw_head(outs, refs, layout, precision)
    else:
        p = elementwise(outs, refs, precision)
    p.metrics = {"comparable": 1, "nonfinite": 0, **p.metrics}
    return p


def _method(refs: list[np.ndarray], layout: Layout) -> str:
    first = refs[0] if refs else np.zeros(0)
    if layout.task == "cls" and first.ndim == 2:
        return "classification"
    if layout.head == "e2e" and first.ndim == 3 and first.shape[-1] >= 6:
        return "detections"
    if layout.head == "raw" and layout.nc and first.ndim == 3 and first.shape[1] >= 4 + layout.nc:
        return "raw-head"
    return "elementwise"


def elementwise(outs: list[np.ndarray], refs: list[np.ndarray], precision: str) -> Parity:
    """Each output on its own: its relative L2 and largest absolute difference (the worst output is judged)."""
    rel = [_rel_l2(o, r) for o, r in zip(outs, refs, strict=True)]
    mx = [float(np.abs(o - r).max()) if o.size else 0.0 for o, r in zip(outs, refs, strict=True)]
    return Parity(
        precision,
        "elementwise",
        {"rel_l2": max(rel, default=0.0), "max_abs": max(mx, default=0.0)},
        {
            "what": "; ".join(
                f"output {k} {o.shape} element-wise (rel. L2 {v:.3g})"
                for k, (o, v) in enumerate(zip(outs, rel, strict=True))
            )
        },
    )


def classification(out: np.ndarray, ref: np.ndarray, precision: str) -> Parity:
    """Class probabilities [B, nc]: does the backend rank the same classes first."""
    top1 = float((out.argmax(1) == ref.argmax(1)).mean())
    k = min(5, ref.shape[1])
    t_out, t_ref = np.argsort(-out, 1)[:, :k], np.argsort(-ref, 1)[:, :k]
    top5 = float(np.mean([len(set(a) & set(b)) / k for a, b in zip(t_out, t_ref, strict=True)]))
    diff = float(np.abs(out - ref).max())
    scale = float(np.abs(ref).max(initial=0.0))
    metrics = {
        "top1_agreement": top1,
        "top5_agreement": top5,
        "prob_max_diff": diff,
        "prob_max_diff_rel": diff / scale if scale > 0 else (0.0 if diff == 0 else float("inf")),
    }
    return Parity(
        precision,
        "classification",
        metrics,
        {"what": f"class probabilities {ref.shape}", "images": ref.shape[0]},
    )


def _floors(top: float, scores: np.ndarray) -> det.Floors:
    """The image's floor: FLOOR_REL of the reference's top score, and at least TRUNCATION_MARGIN times the last
    score of a full list (a detection near the cut of a top-k may be in one list and not in the other)."""
    floor = FLOOR_REL * top
    if len(scores) >= MAX_DET:
        floor = max(floor, TRUNCATION_MARGIN * float(scores.min()))
    return det.Floors(floor, floor * LOW_REL / FLOOR_REL)


def _finish_detections(
    tally: det.Tally, layout: Layout, precision: str, method: str, what: str, extra: dict
) -> Parity:
    metrics = {**extra, **det.metrics(tally, layout.task)}
    reasons = {}
    for m, v in metrics.items():
        if v is None:
            reasons[m] = (
                "no detection pairs to measure (nothing matched above the floor)"
                if tally.ref_above
                else "the reference has no detection above the floor"
            )
    compared = {
        "what": what,
        "floor_rel": FLOOR_REL,
        "low_rel": LOW_REL,
        "floors": [round(f, 6) for f in tally.floors],
        "score_scale": tally.score_scale,
        "rows_ref": tally.rows_ref,
        "rows_out": tally.rows_out,
        "ref_above_floor": tally.ref_above,
        "out_above_floor": tally.out_above,
        "matched": tally.matched,
    }
    return Parity(precision, method, metrics, compared, reasons)


def detections_e2e(outs: list[np.ndarray], refs: list[np.ndarray], layout: Layout, precision: str) -> Parity:
    """End-to-end rows [B, K, 6 + extra] (seg: prototypes as the second output) compared as detections."""
    o, r = outs[0], refs[0]
    if o.shape[0] != r.shape[0] or o.shape[-1] != r.shape[-1]:
        return _broken(precision, "detections", f"output 0 shape {o.shape} vs reference {r.shape}")
    if layout.task == "seg" and len(refs) > 1 and outs[1].shape != refs[1].shape:
        return _broken(
            precision, "detections", f"output 1 shape {outs[1].shape} vs reference {refs[1].shape}"
        )
    protos = (outs[1], refs[1]) if layout.task == "seg" and len(refs) > 1 else None
    tally = det.Tally()
    for b in range(r.shape[0]):
        ref = det.from_rows(r[b], layout.task, protos[1][b] if protos else None)
        out = det.from_rows(o[b], layout.task, protos[0][b] if protos else None)
        top = float(ref.scores.max()) if len(ref) else 0.0
        floors = _floors(top, ref.scores)
        tally.floors.append(floors.floor)
        det.compare_image(ref, out, floors, layout.task, tally, layout.imgsz, layout.kpt_shape)
    what = f"output 0: end-to-end detections {r.shape}" + (
        "; output 1: mask prototypes (masks of matched pairs)" if protos else ""
    )
    return _finish_detections(tally, layout, precision, "detections", what, {})


def raw_head(outs: list[np.ndarray], refs: list[np.ndarray], layout: Layout, precision: str) -> Parity:
    """Raw head [B, 4 + nc + extra, anchors]: each channel group element-wise, then detections after NMS."""
    o, r, nc = outs[0], refs[0], int(layout.nc or 0)
    groups = {"boxes": slice(0, 4), "scores": slice(4, 4 + nc)}
    if r.shape[1] > 4 + nc:
        groups["extra"] = slice(4 + nc, None)
    group_metrics: dict[str, float | int | None] = {}
    for name, sl in groups.items():
        group_metrics[f"{name}_rel_l2"] = _rel_l2(o[:, sl], r[:, sl])
        group_metrics[f"{name}_max_abs"] = float(np.abs(o[:, sl] - r[:, sl]).max())
    seg = layout.task == "seg" and len(refs) > 1
    if seg:
        group_metrics["proto_rel_l2"] = _rel_l2(outs[1], refs[1])
    tally = det.Tally()
    for b in range(r.shape[0]):
        rb, ob = _xywh(r[b], layout), _xywh(o[b], layout)
        top = float(rb[4 : 4 + nc].max()) if nc else 0.0
        low = LOW_REL * top
        p_ref, p_out = (refs[1][b], outs[1][b]) if seg else (None, None)
        ref, anchors = det.from_raw(rb, layout.task, nc, low, p_ref)
        out, _ = det.from_raw(ob, layout.task, nc, low, p_out)
        aligned = (
            det.at_anchors(rb, anchors, layout.task, nc, p_ref),
            det.at_anchors(ob, anchors, layout.task, nc, p_out),
        )
        floors = _floors(top, ref.scores)
        tally.floors.append(floors.floor)
        det.compare_image(ref, out, floors, layout.task, tally, layout.imgsz, layout.kpt_shape, aligned)
    what = (
        f"output 0: raw head {r.shape}, channel groups {', '.join(groups)} element-wise"
        + ("; output 1: mask prototypes element-wise" if seg else "")
        + "; then detections: boxes, scores, classes"
        + (", masks" if seg else ", keypoints" if layout.task == "pose" else "")
        + " at the anchors the reference's non_max_suppression kept (IoU 0.7), on both sides; unmatched"
        + " detections and mAP50 between each side's own NMS output"
    )
    return _finish_detections(tally, layout, precision, "raw-head", what, group_metrics)


def _xywh(raw: np.ndarray, layout: Layout) -> np.ndarray:
    """Raw-head channels with xywh boxes, as non_max_suppression reads them."""
    if layout.raw_boxes == "xywh" or layout.task == "obb":
        return raw
    from ultralytics.utils.ops import xyxy2xywh

    out = raw.copy()
    out[:4] = xyxy2xywh(raw[:4].T).T
    return out


class References:
    """PyTorch fp32 eager outputs on a cell's input, memoised for the run (the last few are kept), with the layout
    of those outputs read from the model (classes, keypoint shape) and the model's work on that forward pass
    (harness.measure.work: FLOPs and the elements moved, counted as the reference runs: no second model)."""

    def __init__(self, keep: int = 8) -> None:
        self.keep = keep
        self._outputs: dict[tuple, tuple[list[np.ndarray], Layout]] = {}
        self._work: dict[tuple, dict] = {}

    @staticmethod
    def _key(mat, cell, height: int, width: int, options: dict) -> tuple:
        return (mat.sha256, cell.task, cell.head, height, width, cell.batch, options.get("remedy"))

    def get(self, mat, cell, height: int, width: int, options: dict) -> list[np.ndarray]:
        return self._entry(mat, cell, height, width, options)[0]

    def layout(self, mat, cell, height: int, width: int, options: dict) -> Layout:
        return self._entry(mat, cell, height, width, options)[1]

    def work(self, mat, cell, height: int, width: int, options: dict) -> dict:
        """The reference model's work on the cell's input (harness.measure.work.counting)."""
        self._entry(mat, cell, height, width, options)
        return self._work[self._key(mat, cell, height, width, options)]

    def _entry(self, mat, cell, height: int, width: int, options: dict) -> tuple[list[np.ndarray], Layout]:
        import torch

        from harness.backends.torch_eager import flatten_outputs
        from harness.measure.work import counting
        from harness.yolo.inputs import letterboxed
        from harness.yolo.models import prepared_model

        variant = options.get("remedy")
        key = self._key(mat, cell, height, width, options)
        if key not in self._outputs:
            if len(self._outputs) >= self.keep:
                self._work.pop(next(iter(self._outputs)), None)
                self._outputs.pop(next(iter(self._outputs)))
            model = prepared_model(mat.checkpoint, cell.head, (height, width))
            if variant == "backbone-only":
                from harness.backends.executorch_cuda import backbone_only

                model = backbone_only(model)
            x = torch.from_numpy(letterboxed(height, width, cell.batch).copy())
            with torch.inference_mode(), counting(model, x) as work:
                y = model(x)
            self._outputs[key] = (flatten_outputs(y), layout_of(model, cell, height, width, variant))
            self._work[key] = work
        return self._outputs[key]


def layout_of(model, cell, height: int, width: int, variant: str | None = None) -> Layout:
    """The layout of `model`'s outputs for `cell`: backbone-only outputs are the raw head's, with xyxy boxes."""
    from ultralytics.nn.modules import Detect, Pose

    heads = [m for m in model.modules() if isinstance(m, Detect)]
    head = heads[-1] if heads else None
    return Layout(
        task=cell.task,
        head="raw" if variant == "backbone-only" else cell.head,
        nc=int(head.nc) if head is not None else None,
        kpt_shape=tuple(int(v) for v in head.kpt_shape) if isinstance(head, Pose) else None,
        imgsz=(height, width),
        raw_boxes="xyxy" if variant == "backbone-only" else "xywh",
    )
