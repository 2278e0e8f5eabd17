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


@functools.lru_cache(maxsize=32)
def letterboxed(height: int, width: int, batch: int) -> np.ndarray:
    """A float32 NCHW batch in [0, 1]: bus.jpg, zidane.jpg, bus.jpg, ... letterboxed (gray pad) to height x width.

    The same array is the input of the backend under test and of the PyTorch reference. Treat it as read-only.
    """
    import cv2
    from ultralytics.data.augment import LetterBox

    lb = LetterBox(new_shape=(height, width), auto=False, scale_fill=False, scaleup=True, stride=32)
    frames = []
    for i in range(batch):
        img = cv2.imread(str(asset_path(IMAGES[i % len(IMAGES)])))
        out = lb(image=img)
        assert out.shape[:2] == (height, width), out.shape
        frames.append(out[..., ::-1].transpose(2, 0, 1))  # BGR HWC -> RGB CHW
    arr = np.ascontiguousarray(np.stack(frames)).astype(np.float32) / 255.0
    arr.setflags(write=False)
    return arr
