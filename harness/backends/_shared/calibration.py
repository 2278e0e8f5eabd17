"""int8 calibration images: where an export request's come from, and the batches they make.

An int8 export calibrates on a dataset split: the request's `calibration` (a dataset YAML; its `calib` split, or
`val` when it has none), by default the generated dataset's calib split (harness.yolo.dataset, generated in
its default place if it is not there). Batches are letterboxed exactly as the timed input is
(harness.yolo.inputs.letterbox_files) at the request's shape and batch size. What was used is written into the
export info as {"calibration": {"images": N, "dataset": PATH, "split": NAME}}.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.backends.base import ExportRequest
from harness.yolo.inputs import letterbox_files

log = logging.getLogger(__name__)

SPLITS = ("calib", "val")  # the split calibrated on: the first one the dataset YAML has


@dataclass(frozen=True)
class Calibration:
    """A dataset YAML, the split calibrated on and its image files."""

    data_yaml: Path
    split: str
    images: tuple[Path, ...]

    def ultralytics_yaml(self, out_dir: Path, task: str = "detect") -> Path:
        """A dataset YAML for ultralytics' int8 exporter whose `val` split is the calibration images (its
        exporter calibrates on `val` or a named split, and resolves only train/val/test against `path`); pose
        carries the dataset's kpt_shape and flip_idx. Classify: a folder whose `train` and `val` are the split's
        class folders (ultralytics reads a classification dataset from a folder, not a YAML)."""
        import yaml

        doc = yaml.safe_load(self.data_yaml.read_text()) or {}
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        if task == "cls":
            classes = self.images[0].parent.parent.resolve()
            folder = out_dir / "classify"
            folder.mkdir(exist_ok=True)
            for split in ("train", "val"):
                (folder / split).symlink_to(classes, target_is_directory=True)
            return folder
        folder = str(self.images[0].parent.resolve())
        fields = {"path": folder, "train": folder, "val": folder, "names": doc.get("names") or {}}
        fields.update({k: doc[k] for k in ("kpt_shape", "flip_idx", "kpt_oks_sigmas") if k in doc})
        out = out_dir / "calibration.yaml"
        out.write_text(yaml.safe_dump(fields))
        return out

    def info(self, used: int | None = None) -> dict:
        """The export info's `calibration` section; `used` when the exporter took fewer images than the split has."""
        return {
            "images": len(self.images) if used is None else used,
            "dataset": str(self.data_yaml),
            "split": self.split,
        }


def calibration_for(req: ExportRequest) -> Calibration:
    """The calibration set of `req`: its `calibration` dataset YAML, else the generated dataset's calib split. A cell
    of another task than detect named the generated detect dataset calibrates on the generated dataset of its task
    beside it (harness.yolo.task_dataset.beside: the same images for segment, pose and obb, with the labels
    ultralytics' int8 exporter reads for that task; classify's own images)."""
    if req.task == "detect":
        return calibration_set(req.calibration)
    from harness.yolo import dataset as ds
    from harness.yolo import task_dataset

    detect_yaml = Path(req.calibration) if req.calibration else ds.generate()
    return calibration_set(task_dataset.beside(detect_yaml, req.task) or detect_yaml)


def calibration_set(data_yaml: Path | str | None) -> Calibration:
    """The calibration set of a dataset YAML (its `calib` split, else `val`); None: the generated dataset's."""
    import yaml

    from harness.yolo import dataset as ds

    data_yaml = Path(data_yaml) if data_yaml else ds.generate()
    if not data_yaml.is_file():
        raise FileNotFoundError(f"int8 calibration dataset {data_yaml} does not exist")
    doc = yaml.safe_load(data_yaml.read_text()) or {}
    split = next((s for s in SPLITS if doc.get(s)), None)
    if split is None:
        raise ValueError(f"int8 calibration dataset {data_yaml} has neither a 'calib' nor a 'val' split")
    images = tuple(ds.split_images(data_yaml, split))
    if not images:
        raise ValueError(f"int8 calibration dataset {data_yaml} has no images in its {split!r} split")
    return Calibration(data_yaml.resolve(), split, images)


def identity(data_yaml: Path) -> str:
    """What the export cache keys an int8 artifact by: the dataset YAML's text and the calibration split's image
    names and sizes (a changed, regenerated or other dataset is another artifact)."""
    import hashlib

    cal = calibration_set(data_yaml)
    h = hashlib.sha256(cal.data_yaml.read_bytes())
    h.update(cal.split.encode())
    for p in cal.images:
        h.update(f"{p.name}:{p.stat().st_size}".encode())
    return h.hexdigest()[:16]


def batches(cal: Calibration, height: int, width: int, batch: int) -> Iterator[np.ndarray]:
    """Letterboxed float32 NCHW batches of `batch` calibration images (a short last batch is dropped, unless it is
    the only one)."""
    n = len(cal.images)
    full = max(1, n // batch)
    for i in range(full):
        paths = list(cal.images[i * batch : (i + 1) * batch])
        paths += [paths[0]] * (batch - len(paths))
        yield letterbox_files(paths, height, width)


def used_images(cal: Calibration, batch: int) -> int:
    """How many distinct images `batches` feeds."""
    n = len(cal.images)
    return n if n < batch else (n // batch) * batch
