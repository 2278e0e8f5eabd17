"""Benchmark inputs: real images bundled with ultralytics, letterboxed to the cell's shape."""

from __future__ import annotations

import functools
import logging
from pathlib import Path

import numpy as np

import harness  # noqa: F401

log = logging.getLogger(__name__)

IMAGES = ("bus.jpg", "zidane.jpg")


def asset_path(name: str) -> Path:
    from ultralytics.utils import ASSETS

    p = Path(ASSETS) / name
    if not p.is_file():
        raise FileNotFoundError(f"ultralytics asset {p} is missing; reinstall ultralytics")
    return p


def letterbox_files(paths: list[Path] | tuple[Path, ...], height: int, width: int) -> np.ndarray:
    """A float32 NCHW batch in [0, 1]: each image file letterboxed (ultralytics' LetterBox, gray pad, centred) to
    height x width, BGR -> RGB. The one letterbox of the harness: timing, parity and accuracy inputs all come
    from here."""
    import cv2

    frames = []
    for path in paths:
        img = cv2.imread(str(path))
        if img is None:
            raise FileNotFoundError(f"cannot read image {path}")
        frames.append(letterbox_image(img, height, width))
    return np.ascontiguousarray(np.stack(frames)).astype(np.float32) / 255.0


def letterbox_hwc(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """One decoded BGR HWC image letterboxed (ultralytics' LetterBox, gray pad, centred) to height x width, still
    BGR HWC uint8: what ultralytics' predictor uploads to the device (its `pre_transform`)."""
    from ultralytics.data.augment import LetterBox

    lb = LetterBox(new_shape=(height, width), auto=False, scale_fill=False, scaleup=True, stride=32)
    out: np.ndarray = lb(image=image)  # given only an image, LetterBox returns the image
    assert out.shape[:2] == (height, width), out.shape
    return out


def letterbox_image(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """One decoded BGR HWC image letterboxed (ultralytics' LetterBox, gray pad, centred) to height x width, as an
    RGB CHW uint8 view (not contiguous)."""
    return letterbox_hwc(image, height, width)[..., ::-1].transpose(2, 0, 1)  # BGR HWC -> RGB CHW


@functools.lru_cache(maxsize=32)
def letterboxed(height: int, width: int, batch: int) -> np.ndarray:
    """A float32 NCHW batch in [0, 1]: bus.jpg, zidane.jpg, bus.jpg, ... letterboxed (gray pad) to height x width.

    The same array is the input of the backend under test and of the PyTorch reference. Treat it as read-only.
    """
    arr = letterbox_files([asset_path(IMAGES[i % len(IMAGES)]) for i in range(batch)], height, width)
    arr.setflags(write=False)
    return arr
