"""The committed stand-in weights: small files that load through the safe path, each described by its record; the
four task stand-ins stored compact (int8 per channel) and decoded once into the cache, a damaged one refused in one
line."""

from __future__ import annotations

import os

import pytest

from harness.accuracy import standin
from harness.yolo import models
from harness.yolo.models import (
    ModelSource,
    WeightsError,
    check_checkpoint,
    load_yolo,
    materialize,
    sha256_file,
)

CKPT = standin.standin_file("n", "detect")
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
    assert standin.standin_file("s", "detect") is None
    assert standin.standin_weights("s", "detect", tmp_path / "cache") is None
    bad = tmp_path / "yolo26n.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(WeightsError):
        check_checkpoint(bad, allow_unsafe=False)


TASKS = ("seg", "pose", "obb", "cls")
#: each task's val figure in its json (the training run's own validation) and the least that means "trained": far
#: above what an untrained model scores (0 to 0.001 mAP; classify: 0.2 top-1, five classes)
ABOVE_CHANCE = {
    "seg": ("map50_95", 0.1),
    "pose": ("map50_95", 0.1),
    "obb": ("map50", 0.2),
    "cls": ("top1", 0.4),
}


@pytest.mark.parametrize("task", TASKS)
def test_every_task_has_a_trained_stand_in_described_by_its_record(task, tmp_path):
    compact = standin.standin_file("n", task)
    assert compact is not None, (
        f"the committed stand-in is missing: {standin.STANDIN_DIR}/yolo26n-{task}.compact.pt"
    )
    assert compact.name == f"yolo26n-{task}.compact.pt"
    info = standin.standin_info(compact)
    assert info["weights"] == compact.name
    assert info["sha256"] == sha256_file(compact) and info["size_bytes"] == compact.stat().st_size
    assert info["task"] == task and info["synthetic"] is True
    assert info["command"].startswith(f"python scripts/train_standin.py --task {task}")
    assert info["command"].endswith(" --compact")  # the command reproduces the committed (compact) file
    key, least = ABOVE_CHANCE[task]
    before = info["val_fp16_before_compaction"]["by_imgsz"]
    assert before.keys() == info["val"]["by_imgsz"].keys()
    for side, figures in info["val"]["by_imgsz"].items():
        assert figures[key] > least, (task, side, figures)
        # what int8 storage cost, as the record says it: the decoded weights' figure less the fp16 one
        change = {k: round(v - before[side][k], 4) for k, v in figures.items()}
        assert info["compaction"]["val_change"][side] == change
    assert info["compaction"]["bytes_after"] == info["size_bytes"] < info["compaction"]["bytes_before"]
    # the compact file is no checkpoint; materialize decodes it once into the cache, named by its digest
    with pytest.raises(WeightsError, match="not an ultralytics checkpoint"):
        check_checkpoint(compact, allow_unsafe=False)
    cache = tmp_path / "cache"
    mat = materialize(ModelSource("n", task, standin=True), cache)
    assert mat.weights == f"standin:{info['sha256']}" and mat.sha256 == info["sha256"]
    assert mat.checkpoint == cache / "models" / f"standin-{info['sha256'][:12]}-yolo26n-{task}.pt"
    check_checkpoint(mat.checkpoint, allow_unsafe=False)
    assert load_yolo(mat.checkpoint).names == dict(enumerate(info["dataset"]["classes"]))
    decoded_at = mat.checkpoint.stat().st_mtime_ns
    assert standin.standin_weights("n", task, cache) == mat.checkpoint  # the same file, not decoded again
    assert mat.checkpoint.stat().st_mtime_ns == decoded_at


@pytest.mark.parametrize(
    "damage",
    ["truncated", "not a torch file", "another torch file", "another version"],
)
def test_a_damaged_compact_stand_in_is_refused_in_one_line(damage, tmp_path, monkeypatch):
    import torch

    good = standin.standin_file("n", "cls")
    assert good is not None
    root = tmp_path / "standin"
    root.mkdir()
    bad = root / good.name
    if damage == "truncated":
        bad.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    elif damage == "not a torch file":
        bad.write_bytes(b"not weights at all")
    elif damage == "another torch file":
        torch.save({"model": None, "note": "a PyTorch file of another kind"}, bad)
    else:
        archive = torch.load(good, weights_only=True)
        torch.save({**archive, "version": 99}, bad)
    monkeypatch.setattr(models, "STANDIN_DIR", root)
    cache = tmp_path / "cache"
    for load in (
        lambda: standin.standin_weights("n", "cls", cache),
        lambda: materialize(ModelSource("n", "cls", standin=True), cache),
    ):
        with pytest.raises(WeightsError) as e:
            load()
        assert "\n" not in str(e.value) and str(bad) in str(e.value), str(e.value)
    assert not list(cache.rglob("*.pt")), "nothing decoded from a damaged file"
    # the other way: the intact file in the same place decodes
    bad.write_bytes(good.read_bytes())
    check_checkpoint(standin.standin_weights("n", "cls", cache), allow_unsafe=False)


def test_the_stand_ins_stay_small():
    """The tracked tree travels to a GPU machine with every GPU command: the task stand-ins are stored int8 per
    channel (about 55% of their fp16 checkpoints), the detect one fp16 and compressed."""
    files = sorted(standin.STANDIN_DIR.glob("*.pt"))
    assert [f.name for f in files if not f.name.endswith(".compact.pt")] == ["yolo26n-detect.pt"]
    total = sum(p.stat().st_size for p in files)
    assert total < 20e6, f"{total / 1e6:.1f} MB of stand-in weights"
    for task in TASKS:
        info = standin.standin_info(standin.STANDIN_DIR / f"yolo26n-{task}.json")
        assert info["compaction"]["bytes_after"] < 0.6 * info["compaction"]["bytes_before"], info[
            "compaction"
        ]
