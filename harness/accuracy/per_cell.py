"""The accuracy pass of one cell: when it means something, which images, the runner as an `infer`, the scoring,
the reference, the record and the tier.

A cell's accuracy is its task's metric (harness.accuracy.task_eval.PRIMARY: detect box mAP50-95, segment mask
mAP50-95, pose keypoint mAP50-95, obb mAP50, classify top-1), scored on the val split the run uses (`images_for` of
them) through its own runner and post-processing, and set beside the PyTorch fp32 reference's on the same images
at the same shape (detect: harness.accuracy.evaluate; the other tasks: harness.accuracy.task_eval). The images are
the user's --data where it is a dataset of the cell's task, else the generated dataset of that task beside the
run's generated detect dataset (harness.yolo.task_dataset). The torch-eager fp32 cell of a workload is that
reference; other cells of the same weights, head and shape reuse it, and it is computed once where no such cell ran.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from harness.accuracy.standin import is_standin

if TYPE_CHECKING:
    from harness.accuracy.task_split import TaskSplit

log = logging.getLogger(__name__)

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
    if task not in TASKS:
        return f"no accuracy metric for task {task!r} (scored: {', '.join(TASKS)})"
    if dynamic:
        return "dynamic-shape probe: accuracy is scored on the static-shape cells"
    if remedy:
        return "remedy attempt: accuracy is scored on the cell's own attempt"
    if weights.startswith("random-init"):
        return (
            f"{weights} weights: their accuracy means nothing (stand-in trained weights exist for yolo26n of "
            "every task; give --weights-dir and --data for your own)"
        )
    if is_standin(weights) and user_data:
        return "the stand-in weights were trained on the generated dataset: their accuracy on --data means nothing"
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


#: the tasks with an accuracy metric (harness.accuracy.task_eval.PRIMARY)
TASKS = ("detect", "seg", "pose", "obb", "cls")


def data_problem(task: str, data_yaml: Path | str | None) -> str | None:
    """Why the user's --data cannot score a `task` cell (a dataset of another task), or None."""
    if data_yaml is None:
        return None
    from harness.accuracy.task_split import problem

    why = problem(Path(data_yaml), task)
    return f"--data {data_yaml} cannot score {task}: {why}" if why else None


_SPLITS: dict[tuple, TaskSplit] = {}
_SPLITS_LOCK = threading.Lock()


def split_for(cell, data, user_data: Path | str | None, images: int):
    """The val images `cell` is scored on: detect's from the run's EvalData (`data.accuracy_split`); another task's
    from --data, else from the generated dataset of the task beside the run's generated detect dataset (generated
    on first use, val and calib only, like detect's); the first `images_for` of them at the cell's shape."""
    if cell.task == "detect":
        return data.accuracy_split(cell)
    from harness.accuracy import task_split
    from harness.yolo import task_dataset

    if user_data is not None:
        data_yaml = Path(user_data)
    else:  # beside the run's generated detect dataset, with its seed and sizes
        data_yaml = task_dataset.beside(data.dataset_yaml(), cell.task)
        if data_yaml is None:
            raise ValueError(
                f"{data.dataset_yaml()} is not a generated dataset: no generated {cell.task} data"
            )
    key = (str(data_yaml), cell.task, images)
    with _SPLITS_LOCK:
        if key not in _SPLITS:
            _SPLITS[key] = task_split.load(data_yaml, cell.task, limit=images)
    n = images_for(images, cell.shape.height, cell.shape.width)
    return _SPLITS[key].first(n)


@dataclass(frozen=True)
class ModelFacts:
    """What scoring needs to know of the model: its classes (count, and names for classify) and keypoint shape."""

    nc: int | None
    kpt_shape: tuple[int, int] | None = None
    names: dict[int, str] | None = None


_NAMES: dict[str, dict[int, str]] = {}


def model_facts(cell, checkpoint: Path, sha256: str, layout) -> ModelFacts:
    """The model's facts from the reference's layout (harness.measure.parity.Layout) and, for classify, the names
    its checkpoint carries (read once per weights)."""
    names = None
    if cell.task == "cls":
        from harness.accuracy.task_eval import model_names

        if sha256 not in _NAMES:
            _NAMES[sha256] = model_names(checkpoint)
        names = _NAMES[sha256]
    return ModelFacts(layout.nc, layout.kpt_shape, names)


def score(infer, cell, split, facts: ModelFacts, batch: int) -> dict:
    """The task's metrics of `infer` on `split` at the cell's shape (see the module docstring)."""
    h, w = cell.shape.height, cell.shape.width
    if cell.task == "detect":
        from harness.accuracy.evaluate import evaluate

        return evaluate(infer, cell.head, h, w, split=split, batch=batch)
    from harness.accuracy.task_eval import evaluate_task

    return evaluate_task(
        infer,
        split,
        cell.head,
        h,
        w,
        nc=int(facts.nc or 0),
        names=facts.names,
        kpt_shape=facts.kpt_shape,
        batch=batch,
    )


def record(result: dict, reference: dict, task: str = "detect") -> dict:
    """The record's `accuracy` section: the cell's figures beside the PyTorch fp32 reference's on the same images.
    `map50_95` holds the task's primary figure and `metric` names it; the task's own figures sit beside it
    (harness.accuracy.task_eval.TASK_KEYS)."""
    from harness.accuracy.task_eval import TASK_KEYS

    if (result["images"], result["dataset"]) != (reference["images"], reference["dataset"]):
        raise ValueError("the cell and the reference were scored on different images")
    ref = reference["map50_95"]
    section = {
        "metric": result.get("metric", "box mAP50-95"),
        "map50_95": result["map50_95"],
        "map50": result.get("map50"),
        "reference_map50_95": ref,
        "ratio": None if not ref else result["map50_95"] / ref,
        "images": result["images"],
        "dataset": result["dataset"],
        "postprocess": result.get("postprocess"),
    }
    for key in TASK_KEYS[task]:
        if key not in section:
            section[key] = result[key]
    return section
