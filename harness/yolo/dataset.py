"""A synthetic detection dataset the project generates itself: seeded, deterministic, nothing downloaded.

Each image is a textured background (low-frequency colour noise, a faint stripe or checker pattern, fine grain)
with 2 to 8 objects of five classes (filled circle, ring, square, triangle, cross; squares and triangles filled
or outlined, rotated) in eight colours and a wide range of sizes. Objects overlap: a later object may cover an
earlier one, but never more than `MAX_OCCLUDED` of its pixels. Shapes are drawn without anti-aliasing from a
mask, and each label box is that mask's exact pixel extent (the whole object, also where it is partly covered),
so the ground truth is known exactly. The layout is ultralytics' (images/{split}, labels/{split}, data.yaml with
`train`, `val` and a `calib` split for int8 calibration); data.yaml says `synthetic: true`.

Every image has its own random stream seeded by (seed, split, index), so the val images do not depend on how many
train images there are. A manifest records the parameters and `GENERATOR_VERSION`; `generate` rewrites the
dataset only when they changed or a file is missing.

The other tasks' datasets (harness.yolo.task_dataset) are built on this one: segment, pose and obb on these very
images with the labels of their task (harness.yolo.shape_labels), classify in ImageFolder layout.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from harness.core import locations

log = logging.getLogger(__name__)

GENERATOR_VERSION = 1
CLASSES = ("circle", "ring", "square", "triangle", "cross")
SPLITS = ("train", "val", "calib")
SPLIT_INDEX = {s: i for i, s in enumerate(SPLITS)}
#: the dataset folder under the default cache directory (harness.core.locations)
DATASET_FOLDER = "dataset"
# image sizes (width, height): several aspect ratios, so letterboxing pads in both directions
IMAGE_SIZES = ((640, 480), (512, 512), (480, 640), (640, 384))
# saturated colours (BGR); a colour too close to the background under an object is not used for it
PALETTE = (
    (40, 40, 220),
    (40, 200, 40),
    (220, 80, 30),
    (30, 220, 230),
    (220, 40, 200),
    (230, 220, 40),
    (250, 250, 250),
    (20, 20, 20),
)
MIN_COLOR_DISTANCE = 150  # L1 distance (BGR) between an object's colour and the background's mean under it
MAX_OCCLUDED = 0.4  # a later object may cover at most this fraction of an earlier object's pixels
OBJECTS = (2, 8)  # objects per image, inclusive
SIZE_FRACTION = (0.07, 0.38)  # an object's extent as a fraction of the image's shorter side
PLACEMENT_TRIES = 30
JPEG_QUALITY = 92
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class DatasetSpec:
    """What decides the dataset's content: the seed and the number of images per split."""

    seed: int = 0
    train: int = 600
    val: int = 100
    calib: int = 32

    def __post_init__(self) -> None:
        if self.seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.seed}")
        for split in SPLITS:
            if getattr(self, split) < 1:
                raise ValueError(f"{split} must hold at least one image, got {getattr(self, split)}")

    def count(self, split: str) -> int:
        return int(getattr(self, split))


@dataclass(frozen=True)
class Obj:
    """One drawn object: its class, its full mask's pixel box (x0, y0, x1, y1; x1, y1 exclusive) and colour, and
    the parameters it was drawn from (centre, extent, angle, filled), from which the other tasks' labels are
    derived (harness.yolo.shape_labels)."""

    cls: int
    box: tuple[int, int, int, int]
    color: tuple[int, int, int]
    center: tuple[float, float] = (0.0, 0.0)
    extent: float = 0.0
    angle: float = 0.0
    filled: bool = True


def default_root(task: str = "detect") -> Path:
    """Where the dataset of `task` lives unless told otherwise: under the harness's default cache dir
    (harness.core.locations), `dataset` for detect and `dataset-<task>` for the others."""
    folder = DATASET_FOLDER if task == "detect" else f"{DATASET_FOLDER}-{task}"
    return Path(locations.cache_dir()) / folder


def task_root(detect_root: Path | str, task: str) -> Path:
    """The folder of `task`'s dataset beside a detect dataset's folder (`<folder>-<task>`; detect's own)."""
    detect_root = Path(detect_root)
    return detect_root if task == "detect" else detect_root.with_name(f"{detect_root.name}-{task}")


