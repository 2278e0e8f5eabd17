"""How exactly the generated task labels describe what was drawn: the segment polygons filled back (as ultralytics'
polygon2mask fills them) against each object's visible pixels, and how many keypoints a later object covers.

    .venv/bin/python benchmarks/task_labels.py [--images 50] [--split val]

Prints the intersection over union of polygon and pixels (mean, 5th percentile, worst) over every object of the
first N images, and the share of keypoints labelled covered (visibility 1).
"""

from __future__ import annotations

import argparse

import numpy as np

import harness  # noqa: F401  (offline environment before ultralytics is imported)
from harness.yolo import dataset as ds
from harness.yolo import shape_labels as sl


def main() -> None:
    import cv2

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=50)
    p.add_argument("--split", default="val", choices=ds.SPLITS)
    a = p.parse_args()
    ious, covered, points = [], 0, 0
    for i in range(a.images):
        img, objs, masks = ds.render_scene(ds.image_rng(0, a.split, i))
        h, w = img.shape[:2]
        for k, vis in enumerate(ds.visible_masks(masks)):
            filled = np.zeros(vis.shape, np.uint8)
            cv2.fillPoly(filled, [sl.polygon(vis).astype(np.int32)], 1)
            filled = filled.astype(bool)
            ious.append((filled & vis).sum() / (filled | vis).sum())
            kpts = sl.keypoints(objs[k], masks[k + 1 :], h, w)
            covered += int((kpts[:, 2] == sl.COVERED).sum())
            points += len(kpts)
    print(
        f"{len(ious)} objects on {a.images} {a.split} images: polygon vs visible pixels IoU mean {np.mean(ious):.4f}, "
        f"5th percentile {np.percentile(ious, 5):.4f}, worst {min(ious):.4f}; keypoints covered "
        f"{covered} of {points} ({covered / points:.1%})"
    )


if __name__ == "__main__":
    main()
