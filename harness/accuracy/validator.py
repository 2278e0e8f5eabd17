"""ultralytics' own validation (`YOLO(weights).val`) of given weights on given images: the reference figure the
harness's accuracy pass (harness.accuracy.evaluate) must agree with.

ultralytics' validator imports torchvision; on this stack (torchvision 0.28 beside the CPU build of torch 2.13) that
import fails with `operator torchvision::nms does not exist`. Where it does, `torchvision_placeholder` puts a module
named torchvision in its place whose `ops.nms` is ultralytics' own TorchNMS.nms (which matches torchvision's), so
the validator's NMS runs ultralytics' implementation.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import tempfile
import types
from collections.abc import Sequence
from pathlib import Path

import harness  # noqa: F401  (offline environment before ultralytics is imported)

log = logging.getLogger(__name__)


def torchvision_placeholder() -> bool:
    """Stand ultralytics' NMS in for torchvision where torchvision's compiled ops do not load; True if it did."""
    if "torchvision" in sys.modules:
        return False
    probe = [sys.executable, "-c", "import torch, torchvision.ops; torchvision.ops.nms"]
    if subprocess.run(probe, capture_output=True).returncode == 0:
        return False
    from ultralytics.utils.nms import TorchNMS

    tv = types.ModuleType("torchvision")
    tv.__dict__.update(ops=types.SimpleNamespace(nms=TorchNMS.nms), __version__="0.0+placeholder")
    sys.modules["torchvision"] = tv
    log.info("torchvision does not load here: its NMS is ultralytics' TorchNMS for this process")
    return True


def validate(
    weights: Path | str,
    images: Sequence[Path],
    names: Sequence[str],
    imgsz: int,
    head: str,
    *,
    batch: int = 1,
) -> dict:
    """mAP50-95 and mAP50 that ultralytics' DetectionValidator reports for `weights` on exactly `images` (labels
    beside them in the YOLO layout), square letterbox (rect=False), the end-to-end head (`nms=False`) or the raw
    head through the validator's NMS (`nms=True`)."""
    if head not in ("e2e", "raw"):
        raise ValueError(f"head must be 'e2e' or 'raw', not {head!r}")
    import yaml

    torchvision_placeholder()
    from ultralytics import YOLO

    with tempfile.TemporaryDirectory(prefix="yolo26-val-") as tmp:
        root = Path(tmp)
        (root / "images.txt").write_text("".join(f"{Path(p).resolve()}\n" for p in images))
        data = {
            "path": str(root),
            "train": "images.txt",
            "val": "images.txt",
            "names": dict(enumerate(names)),
        }
        (root / "data.yaml").write_text(yaml.safe_dump(data))
        m = YOLO(str(weights)).val(
            data=str(root / "data.yaml"),
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
    return {"map50_95": float(m.box.map), "map50": float(m.box.map50), "images": len(images)}
