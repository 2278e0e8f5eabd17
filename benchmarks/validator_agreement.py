"""The accuracy pass beside ultralytics' own validator: the stand-in weights' mAP50-95 / mAP50 from
`YOLO(weights).val` and from the harness (harness.accuracy.evaluate on the PyTorch reference) on the same generated
val images, for both heads, and the raw head again with prediction-time (single-label) NMS, the old way.

    .venv/bin/python benchmarks/validator_agreement.py [--images 32] [--shapes 320,640]

Prints one line per (head, shape): validator, harness, their difference.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import harness  # noqa: F401  (offline environment before ultralytics is imported)
from harness.accuracy import evaluate as ev
from harness.accuracy import validator
from harness.yolo import dataset as ds

STANDIN = Path(__file__).resolve().parent.parent / "weights" / "standin" / "yolo26n-detect.pt"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=ev.DEFAULT_IMAGES)
    p.add_argument("--shapes", default="320,640")
    a = p.parse_args()
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
