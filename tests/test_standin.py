"""The committed stand-in weights: a small checkpoint that loads through the safe path, described by its record."""

from __future__ import annotations

import os

import pytest

from harness.accuracy import standin
from harness.yolo.models import ModelSource, WeightsError, check_checkpoint, materialize, sha256_file

CKPT = standin.standin_checkpoint("n", "detect")
pytestmark = pytest.mark.skipif(
    CKPT is None, reason="no stand-in weights (scripts/train_standin.py writes them)"
)


def test_record_matches_the_file():
    info = standin.standin_info(CKPT)
    assert info["sha256"] == sha256_file(CKPT) and info["size_bytes"] == CKPT.stat().st_size
    assert CKPT.stat().st_size < 10e6  # optimizer stripped: a few MB
    assert info["command"].startswith("python scripts/train_standin.py")
    assert info["val"]["by_imgsz"]["320"]["map50_95"] > 0.2 and info["synthetic"] is True
    assert standin.standin_label(CKPT) == f"standin:{info['sha256']}"


def test_loads_through_the_safe_path_and_as_a_weights_dir(tmp_path):
    check_checkpoint(CKPT, allow_unsafe=False)
    # --weights-dir looks for yolo26n.pt (detect has no task suffix)
    os.symlink(CKPT, tmp_path / "yolo26n.pt")
    mat = materialize(ModelSource("n", "detect", weights_dir=tmp_path), tmp_path / "cache")
    assert mat.sha256 == sha256_file(CKPT)


def test_other_sizes_have_none_and_a_non_checkpoint_is_refused(tmp_path):
    assert standin.standin_checkpoint("s", "detect") is None
    bad = tmp_path / "yolo26n.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(WeightsError):
        check_checkpoint(bad, allow_unsafe=False)
