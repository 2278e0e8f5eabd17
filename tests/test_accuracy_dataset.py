"""The generated dataset: deterministic, exact boxes, ultralytics layout, regenerated only when it changed."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
import yaml

from harness.yolo import dataset as ds

SMALL = {"train": 6, "val": 4, "calib": 3}


def _digest(root: Path) -> dict[str, str]:
    files = [p for p in sorted(root.rglob("*")) if p.is_file() and p.parent.name in ds.SPLITS]
    files.append(root / "data.yaml")
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def test_two_generations_are_byte_identical(tmp_path):
    a = ds.generate(tmp_path / "a", seed=3, **SMALL)
    b = ds.generate(tmp_path / "b", seed=3, **SMALL)
    da, db = _digest(a.parent), _digest(b.parent)
    assert len(da) == 2 * sum(SMALL.values()) + 1
    assert da == db


def test_a_different_seed_differs(tmp_path):
    a = ds.generate(tmp_path / "a", seed=3, **SMALL)
    b = ds.generate(tmp_path / "b", seed=4, **SMALL)
    da, db = _digest(a.parent), _digest(b.parent)
    assert da.keys() == db.keys()
    differing = [k for k in da if k != "data.yaml" and da[k] != db[k]]
    assert len(differing) == len(da) - 1


def test_layout_and_synthetic_marking(tmp_path):
    data = ds.generate(tmp_path, seed=0, **SMALL)
    doc = yaml.safe_load(data.read_text())
    assert doc["synthetic"] is True and "Synthetic" in doc["description"]
    assert doc["names"] == dict(enumerate(ds.CLASSES))
    for split, n in SMALL.items():
        assert doc[split] == f"images/{split}"
        assert len(ds.split_images(data, split)) == n
        assert len(list((tmp_path / "labels" / split).glob("*.txt"))) == n


def test_boxes_lie_inside_images_and_every_image_has_objects(tmp_path):
    import cv2

    data = ds.generate(tmp_path, seed=1, **SMALL)
    for split in ds.SPLITS:
        for img in ds.split_images(data, split):
            h, w = cv2.imread(str(img)).shape[:2]
            rows = np.loadtxt(tmp_path / "labels" / split / f"{img.stem}.txt", ndmin=2)
            assert len(rows) >= 1
            cls, cx, cy, bw, bh = rows.T
            assert set(cls.astype(int)) <= set(range(len(ds.CLASSES)))
            assert (cx - bw / 2 >= 0).all() and (cx + bw / 2 <= 1).all()
            assert (cy - bh / 2 >= 0).all() and (cy + bh / 2 <= 1).all()
            assert (bw * w >= 4).all() and (bh * h >= 4).all()


@pytest.mark.parametrize("cls", range(len(ds.CLASSES)))
def test_label_box_is_the_drawn_pixels_of_an_unoccluded_object(cls):
    """On a flat background, the pixels that differ from it span exactly the label's box, for every class."""
    h, w = 200, 240
    rng = np.random.default_rng(cls)
    img = np.full((h, w, 3), 128, np.uint8)
    mask = ds.shape_mask(cls, h, w, (117.3, 96.8), 90.0, float(rng.uniform(0, 6.28)), filled=False)
    img[mask] = (40, 40, 220)
    obj = ds.Obj(cls, ds.mask_box(mask), (40, 40, 220))
    (line,) = ds.label_lines([obj], w, h)
    _, cx, cy, bw, bh = map(float, line.split())
    ys, xs = np.nonzero((img != 128).any(2))
    drawn = (xs.min(), ys.min(), xs.max() + 1, ys.max() + 1)
    label = ((cx - bw / 2) * w, (cy - bh / 2) * h, (cx + bw / 2) * w, (cy + bh / 2) * h)
    assert np.allclose(label, drawn, atol=1e-3), (label, drawn)
    # the verdict can come out the other way: a box one pixel off does not match
    assert not np.allclose(np.add(label, (1, 0, 0, 0)), drawn, atol=1e-3)


def test_occlusion_stays_bounded():
    """Rendered scenes do overlap objects (the bound on how much is enforced by placement)."""
    overlapping = 0
    for i in range(12):
        img, objs = ds.render(ds.image_rng(0, "train", i))
        boxes = np.array([o.box for o in objs])
        for a in range(len(boxes)):
            for b in range(a + 1, len(boxes)):
                lo, hi = np.maximum(boxes[a, :2], boxes[b, :2]), np.minimum(boxes[a, 2:], boxes[b, 2:])
                overlapping += bool((hi > lo).all())
        assert len(objs) >= 1 and img.dtype == np.uint8
    assert overlapping > 0  # the generator does produce occlusion


def test_regenerates_only_when_parameters_change(tmp_path):
    data = ds.generate(tmp_path, seed=0, **SMALL)
    first = (tmp_path / "images" / "val" / "val_00000.jpg").stat().st_mtime_ns
    assert ds.is_current(tmp_path, ds.DatasetSpec(seed=0, **SMALL))
    assert ds.generate(tmp_path, seed=0, **SMALL) == data
    assert (tmp_path / "images" / "val" / "val_00000.jpg").stat().st_mtime_ns == first
    assert not ds.is_current(tmp_path, ds.DatasetSpec(seed=0, train=7, val=4, calib=3))
    ds.generate(tmp_path, seed=0, train=7, val=4, calib=3)
    assert len(ds.split_images(data, "train")) == 7
    # a removed file makes the dataset stale
    (tmp_path / "labels" / "val" / "val_00001.txt").unlink()
    assert not ds.is_current(tmp_path, ds.DatasetSpec(seed=0, train=7, val=4, calib=3))


def test_val_images_do_not_depend_on_the_train_count(tmp_path):
    a = ds.generate(tmp_path / "a", seed=0, train=2, val=2, calib=1)
    b = ds.generate(tmp_path / "b", seed=0, train=5, val=2, calib=1)
    va, vb = ds.split_images(a, "val"), ds.split_images(b, "val")
    assert [p.read_bytes() for p in va] == [p.read_bytes() for p in vb]


def test_cli_writes_the_dataset(tmp_path, capsys):
    assert ds.main(["--out", str(tmp_path), "--train", "2", "--val", "1", "--calib", "1"]) == 0
    assert Path(capsys.readouterr().out.strip()) == tmp_path / "data.yaml"
    assert ds.main(["--out", str(tmp_path), "--train", "0"]) == 4


def test_split_images_resolves_relative_and_user_yamls(tmp_path, monkeypatch):
    ds.generate(tmp_path / "d", seed=0, train=1, val=2, calib=1)
    monkeypatch.chdir(tmp_path)
    assert len(ds.split_images(Path("d/data.yaml"), "val")) == 2  # a relative yaml path, no `path` key
    user = tmp_path / "elsewhere" / "user.yaml"
    user.parent.mkdir()
    user.write_text(f"path: {tmp_path / 'd'}\ntrain: images/train\nval: images/val\nnames: {{0: a}}\n")
    assert [p.name for p in ds.split_images(user, "val")] == ["val_00000.jpg", "val_00001.jpg"]
    with pytest.raises(KeyError):
        ds.split_images(user, "calib")
