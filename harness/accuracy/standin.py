"""The committed stand-in weights (scripts/train_standin.py): trained on the generated dataset, for accuracy."""

from __future__ import annotations

import json
from pathlib import Path

from harness.yolo.models import STANDIN_DIR, sha256_file, standin_file, standin_weights

__all__ = ["STANDIN_DIR", "is_standin", "standin_file", "standin_info", "standin_label", "standin_weights"]


def standin_info(standin: Path) -> dict:
    """What the training script recorded beside a committed stand-in file (yolo26n-<task>.json beside
    yolo26n-<task>.pt or yolo26n-<task>.compact.pt): command, wall time, val figures, dataset, sha256."""
    standin = Path(standin)
    return json.loads(standin.with_name(standin.name.split(".")[0] + ".json").read_text())


def standin_label(standin: Path) -> str:
    """How records name these weights: `standin:<sha256>` of the committed file as it is on disk (for a compact
    stand-in, the compact file, not the checkpoint decoded from it)."""
    return f"standin:{sha256_file(Path(standin))}"


def is_standin(weights: str | None) -> bool:
    """Whether a record's `weights` names the stand-in."""
    return bool(weights) and str(weights).startswith("standin:")
