"""The accuracy pass of one cell: when it means something, the runner as an `infer`, the reference, the tier.

A cell's mAP is scored on the val split the run uses (`images_for` of them, passed in by the caller) through
its own runner and post-processing, and set beside the PyTorch fp32 reference's mAP on the same images at the same
shape (harness.accuracy.evaluate). The torch-eager fp32 cell of a workload is that reference; other cells of the
same weights, head and shape reuse it, and it is computed once where no such cell ran.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from harness.accuracy.standin import is_standin

#: accuracy tiers: the share of the reference's mAP50-95 a cell keeps
TIERS = ((0.99, "within 99%"), (0.95, "within 95%"))
BELOW = "below 95%"


#: the fewest val images a cell is scored on
MIN_IMAGES = 8


def images_for(images: int, height: int, width: int) -> int:
    """Val images scored at a shape: `images` up to 640x640 pixels, fewer in proportion above (at least
    MIN_IMAGES), so that a cell's accuracy pass costs about the same at every shape (a yolo26n@1280 round takes 4x
    a 640 one)."""
    scaled = round(images * (640 * 640) / max(1, height * width))
    return max(min(images, MIN_IMAGES), min(images, scaled))


def tier(ratio: float | None) -> str | None:
    """The record's `accuracy.tier` for a ratio to the reference's mAP50-95."""
    if ratio is None:
        return None
    return next((name for floor, name in TIERS if ratio >= floor), BELOW)


def skip_reason(
    *,
    enabled: bool,
    task: str,
    dynamic: bool,
    weights: str,
    user_data: bool,
    remedy: bool,
) -> str | None:
    """Why this cell gets no accuracy figure, or None when it is scored."""
    if not enabled:
        return "accuracy switched off (--no-accuracy)"
    if task != "detect":
        return f"accuracy is scored for detect models only, not {task} (box mAP on a detection dataset)"
    if dynamic:
        return "dynamic-shape probe: accuracy is scored on the static-shape cells"
    if remedy:
        return "remedy attempt: accuracy is scored on the cell's own attempt"
    if weights.startswith("random-init"):
        return (
            f"{weights} weights: their mAP means nothing (stand-in trained weights exist for yolo26n detect; "
            "give --weights-dir and --data for your own)"
        )
    if is_standin(weights) and user_data:
        return "the stand-in weights were trained on the generated dataset: their mAP on --data means nothing"
    if not is_standin(weights) and not user_data:
        return "your weights on the generated synthetic dataset would mean nothing: give --data DATASET_YAML"
    return None


def runner_infer(runner) -> Callable[[np.ndarray], object]:
    """The cell's runner as evaluate()'s `infer`: its own input preparation, run, synchronize and outputs."""

    def infer(x: np.ndarray):
        result = runner.run(runner.prepare(x))
        runner.synchronize()
        return runner.outputs(result)

    return infer


def reference_key(
    weights_sha256: str, head: str, height: int, width: int, dataset: str, images: int
) -> tuple:
    return (weights_sha256, head, height, width, dataset, images)
