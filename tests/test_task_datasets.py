"""The generated datasets of every task: detect's bytes unchanged; segment, pose and obb on detect's very images with
labels ultralytics reads without complaint and that match what was drawn (polygons fill back to the visible pixels,
keypoints lie on the outline and mirror onto their flip_idx slot, rotated rectangles hold every pixel); classify in
ImageFolder layout, one class per folder, balanced; every data.yaml marked synthetic; regenerated only on change."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
import yaml

from harness.yolo import dataset as ds
from harness.yolo import shape_labels as sl
from harness.yolo import task_dataset as td

SMALL = {"train": 3, "val": 3, "calib": 2}
#: sha256 of a detect generation (seed 0, 2/2/1 images: images, labels and data.yaml in path order), computed with
#: the generator as committed before the other tasks' datasets were added: detect's stand-in was trained on it
DETECT_FINGERPRINT = "d0e559b212f7452008a28a9ba40914ed09807c973842c6b0746b899b7f137744"


def test_detect_dataset_is_byte_identical_to_what_its_stand_in_was_trained_on(tmp_path):
    d = ds.generate(tmp_path, seed=0, train=2, val=2, calib=1).parent
    h = hashlib.sha256()
    for p in sorted(d.rglob("*")):
        if p.is_file() and p.parent.name in ds.SPLITS:
            h.update(p.read_bytes())
    h.update((d / "data.yaml").read_bytes())
    assert h.hexdigest() == DETECT_FINGERPRINT


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tasks")
    return {task: td.generate_any(root / task, seed=0, task=task, **SMALL) for task in td.ALL_TASKS}


@pytest.mark.parametrize("task", ["seg", "pose", "obb"])
def test_segment_pose_obb_use_detects_images(generated, task):
    for split in ds.SPLITS:
        mine, theirs = ds.split_images(generated[task], split), ds.split_images(generated["detect"], split)
        assert [p.read_bytes() for p in mine] == [p.read_bytes() for p in theirs]


@pytest.mark.parametrize("task", td.ALL_TASKS)
def test_every_data_yaml_is_marked_synthetic(generated, task):
    doc = yaml.safe_load(generated[task].read_text())
    assert doc["synthetic"] is True and "Synthetic" in doc["description"]
    if task == "pose":
        assert doc["kpt_shape"] == [17, 3] and doc["flip_idx"] == list(sl.FLIP_IDX)
    if task == "cls":
        assert doc["names"] == dict(enumerate(sorted(ds.CLASSES)))  # ImageFolder's (sorted) order
    for split, n in SMALL.items():
        assert len(ds.split_images(generated[task], split)) == n


@pytest.mark.parametrize("task", ["seg", "pose", "obb"])
def test_ultralytics_reads_every_label_without_complaint(generated, task):
    from ultralytics.data.utils import img2label_paths, verify_image_label

    for img in ds.split_images(generated[task], "train"):
        (lab,) = img2label_paths([str(img)])
        out = verify_image_label((str(img), lab, "", task == "pose", len(ds.CLASSES), 17, 3, False))
        assert out[0] is not None and out[-1] == "", out[-1]
        assert len(out[1]) >= 1
        if task == "pose":
            assert out[4].shape[1:] == (17, 3) and set(np.unique(out[4][..., 2])) <= {1.0, 2.0}
        if task == "obb":
            assert all(s.shape == (4, 2) for s in out[3])


def _scenes(n: int = 6):
    for i in range(n):
        yield ds.render_scene(ds.image_rng(0, "train", i))


def test_polygons_fill_back_to_the_visible_pixels():
    import cv2

    ious = []
    for _img, _objs, masks in _scenes():
        for vis in ds.visible_masks(masks):
            poly = sl.polygon(vis)
            filled = np.zeros(vis.shape, np.uint8)
            cv2.fillPoly(
                filled, [poly.astype(np.int32)], 1
            )  # ultralytics' polygon2mask truncates the same way
            ious.append((filled.astype(bool) & vis).sum() / (filled.astype(bool) | vis).sum())
    assert min(ious) > 0.8 and np.mean(ious) > 0.95, (min(ious), np.mean(ious))


def _mirror(o: ds.Obj, w: int) -> ds.Obj:
    x0, y0, x1, y1 = o.box
    return ds.Obj(
        o.cls, (w - x1, y0, w - x0, y1), o.color, (w - o.center[0], o.center[1]), o.extent, np.pi - o.angle
    )


@pytest.mark.parametrize("cls", range(len(ds.CLASSES)))
def test_keypoints_lie_on_the_outline_and_mirror_onto_their_flip_slot(cls):
    """A mirrored shape's keypoints are the mirrored keypoints, each moved to its flip_idx slot: so ultralytics'
    horizontal flip augmentation teaches the right points. Slot 0 is the centre, the others on the outline."""
    h = w = 400
    o = ds.Obj(cls, (0, 0, 0, 0), (0, 0, 0), (183.3, 201.7), 160.0, 0.37, True)
    k = sl.keypoints(o, [], h, w)
    m = sl.keypoints(_mirror(o, w), [], h, w)
    mirrored = k.copy()
    mirrored[:, 0] = w - k[:, 0]
    assert np.abs(m[:, :2] - mirrored[list(sl.FLIP_IDX), :2]).max() < 1.5
    radii = np.linalg.norm(k[1:, :2] - k[0, :2], axis=1)
    assert radii.min() > 0.2 * 80 and radii.max() < 1.05 * 80  # on the outline, within the shape's extent
    if ds.CLASSES[cls] == "circle":
        assert np.allclose(radii, 80, atol=1e-6)
    assert (k[:, 2] == sl.VISIBLE).all()


def test_a_keypoint_under_a_later_object_is_labelled_not_visible():
    o = ds.Obj(0, (0, 0, 0, 0), (0, 0, 0), (100.0, 100.0), 80.0, 0.0, True)
    cover = np.zeros((200, 200), bool)
    cover[90:110, 90:110] = True  # over the centre only
    k = sl.keypoints(o, [cover], 200, 200)
    assert k[0, 2] == sl.COVERED and (k[1:, 2] == sl.VISIBLE).all()


def test_rotated_rectangles_hold_every_pixel_and_at_angle_zero_are_the_box():
    for _, objs, masks in _scenes():
        for o, m in zip(objs, masks, strict=True):
            rect = sl.rotated_rect(o, m)
            ys, xs = np.nonzero(m)
            u = rect[1] - rect[0]
            v = rect[3] - rect[0]
            for px, py in ((xs + 0.5, ys + 0.5),):
                p = np.stack([px, py], 1) - rect[0]
                a, b = p @ u / (u @ u), p @ v / (v @ v)
                assert (
                    (a >= -1e-6).all()
                    and (a <= 1 + 1e-6).all()
                    and (b >= -1e-6).all()
                    and (b <= 1 + 1e-6).all()
                )
            if ds.CLASSES[o.cls] in ("circle", "ring"):
                x0, y0, x1, y1 = o.box
                assert np.allclose(rect, [[x0, y0], [x1, y0], [x1, y1], [x0, y1]])


def test_a_rotated_square_s_rectangle_is_the_square():
    h = w = 300
    o = ds.Obj(2, (0, 0, 0, 0), (0, 0, 0), (150.0, 150.0), 120.0, 0.3, True)
    mask = ds.shape_mask(2, h, w, o.center, o.extent, o.angle, True)
    rect = sl.rotated_rect(o, mask)
    sides = np.linalg.norm(np.roll(rect, -1, 0) - rect, axis=1)
    assert np.allclose(sides, sides[0], atol=2.0) and abs(sides[0] - 60 * np.sqrt(2)) < 3


def test_classification_split_is_one_folder_per_class_and_balanced(generated):
    root = generated["cls"].parent
    for split, n in SMALL.items():
        folders = sorted(p.name for p in (root / split).iterdir())
        images = ds.split_images(generated["cls"], split)
        assert {p.parent.name for p in images} <= set(ds.CLASSES) and len(images) == n
        assert folders == sorted({ds.CLASSES[i % len(ds.CLASSES)] for i in range(n)})


def test_task_datasets_regenerate_only_when_they_changed(tmp_path):
    data = td.generate_any(tmp_path, seed=0, task="pose", **SMALL)
    first = (tmp_path / "labels" / "val" / "val_00000.txt").stat().st_mtime_ns
    assert td.generate_any(tmp_path, seed=0, task="pose", **SMALL) == data
    assert (tmp_path / "labels" / "val" / "val_00000.txt").stat().st_mtime_ns == first
    assert not td.is_current(tmp_path, "pose", ds.DatasetSpec(seed=1, **SMALL))
    assert not td.is_current(tmp_path, "obb", ds.DatasetSpec(seed=0, **SMALL))  # another task's manifest
    (tmp_path / "labels" / "val" / "val_00001.txt").unlink()
    assert not td.is_current(tmp_path, "pose", ds.DatasetSpec(seed=0, **SMALL))


def test_two_generations_of_a_task_are_byte_identical(tmp_path):
    a = td.generate_any(tmp_path / "a", seed=2, task="cls", **SMALL).parent
    b = td.generate_any(tmp_path / "b", seed=2, task="cls", **SMALL).parent

    def digest(root: Path) -> dict[str, str]:
        return {
            str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*.*")
        }

    assert digest(a) == digest(b) and len(digest(a)) == sum(SMALL.values()) + 2


def test_cli_and_task_roots(tmp_path, capsys):
    assert (
        td.main(["--task", "obb", "--out", str(tmp_path), "--train", "1", "--val", "1", "--calib", "1"]) == 0
    )
    assert Path(capsys.readouterr().out.strip()) == tmp_path / "data.yaml"
    assert ds.task_root(tmp_path / "dataset-eval", "seg") == tmp_path / "dataset-eval-seg"
    assert ds.task_root(tmp_path / "dataset-eval", "detect") == tmp_path / "dataset-eval"
    with pytest.raises(ValueError):
        td.generate_any(tmp_path, task="depth")


def _int8_request(task: str, calibration: Path):
    from harness.backends.base import ExportRequest
    from harness.core.axes import Shape
    from harness.core.cell import Cell

    cell = Cell("n", task, "e2e", "openvino", "cpu", Shape(320, 320), 1, "int8")
    return ExportRequest.for_cell(cell, "w.pt", "out", {}, calibration=str(calibration))


def test_a_task_calibrates_int8_on_its_own_generated_dataset(tmp_path):
    """A non-detect int8 cell named the generated detect dataset calibrates on its task's dataset beside it (the
    labels ultralytics' int8 exporter reads for that task); detect, and a user's dataset, as named."""
    from harness.backends._shared.calibration import calibration_for

    detect = ds.generate(tmp_path / "eval", seed=0, train=1, val=2, calib=2)
    assert calibration_for(_int8_request("detect", detect)).data_yaml == detect.resolve()
    pose = calibration_for(_int8_request("pose", detect))
    assert pose.data_yaml == (tmp_path / "eval-pose" / "data.yaml").resolve() and pose.split == "calib"
    assert [p.read_bytes() for p in pose.images] == [p.read_bytes() for p in ds.split_images(detect, "calib")]
    doc = yaml.safe_load(pose.ultralytics_yaml(tmp_path / "ov").read_text())
    assert doc["kpt_shape"] == [17, 3] and doc["flip_idx"] == list(sl.FLIP_IDX)
    cls = calibration_for(_int8_request("cls", detect))
    folder = cls.ultralytics_yaml(tmp_path / "ov-cls", "cls")
    assert {p.name for p in (folder / "val").iterdir()} <= set(ds.CLASSES) and (folder / "train").is_dir()
    # the other way: a dataset the user named is the calibration set, whatever the task
    user = td.generate_any(tmp_path / "mine", seed=1, train=1, val=1, calib=1, task="seg")
    assert calibration_for(_int8_request("seg", user)).data_yaml == user.resolve()
