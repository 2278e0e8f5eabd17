"""The committed stand-in weights (scripts/train_standin.py): trained on the generated dataset, for accuracy."""

from __future__ import annotations

import json
from pathlib import Path

from harness.yolo.models import STANDIN_DIR, sha256_file, standin_checkpoint

__all__ = ["STANDIN_DIR", "is_standin", "standin_checkpoint", "standin_info", "standin_label"]


def standin_info(checkpoint: Path) -> dict:
    """What the training script recorded beside the weights: command, wall time, val mAP, dataset, sha256."""
    return json.loads(Path(checkpoint).with_suffix(".json").read_text())


def standin_label(checkpoint: Path) -> str:
    """How records name these weights: `standin:<sha256>` (of the file as it is on disk)."""
    return f"standin:{sha256_file(Path(checkpoint))}"


def is_standin(weights: str | None) -> bool:
    """Whether a record's `weights` names the stand-in."""
    return bool(weights) and str(weights).startswith("standin:")
