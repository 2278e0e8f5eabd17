"""The val images of a segment, pose, obb or classify dataset and their labels, read as ultralytics reads them.

Labels of the YOLO layouts (segment polygons, pose boxes and keypoints, OBB corners) are read with ultralytics' own
`verify_image_label` (what its datasets call for every image: the same parsing, box-from-polygon rule and duplicate
removal); a classification split is ultralytics' ImageFolder layout (`val/<class name>/<image>`), each image's
class the name of its folder.

Which images: the first `limit` by name (as detect's pass, harness.accuracy.evaluate.load_split), except for
classification, whose images sort by class: there `limit` images evenly spaced over the sorted list (the indices
ultralytics' ClassificationDataset keeps for a `fraction`), so every class is scored.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

TASKS = ("seg", "pose", "obb", "cls")


@dataclass(frozen=True)
class Labels:
    """One image's labels: classes (n,), boxes (n, 4: cx cy w h) and segments (polygons (k, 2)) normalised as in
    the label file, keypoints (n, nkpt, ndim) normalised or None; for classification the class folder's name."""

    cls: np.ndarray
    boxes: np.ndarray
    segments: list[np.ndarray] = field(default_factory=list)
    keypoints: np.ndarray | None = None
    class_name: str | None = None


@dataclass(frozen=True)
class TaskSplit:
    """Images of one split of a task's dataset, their sizes (h, w) and labels, and what the dataset says of
    itself (names, keypoint shape and OKS sigmas where it has them)."""

    task: str
    images: tuple[Path, ...]
    shapes: tuple[tuple[int, int], ...]
    labels: tuple[Labels, ...]
    dataset: str
    names: dict[int, str]
    kpt_shape: tuple[int, int] | None = None
    kpt_oks_sigmas: tuple[float, ...] | None = None

    def __len__(self) -> int:
        return len(self.images)

    def first(self, n: int) -> TaskSplit:
        """The first `n` images of this split (already chosen as the module docstring says)."""
        return TaskSplit(
            self.task,
            self.images[:n],
            self.shapes[:n],
            self.labels[:n],
            self.dataset,
            self.names,
            self.kpt_shape,
            self.kpt_oks_sigmas,
        )


def _doc(data_yaml: Path) -> dict:
    import yaml

    doc = yaml.safe_load(Path(data_yaml).read_text()) or {}
    if not isinstance(doc, dict):
        raise ValueError(f"{data_yaml} is not a dataset YAML")
    return doc


def _names(doc: dict) -> dict[int, str]:
    names = doc.get("names") or {}
    return dict(enumerate(names)) if isinstance(names, list) else {int(k): str(v) for k, v in names.items()}


def evenly_spaced(n_items: int, count: int) -> list[int]:
    """`count` indices evenly spaced over `n_items` (ultralytics' ClassificationDataset keeps these for a
    fraction of a split)."""
    if count >= n_items:
        return list(range(n_items))
    return [int(i) for i in np.linspace(0, n_items - 1, count, dtype=int)]


def problem(data_yaml: Path | str, task: str) -> str | None:
    """Why a dataset cannot score `task`'s accuracy, or None: classification needs class folders in its val split,
    pose a `kpt_shape`, segment polygon rows, obb rows of four corners (class and eight numbers)."""
    from harness.yolo.dataset import split_images

    data_yaml = Path(data_yaml)
    try:
        doc = _doc(data_yaml)
        images = split_images(data_yaml, "val")
    except (OSError, KeyError, ValueError) as e:
        return f"its val split cannot be read ({e})"
    if not images:
        return "its val split has no images"
    val_dir = _split_dir(data_yaml, doc, "val")
    nested = all(p.parent.resolve() != val_dir for p in images)
    if task == "cls":
        return None if nested else "not a classification dataset (its val split has no class folders)"
    if nested:
        return f"a classification dataset (class folders), not a {task} dataset"
    if task == "pose":
        return None if doc.get("kpt_shape") else "not a pose dataset (its YAML has no kpt_shape)"
    rows = _label_rows(images[:20])
    if not rows:
        return None  # no labels to judge by: scored as what it says it is
    widths = {len(r) for r in rows}
    if task == "obb" and widths != {9}:
        return "not an oriented-box dataset (its label rows are not a class and four corners)"
    if task == "seg" and not any(w > 6 for w in widths):
        return "not a segmentation dataset (its label rows hold no polygons)"
    return None


def _split_dir(data_yaml: Path, doc: dict, split: str) -> Path:
    base = data_yaml.parent / doc["path"] if doc.get("path") else data_yaml.parent
    return (base / doc[split]).resolve() if split in doc else base


def _label_rows(images: list[Path]) -> list[list[str]]:
    from ultralytics.data.utils import img2label_paths

    rows = []
    for lab in img2label_paths([str(p) for p in images]):
        if Path(lab).is_file():
            rows += [line.split() for line in Path(lab).read_text().splitlines() if line.strip()]
    return rows


def load(data_yaml: Path | str, task: str, split: str = "val", limit: int | None = None) -> TaskSplit:
    """`limit` images of `split` of a `task` dataset yaml with their labels (as the module docstring says)."""
    import cv2

    from harness.yolo.dataset import split_images

    if task not in TASKS:
        raise ValueError(f"task must be one of {', '.join(TASKS)}, not {task!r}")
    data_yaml = Path(data_yaml)
    doc = _doc(data_yaml)
    names = _names(doc)
    images = split_images(data_yaml, split)
    if task == "cls":
        images = [images[i] for i in evenly_spaced(len(images), limit if limit is not None else len(images))]
    else:
        images = images[:limit]
    if not images:
        raise ValueError(f"{data_yaml} has no images in its {split!r} split")
    kpt_shape = tuple(int(v) for v in doc["kpt_shape"]) if task == "pose" and doc.get("kpt_shape") else None
    sigmas = doc.get("kpt_oks_sigmas")
    labels, shapes = [], []
    for img in images:
        if task == "cls":
            h, w = cv2.imread(str(img)).shape[:2]
            labels.append(Labels(np.zeros(0), np.zeros((0, 4)), class_name=img.parent.name))
            shapes.append((h, w))
        else:
            lab, shape = _yolo_labels(img, task, len(names), kpt_shape)
            labels.append(lab)
            shapes.append(shape)
    return TaskSplit(
        task,
        tuple(images),
        tuple(shapes),
        tuple(labels),
        str(data_yaml),
        names,
        kpt_shape,
        tuple(float(s) for s in sigmas) if sigmas else None,
    )


def _yolo_labels(
    image: Path, task: str, nc: int, kpt_shape: tuple[int, int] | None
) -> tuple[Labels, tuple[int, int]]:
    """One image's labels through ultralytics' verify_image_label, and the image's size (h, w)."""
    from ultralytics.data.utils import img2label_paths, verify_image_label

    (lab,) = img2label_paths([str(image)])
    nkpt, ndim = kpt_shape or (0, 0)
    im_file, lb, shape, segments, keypoints, *_, msg = verify_image_label(
        (str(image), lab, "", task == "pose", nc, nkpt, ndim, False)
    )
    if im_file is None:
        raise ValueError(f"ultralytics cannot read the labels of {image}: {msg}")
    lb = np.asarray(lb, np.float64).reshape(-1, 5)
    segs = [np.asarray(s, np.float64) for s in segments]
    kpts = None if keypoints is None else np.asarray(keypoints, np.float64)
    return Labels(lb[:, 0].astype(np.int64), lb[:, 1:5], segs, kpts), (int(shape[0]), int(shape[1]))
