"""Detection matching and average precision, from ultralytics' own validator and metrics.

One implementation for the two places the harness scores detections against targets: the accuracy pass
(harness.accuracy.evaluate: a cell's detections against the dataset's labels) and parity's agreement score
(harness.measure.parity_detections: a backend's detections against the reference's).

Which detection is a true positive at which IoU threshold is ultralytics' `BaseValidator.match_predictions`
(greedy in descending confidence, as ultralytics' DetectionValidator runs it, or one-to-one optimal assignment with
`use_scipy`), and the precision-recall integration is ultralytics' `ap_per_class`. `match_predictions` is a method
that only reads the validator's IoU thresholds (`iouv`); it is called here on an object holding them, because
constructing a validator imports torchvision, whose compiled ops do not load beside the CPU build of torch.
"""

from __future__ import annotations

import logging
import types

import numpy as np

log = logging.getLogger(__name__)

IOU_THRESHOLDS = np.linspace(0.5, 0.95, 10)  # the COCO thresholds (mAP50 is the first, mAP50-95 their mean)


def true_positives(
    iou: np.ndarray, true_cls: np.ndarray, pred_cls: np.ndarray, one_to_one: bool = False
) -> np.ndarray:
    """(n_pred, 10) bool: prediction j is a true positive at IoU threshold t (class-aware).

    `iou` is (n_true, n_pred). With `one_to_one=False` predictions must be ordered by descending confidence and
    are matched greedily, as ultralytics' DetectionValidator does; with True by optimal assignment per threshold.
    """
    import torch
    from ultralytics.engine.validator import BaseValidator

    n_true, n_pred = np.shape(iou)
    if n_true == 0 or n_pred == 0:
        return np.zeros((n_pred, len(IOU_THRESHOLDS)), bool)
    holder = types.SimpleNamespace(iouv=torch.from_numpy(IOU_THRESHOLDS))
    correct = BaseValidator.match_predictions(
        holder,
        torch.from_numpy(np.asarray(pred_cls)),
        torch.from_numpy(np.asarray(true_cls)),
        torch.from_numpy(np.asarray(iou, np.float64)),
        use_scipy=one_to_one,
    )
    return correct.numpy().astype(bool)


def average_precision(
    tp: np.ndarray, conf: np.ndarray, pred_cls: np.ndarray, target_cls: np.ndarray
) -> dict[str, float | None]:
    """mAP50, mAP50-95 and mean F1 over the classes present in the targets (ultralytics' ap_per_class).

    None for all three when there are no targets; zeros when there are targets and no predictions.
    """
    from ultralytics.utils.metrics import ap_per_class

    target_cls = np.asarray(target_cls)
    if target_cls.size == 0:
        return {"map50": None, "map50_95": None, "f1": None}
    if len(tp) == 0:
        return {"map50": 0.0, "map50_95": 0.0, "f1": 0.0}
    _, _, _, _, f1, ap, *_ = ap_per_class(
        np.asarray(tp, bool), np.asarray(conf), np.asarray(pred_cls), target_cls
    )
    return {"map50": float(ap[:, 0].mean()), "map50_95": float(ap.mean()), "f1": float(f1.mean())}