# ---- drawing -------------------------------------------------------------------------------------------------


def _background(rng: np.random.Generator, w: int, h: int) -> np.ndarray:
    """A textured uint8 BGR background: smooth colour noise, a faint periodic pattern, fine grain."""
    import cv2

    base = rng.uniform(60, 190, size=3)
    coarse = rng.normal(0, 28, size=(rng.integers(3, 7), rng.integers(3, 7), 3)).astype(np.float32)
    img = cv2.resize(coarse, (w, h), interpolation=cv2.INTER_CUBIC) + base.astype(np.float32)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    period, theta = rng.uniform(8, 40), rng.uniform(0, np.pi)
    phase = (xx * np.cos(theta) + yy * np.sin(theta)) * (2 * np.pi / period)
    pattern = (
        np.sin(phase) if rng.random() < 0.5 else np.sign(np.sin(phase) * np.sin(xx * 2 * np.pi / period))
    )
    img += (rng.uniform(6, 18) * pattern)[..., None]
    img += rng.normal(0, 6, size=(h, w, 3)).astype(np.float32)
    return np.clip(img, 0, 255).astype(np.uint8)


def _polygon(center: np.ndarray, radius: float, sides: int, angle: float) -> np.ndarray:
    t = angle + np.arange(sides) * 2 * np.pi / sides
    return np.round(center + radius * np.stack([np.cos(t), np.sin(t)], 1)).astype(np.int32)


def shape_mask(
    cls: int, h: int, w: int, center: tuple[float, float], extent: float, angle: float, filled: bool
) -> np.ndarray:
    """The bool (h, w) mask of one object of class `cls`, about `extent` pixels across, drawn without
    anti-aliasing so that every pixel belongs to the object or not."""
    import cv2

    m = np.zeros((h, w), np.uint8)
    c = np.asarray(center, np.float64)
    r = extent / 2
    thick = max(2, round(extent / 9))
    name = CLASSES[cls]
    if name == "circle":
        cv2.circle(m, tuple(np.round(c).astype(int)), round(r), 1, -1, cv2.LINE_8)
    elif name == "ring":
        rt = max(3, round(r / 4))
        cv2.circle(m, tuple(np.round(c).astype(int)), round(r - rt / 2), 1, rt, cv2.LINE_8)
    elif name in ("square", "triangle"):
        pts = _polygon(c, r, 4 if name == "square" else 3, angle)
        if filled:
            cv2.fillPoly(m, [pts], 1, cv2.LINE_8)
        else:
            cv2.polylines(m, [pts], True, 1, thick, cv2.LINE_8)
    elif name == "cross":
        arm = max(3, round(extent / 4))
        for a in (angle, angle + np.pi / 2):
            d, n = np.array([np.cos(a), np.sin(a)]), np.array([-np.sin(a), np.cos(a)])
            corners = [c + sx * r * d + sy * arm / 2 * n for sx, sy in ((-1, -1), (1, -1), (1, 1), (-1, 1))]
            cv2.fillPoly(m, [np.round(np.array(corners)).astype(np.int32)], 1, cv2.LINE_8)
    else:  # pragma: no cover - CLASSES and this function change together
        raise ValueError(f"unknown class {cls}")
    return m.astype(bool)


def mask_box(mask: np.ndarray) -> tuple[int, int, int, int]:
    """The exact pixel extent of a non-empty mask: (x0, y0, x1, y1), x1 and y1 exclusive."""
    ys, xs = np.nonzero(mask)
    return int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1


def render(rng: np.random.Generator, size: tuple[int, int] | None = None) -> tuple[np.ndarray, list[Obj]]:
    """One image (uint8 BGR) and its objects, drawn from `rng` alone."""
    img, objs, _ = render_scene(rng, size)
    return img, objs


