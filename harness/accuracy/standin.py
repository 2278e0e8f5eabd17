"""The committed stand-in weights (scripts/train_standin.py): trained on the generated dataset, for accuracy."""

from __future__ import annotations

import json
from pathlib import Path

STANDIN_DIR = Path(__file__).resolve().parents[2] / "weights" / "standin"


def standin_checkpoint(size: str, task: str) -> Path | None:
    """The stand-in weights file for yolo26{size} {task}, or None where none is committed (only n detect is)."""
    f = STANDIN_DIR / f"yolo26{size}-{task}.pt"
    return f if f.is_file() else None


def standin_info(checkpoint: Path) -> dict:
    """What the training script recorded beside the weights: command, wall time, val mAP, dataset, sha256."""
    return json.loads(Path(checkpoint).with_suffix(".json").read_text())


def standin_label(checkpoint: Path) -> str:
    """How records name these weights: `standin:<sha256>` (of the file as it is on disk)."""
    from harness.yolo.models import sha256_file

    return f"standin:{sha256_file(Path(checkpoint))}"


def is_standin(weights: str | None) -> bool:
    """Whether a record's `weights` names the stand-in."""
    return bool(weights) and str(weights).startswith("standin:")
