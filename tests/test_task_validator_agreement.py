"""Per task, the harness's metric agrees with ultralytics' own validator: the task's stand-in weights on its generated
val images, the PyTorch reference scored by the harness (its letterbox or classify transform, its decoding, its
matching) against `YOLO(weights).val()` on exactly those images, within 0.005 at two shapes (classify at 224 and
320), the end-to-end head at both and the raw head (through the validator's NMS) at the smaller; and the other way,
a harness that decoded with prediction-time single-label NMS would not agree."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.accuracy import task_eval as te
from harness.accuracy import task_split
from harness.accuracy.evaluate import torch_reference
from harness.yolo import dataset as ds
from harness.yolo import task_dataset as td

IMAGES = 16  # val images per task (classify: 32, evenly spaced over its classes)
TOL = 0.005
SHAPES = {"seg": (320, 640), "pose": (320, 640), "obb": (320, 640), "cls": (224, 320)}

pytestmark = pytest.mark.slow


def _standin(task: str) -> Path:
    from harness.accuracy.standin import standin_weights

    path = standin_weights("n", task)  # a compact stand-in is decoded into the session's cache on first use
    assert path is not None, f"the committed stand-in weights of {task} are missing (weights/standin)"
    return path


@pytest.fixture(scope="module")
def splits() -> dict[str, task_split.TaskSplit]:
    """Each task's val images as a run scores them: generated beside the session's evaluation dataset."""
    from harness.execute.runner import DATASET_DIR_ENV

    root = Path(os.environ[DATASET_DIR_ENV])
    out = {}
    for task in SHAPES:
        data = td.generate_any(ds.task_root(root, task), train=1, task=task)
        out[task] = task_split.load(data, task, limit=32 if task == "cls" else IMAGES)
    return out


def _both(task: str, split, side: int, head: str) -> tuple[dict, dict]:
    from harness.accuracy import validator

    weights = _standin(task)
    theirs = validator.validate_split(weights, split, side, head)
    model = te.model_names(weights)
    ours = te.evaluate_task(
        torch_reference(weights, head, side, side),
        split,
        head,
        side,
        side,
        nc=len(model),
        names=model,
        kpt_shape=split.kpt_shape,
    )
    return ours, theirs


CASES = [(t, s, "e2e") for t, shapes in SHAPES.items() for s in shapes] + [
    (t, SHAPES[t][0], "raw") for t in ("seg", "pose", "obb")
]


@pytest.mark.parametrize(("task", "side", "head"), CASES, ids=[f"{t}-{s}-{h}" for t, s, h in CASES])
def test_harness_metric_agrees_with_ultralytics_validator(splits, task, side, head):
    ours, theirs = _both(task, splits[task], side, head)
    assert ours["images"] == theirs["images"] == len(splits[task])
    for key in te.TASK_KEYS[task]:
        assert ours[key] == pytest.approx(theirs[key], abs=TOL), (key, ours, theirs)
    # a trained model, not noise: the agreement is on figures that mean something
    assert ours["map50_95"] > 0.1, ours
    print(
        f"{task} {head} {side}: "
        + ", ".join(f"{k} {ours[k]:.4f}/{theirs[k]:.4f}" for k in te.TASK_KEYS[task])
    )


def test_single_label_nms_would_not_agree_on_the_raw_head(splits, monkeypatch):
    """The other way: decoding the raw head with one label per box (prediction-time NMS) is not what the validator
    does, and misses its figure by more than the tolerance."""
    from harness.accuracy import validator

    split = splits["seg"]
    theirs = validator.validate_split(_standin("seg"), split, 320, "raw")
    import ultralytics.utils.nms as nms

    real = nms.non_max_suppression

    def single_label(*args, **kwargs):
        kwargs["multi_label"] = False
        return real(*args, **kwargs)

    monkeypatch.setattr(nms, "non_max_suppression", single_label)
    ours = te.evaluate_task(torch_reference(_standin("seg"), "raw", 320, 320), split, "raw", 320, 320, nc=5)
    gaps = [abs(ours[k] - theirs[k]) for k in te.TASK_KEYS["seg"]]
    assert max(gaps) > TOL, (ours, theirs)
