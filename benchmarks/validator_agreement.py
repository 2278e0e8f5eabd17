"""The accuracy pass beside ultralytics' own validator: the stand-in weights' figures from `YOLO(weights).val` and from
the harness (harness.accuracy.evaluate or task_eval on the PyTorch reference) on the same generated val images, for
both heads, and (detect) the raw head again with prediction-time (single-label) NMS, the old way.

    .venv/bin/python benchmarks/validator_agreement.py [--images 32] [--shapes 320,640]
    .venv/bin/python benchmarks/validator_agreement.py --task seg --images 16 --shapes 320,640
    .venv/bin/python benchmarks/validator_agreement.py --task cls --images 32 --shapes 224,320

Prints one line per (head, shape): validator, harness, their difference (every figure of the task).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import harness  # noqa: F401  (offline environment before ultralytics is imported)
from harness.accuracy import evaluate as ev
from harness.accuracy import validator
from harness.yolo import dataset as ds
from harness.yolo import task_dataset

STANDIN = Path(__file__).resolve().parent.parent / "weights" / "standin" / "yolo26n-detect.pt"


def _task(task: str, images: int, shapes: list[int]) -> None:
    import tempfile

    from harness.accuracy import task_eval as te
    from harness.accuracy import task_split

    weights = STANDIN.with_name(f"yolo26n-{task}.pt")
    names = te.model_names(weights)
    heads = ("e2e",) if task == "cls" else ("e2e", "raw")
    with tempfile.TemporaryDirectory(prefix="agreement-") as tmp:
        split = task_split.load(task_dataset.generate_any(Path(tmp), train=1, task=task), task, limit=images)
        for s in shapes:
            for head in heads:
                theirs = validator.validate_split(weights, split, s, head)
                ours = te.evaluate_task(
                    ev.torch_reference(weights, head, s, s), split, head, s, s, nc=len(names), names=names
                )
                figures = ", ".join(
                    f"{k} {theirs[k]:.4f} / {ours[k]:.4f} ({ours[k] - theirs[k]:+.4f})"
                    for k in te.TASK_KEYS[task]
                )
                print(f"{task} {head} {s} ({len(split)} images), validator / harness: {figures}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", choices=task_dataset.ALL_TASKS, default="detect")
    p.add_argument("--images", type=int, default=ev.DEFAULT_IMAGES)
    p.add_argument("--shapes", default="320,640")
    a = p.parse_args()
    if a.task != "detect":
        _task(a.task, a.images, [int(x) for x in a.shapes.split(",")])
        return
    split = ev.load_split(limit=a.images)
    for s in (int(x) for x in a.shapes.split(",")):
        for head in ("e2e", "raw"):
            theirs = validator.validate(STANDIN, split.images, ds.CLASSES, s, head)
            ours = ev.evaluate(ev.torch_reference(STANDIN, head, s, s), head, s, s, split=split)
            print(
                f"{head} {s}: validator {theirs['map50_95']:.4f} / {theirs['map50']:.4f}, harness "
                f"{ours['map50_95']:.4f} / {ours['map50']:.4f}, difference {ours['map50_95'] - theirs['map50_95']:+.4f}",
                flush=True,
            )
        ev.VALIDATOR_NMS["multi_label"] = False
        old = ev.evaluate(ev.torch_reference(STANDIN, "raw", s, s), "raw", s, s, split=split)
        ev.VALIDATOR_NMS["multi_label"] = True
        print(f"raw {s} with single-label NMS (before): harness {old['map50_95']:.4f}", flush=True)


if __name__ == "__main__":
    main()