def render_scene(
    rng: np.random.Generator, size: tuple[int, int] | None = None
) -> tuple[np.ndarray, list[Obj], list[np.ndarray]]:
    """One image (uint8 BGR), its objects in drawing order and each object's full bool mask, drawn from `rng`
    alone (`render` is this without the masks: the same random draws, the same image)."""
    w, h = size or IMAGE_SIZES[int(rng.integers(len(IMAGE_SIZES)))]
    img = _background(rng, w, h)
    masks: list[np.ndarray] = []
    objs: list[Obj] = []
    for _ in range(int(rng.integers(OBJECTS[0], OBJECTS[1] + 1))):
        placed = _place(rng, img, masks)
        if placed is None:
            continue
        obj, mask = placed
        img[mask] = obj.color
        masks.append(mask)
        objs.append(obj)
    return img, objs, masks


def _place(
    rng: np.random.Generator, img: np.ndarray, masks: list[np.ndarray]
) -> tuple[Obj, np.ndarray] | None:
    """A new object that lies inside the image and covers no earlier object beyond MAX_OCCLUDED, or None."""
    h, w = img.shape[:2]
    visible = visible_masks(masks)
    for _ in range(PLACEMENT_TRIES):
        cls = int(rng.integers(len(CLASSES)))
        extent = float(rng.uniform(*SIZE_FRACTION) * min(h, w))
        margin = extent / 2 + 2
        center = (float(rng.uniform(margin, w - margin)), float(rng.uniform(margin, h - margin)))
        angle, filled = float(rng.uniform(0, 2 * np.pi)), bool(rng.random() < 0.5)
        mask = shape_mask(cls, h, w, center, extent, angle, filled)
        x0, y0, x1, y1 = mask_box(mask) if mask.any() else (0, 0, 0, 0)
        if x1 - x0 < 4 or y1 - y0 < 4 or x0 == 0 or y0 == 0 or x1 == w or y1 == h:
            continue
        if any((v & ~mask).sum() < (1 - MAX_OCCLUDED) * m.sum() for v, m in zip(visible, masks, strict=True)):
            continue
        under = img[mask].reshape(-1, 3).mean(0)
        colors = [c for c in PALETTE if np.abs(np.asarray(c) - under).sum() >= MIN_COLOR_DISTANCE]
        if not colors:
            continue
        color = colors[int(rng.integers(len(colors)))]
        return Obj(cls, (x0, y0, x1, y1), color, center, extent, angle, filled), mask
    return None


def visible_masks(masks: list[np.ndarray]) -> list[np.ndarray]:
    """What is still visible of each mask under the masks drawn after it."""
    out = []
    for i, m in enumerate(masks):
        v = m.copy()
        for later in masks[i + 1 :]:
            v &= ~later
        out.append(v)
    return out


def label_lines(objs: list[Obj], w: int, h: int) -> list[str]:
    """YOLO label rows: class, then the box's centre and size normalised by the image size."""
    rows = []
    for o in objs:
        x0, y0, x1, y1 = o.box
        rows.append(
            f"{o.cls} {(x0 + x1) / 2 / w:.6f} {(y0 + y1) / 2 / h:.6f} {(x1 - x0) / w:.6f} {(y1 - y0) / h:.6f}"
        )
    return rows


def image_rng(seed: int, split: str, index: int) -> np.random.Generator:
    """The random stream of one image: independent of every other image and of the split sizes."""
    return np.random.default_rng([GENERATOR_VERSION, seed, SPLIT_INDEX[split], index])


# ---- writing -------------------------------------------------------------------------------------------------


def _manifest(spec: DatasetSpec) -> dict:
    return {"generator_version": GENERATOR_VERSION, "classes": list(CLASSES), **asdict(spec)}


def _data_yaml(spec: DatasetSpec) -> str:
    import yaml

    doc = {
        # no `path`: ultralytics then resolves the splits against this file's directory, so the file is the same
        # wherever the dataset is written
        "train": "images/train",
        "val": "images/val",
        "calib": "images/calib",
        "names": dict(enumerate(CLASSES)),
        "synthetic": True,
        # The module's name before it moved to harness.yolo: the text is part of data.yaml, whose bytes key the
        # cached int8 exports (harness.backends._shared.calibration.identity), so it stays as generated before.
        "description": (
            "Synthetic shapes generated by harness.accuracy.dataset (no real images): "
            f"generator v{GENERATOR_VERSION}, seed {spec.seed}, {spec.train} train / {spec.val} val / "
            f"{spec.calib} calib images; boxes are the exact pixel extents of the drawn objects."
        ),
        "generator": _manifest(spec),
    }
    return yaml.safe_dump(doc, sort_keys=False)


