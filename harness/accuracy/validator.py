"""ultralytics' own validation (`YOLO(weights).val`) of given weights on given images: the reference figure the
harness's accuracy pass (harness.accuracy.evaluate) must agree with.

ultralytics' validator imports torchvision; on this stack (torchvision 0.28, a CUDA build, beside the CPU build of
torch 2.13) that import fails with `operator torchvision::nms does not exist`. `torchvision_placeholder` imports
torchvision's Python parts without its compiled ops where that happens (harness.yolo.torchvision_compat), with its
`ops.nms` ultralytics' own TorchNMS.nms, so the validators' NMS runs ultralytics' implementation.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Sequence
from pathlib import Path

import harness  # noqa: F401  (offline environment before ultralytics is imported)

log = logging.getLogger(__name__)


def torchvision_placeholder() -> bool:
    """torchvision's Python parts without its compiled ops, where they do not load (harness.yolo.torchvision_compat);
    True if it did."""
    from harness.yolo.torchvision_compat import load_torchvision

    return load_torchvision()


def validate(
    weights: Path | str,
    images: Sequence[Path],
    names: Sequence[str],
    imgsz: int,
    head: str,
    *,
    batch: int = 1,
    task: str = "detect",
    data_fields: dict | None = None,
) -> dict:
    """The metrics ultralytics' validator of `task` reports for `weights` on exactly `images` (labels beside them in
    the YOLO layout; classify: each image's class is its folder's name), square letterbox (rect=False; classify:
    its own transform), the end-to-end head (`nms=False`) or the raw head through the validator's NMS (`nms=True`).

    Returns the keys harness.accuracy.task_eval.evaluate_task returns for the task (detect: map50_95, map50) and
    `images`; `data_fields` go into the temporary dataset YAML (pose: kpt_shape, flip_idx, kpt_oks_sigmas)."""
    if head not in ("e2e", "raw"):
        raise ValueError(f"head must be 'e2e' or 'raw', not {head!r}")
    import yaml

    torchvision_placeholder()
    from ultralytics import YOLO

    with tempfile.TemporaryDirectory(prefix="yolo26-val-") as tmp:
        root = Path(tmp)
        if task == "cls":
            data = str(_image_folder(root / "data", images))
        else:
            (root / "images.txt").write_text("".join(f"{Path(p).resolve()}\n" for p in images))
            doc = {
                "path": str(root),
                "train": "images.txt",
                "val": "images.txt",
                "names": dict(enumerate(names)),
                **(data_fields or {}),
            }
            (root / "data.yaml").write_text(yaml.safe_dump(doc))
            data = str(root / "data.yaml")
        m = YOLO(str(weights)).val(
            data=data,
            imgsz=imgsz,
            batch=batch,
            rect=False,
            nms=head == "raw",
            device="cpu",
            plots=False,
            workers=0,
            verbose=False,
            project=str(root),
            name="val",
        )
    return _metrics(m, task) | {"images": len(images)}


def _image_folder(root: Path, images: Sequence[Path]) -> Path:
    """An ImageFolder of `images` (links, each in its class folder) with train and val splits (ultralytics' classify
    dataset check wants a train split; only val is validated)."""
    for split in ("train", "val"):
        for p in images:
            p = Path(p).resolve()
            link = root / split / p.parent.name / p.name
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(p)
    return root


def _metrics(m, task: str) -> dict:
    """The validator's metrics object as harness.accuracy.task_eval names them."""
    if task == "cls":
        return {"top1": float(m.top1), "top5": float(m.top5), "map50_95": float(m.top1)}
    box = {"map50_95": float(m.box.map), "map50": float(m.box.map50)}
    if task == "seg":
        seg = {"mask_map50_95": float(m.seg.map), "mask_map50": float(m.seg.map50)}
        return seg | {
            "box_map50_95": box["map50_95"],
            "box_map50": box["map50"],
            "map50_95": seg["mask_map50_95"],
        }
    if task == "pose":
        pose = {"pose_map50_95": float(m.pose.map), "pose_map50": float(m.pose.map50)}
        return pose | {
            "box_map50_95": box["map50_95"],
            "box_map50": box["map50"],
            "map50_95": pose["pose_map50_95"],
        }
    if task == "obb":
        return {"obb_map50": box["map50"], "obb_map50_95": box["map50_95"], "map50_95": box["map50"]}
    return box


def validate_split(weights: Path | str, split, imgsz: int, head: str, *, batch: int = 1) -> dict:
    """`validate` on the images of a harness.accuracy.task_split.TaskSplit, with its dataset's fields."""
    fields: dict = {}
    if split.kpt_shape:
        fields["kpt_shape"] = list(split.kpt_shape)
        fields["flip_idx"] = list(range(split.kpt_shape[0]))  # validation never flips; the loader asks for it
    if split.kpt_oks_sigmas:
        fields["kpt_oks_sigmas"] = list(split.kpt_oks_sigmas)
    names = [split.names[i] for i in sorted(split.names)]
    return validate(
        weights, split.images, names, imgsz, head, batch=batch, task=split.task, data_fields=fields
    )