def is_current(root: Path, spec: DatasetSpec) -> bool:
    """Whether `root` holds the complete dataset of `spec` from this generator version."""
    root = Path(root)
    try:
        manifest = json.loads((root / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    if manifest != _manifest(spec) or not (root / "data.yaml").is_file():
        return False
    for split in SPLITS:
        n = spec.count(split)
        if len(list((root / "images" / split).glob("*.jpg"))) != n:
            return False
        if len(list((root / "labels" / split).glob("*.txt"))) != n:
            return False
    return True


def generate(
    root: Path | str | None = None, seed: int = 0, train: int = 600, val: int = 100, calib: int = 32
) -> Path:
    """Write the dataset under `root` (default: the cache dir's dataset/) unless it is already current; return the
    path of its data.yaml. The other tasks' datasets: harness.yolo.task_dataset.generate_any."""
    from filelock import FileLock

    spec = DatasetSpec(seed=seed, train=train, val=val, calib=calib)
    root = Path(root) if root is not None else default_root()
    if is_current(root, spec):
        return root / "data.yaml"
    root.parent.mkdir(parents=True, exist_ok=True)
    # export workers of one run (or shards sharing a cache) may ask for the dataset at once: one writes it
    with FileLock(str(root.parent / f".{root.name}.lock")):
        if not is_current(root, spec):
            _write(root, spec)
    return root / "data.yaml"


def _write(root: Path, spec: DatasetSpec) -> None:
    import cv2

    log.info("generating the synthetic dataset %s in %s", spec, root)
    (root / MANIFEST).unlink(missing_ok=True)  # an interrupted generation is never taken for a current one
    for sub in ("images", "labels"):
        shutil.rmtree(root / sub, ignore_errors=True)
    for split in SPLITS:
        (root / "images" / split).mkdir(parents=True)
        (root / "labels" / split).mkdir(parents=True)
        for i in range(spec.count(split)):
            img, objs = render(image_rng(spec.seed, split, i))
            name = f"{split}_{i:05d}"
            if not cv2.imwrite(
                str(root / "images" / split / f"{name}.jpg"), img, [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY]
            ):
                raise OSError(f"could not write {root / 'images' / split / name}.jpg")
            lines = label_lines(objs, img.shape[1], img.shape[0])
            (root / "labels" / split / f"{name}.txt").write_text("".join(line + "\n" for line in lines))
    (root / "data.yaml").write_text(_data_yaml(spec))
    (root / MANIFEST).write_text(json.dumps(_manifest(spec), indent=1, sort_keys=True) + "\n")


IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp")


def split_images(data_yaml: Path | str, split: str) -> list[Path]:
    """The image files of one split of a dataset yaml (this generator's or a user's), sorted by path: the folder's
    images and those of its sub-folders (a classification split's class folders, as ultralytics reads them)."""
    import yaml

    data_yaml = Path(data_yaml)
    doc = yaml.safe_load(data_yaml.read_text())
    base = data_yaml.parent
    if doc.get("path"):  # a user's yaml may name its root, absolute or relative to the yaml
        base = base / doc["path"]
    entry = doc.get(split)
    if entry is None:
        raise KeyError(f"{data_yaml} has no {split!r} split")
    folder = base / entry
    direct = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if direct:
        return direct
    return sorted(p for p in folder.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())


def main(argv: list[str] | None = None) -> int:
    """CLI: python -m harness.yolo.dataset --out DIR [--seed N] [--train N] [--val N] [--calib N]
    (every task: python -m harness.yolo.task_dataset --task TASK ...)."""
    p = argparse.ArgumentParser(prog="python -m harness.yolo.dataset", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=default_root(), help="dataset directory (default %(default)s)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--train", type=int, default=DatasetSpec.train)
    p.add_argument("--val", type=int, default=DatasetSpec.val)
    p.add_argument("--calib", type=int, default=DatasetSpec.calib)
    a = p.parse_args(argv)
    try:
        path = generate(a.out, seed=a.seed, train=a.train, val=a.val, calib=a.calib)
    except ValueError as e:
        print(f"ERROR: {e}")
        return 4
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
