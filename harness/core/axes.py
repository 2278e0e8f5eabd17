"""The matrix axes: names, parsing and validation of what a user can select."""

from __future__ import annotations

import re
from dataclasses import dataclass

SIZES = ("n", "s", "m", "l", "x")
TASKS = ("detect", "seg", "pose", "obb", "cls")
HEADS = ("e2e", "raw")
PRECISIONS = ("fp32", "fp16", "int8")
#: the model families: YOLO26 (the model under test, every cell's default) and the families a user migrates from,
#: each timed beside the YOLO26 cell of the same size, backend and shape (docs/report.md, "Moving from YOLO11")
FAMILIES = ("yolo26", "yolo11", "yolov8")
DEFAULT_FAMILY = "yolo26"
#: the families with the NMS-free one-to-one head beside the one-to-many one (YOLO26's `end2end: True` configs);
#: the others have the one-to-many head only: their cells are head `raw`, with ultralytics' NMS after it
ONE_TO_ONE_FAMILIES = ("yolo26",)
#: how each family is written in words (its published name)
FAMILY_NAMES = {"yolo26": "YOLO26", "yolo11": "YOLO11", "yolov8": "YOLOv8"}

# Published model cost at 640x640 (ultralytics docs, detect, fused model). Scaled by pixel count for other shapes;
# used for the GFLOP/s column and plots, never as a measurement of this run.
GFLOPS_640 = {"n": 5.4, "s": 20.7, "m": 68.2, "l": 86.4, "x": 193.9}
#: the same per family: YOLO11's and YOLOv8's detect tables at 640 (docs.ultralytics.com/models/yolo11/ and
#: /models/yolov8/, "FLOPs (B)"); YOLOv8's are the original head's (ultralytics >= 8.3 builds `yolov8n.yaml` with
#: YOLO11's head, a little more work than published)
FAMILY_GFLOPS_640 = {
    "yolo26": GFLOPS_640,
    "yolo11": {"n": 6.5, "s": 21.5, "m": 68.0, "l": 86.9, "x": 194.9},
    "yolov8": {"n": 8.7, "s": 28.6, "m": 78.9, "l": 165.2, "x": 257.8},
}


def family_heads(family: str) -> tuple[str, ...]:
    """The heads a family has: YOLO26 both, the others the one-to-many head only (`raw`)."""
    return HEADS if family in ONE_TO_ONE_FAMILIES else ("raw",)


def parse_families(text: str | None) -> tuple[str, ...] | None:
    """`--families yolo11,yolov8`: the families timed beside YOLO26, which always runs (each other family's cell is
    paired with its YOLO26 cell); `all` selects every family; None leaves the profile's."""
    chosen = parse_list(text, FAMILIES, "families")
    if chosen is None:
        return None
    return (DEFAULT_FAMILY, *(f for f in chosen if f != DEFAULT_FAMILY))


# Input bounds a user can lift with --force-shapes: a side outside 32..4096 or a batch above 1024 is far more likely a
# typo than a benchmark (`--shapes 99999` made an export try to allocate 120 GB).
MIN_SIDE, MAX_SIDE = 32, 4096
MAX_BATCH = 1024
FORCE_OPTION = "--force-shapes"


class SelectionError(ValueError):
    """A user-supplied axis value that is not valid; the message is the one line shown to the user."""


@dataclass(frozen=True, order=True)
class Shape:
    """An input shape: height x width in pixels, or the dynamic probe (height = width = 0 is never a real shape)."""

    height: int
    width: int
    dynamic: bool = False

    def __post_init__(self) -> None:
        if (self.height <= 0 or self.width <= 0) and not (self.dynamic and self.height == self.width == 0):
            raise SelectionError(
                f"shape {self.height}x{self.width}: height and width must be positive integers"
            )

    @property
    def label(self) -> str:
        if self.dynamic:  # the probe itself, or one shape of the sweep run on the dynamic artifact
            return f"dyn{self.height}x{self.width}" if self.height else "dynamic"
        return f"{self.height}x{self.width}"

    @property
    def multiple_of_32(self) -> bool:
        return self.height % 32 == 0 and self.width % 32 == 0

    @classmethod
    def parse(cls, text: str) -> Shape:
        """Parse `640`, `384x640` or `dynamic`."""
        t = text.strip().lower()
        if t == "dynamic":
            return cls(0, 0, dynamic=True)
        m = re.fullmatch(r"([0-9]{1,9})(?:x([0-9]{1,9}))?", t)  # ASCII digits, few enough for int()
        if not m:
            raise SelectionError(
                f"shape {text!r}: expected a positive integer (640), HxW (384x640) or 'dynamic'"
            )
        h = int(m.group(1))
        w = int(m.group(2)) if m.group(2) else h
        return cls(h, w)


#: a selection of every value of an axis (`--tasks all`)
ALL = "all"


def parse_list(text: str | None, valid: tuple[str, ...], axis: str) -> tuple[str, ...] | None:
    """Parse a comma-separated selection, rejecting names not in `valid` with the list of valid ones; `all` alone
    selects every one of `valid`."""
    if text is None:
        return None
    items = tuple(dict.fromkeys(s.strip() for s in text.split(",") if s.strip()))
    if items == (ALL,):
        return tuple(valid)
    if not items:
        raise SelectionError(f"--{axis}: empty selection; valid: {', '.join(valid)}")
    bad = [i for i in items if i not in valid]
    if bad:
        raise SelectionError(f"--{axis}: unknown {', '.join(map(repr, bad))}; valid: {', '.join(valid)}")
    return items


def parse_shapes(text: str | None, force: bool = False) -> tuple[Shape, ...] | None:
    """Parse `--shapes`; sides outside MIN_SIDE..MAX_SIDE are refused unless `force` (--force-shapes)."""
    if text is None:
        return None
    items = [s for s in text.split(",") if s.strip()]
    if not items:
        raise SelectionError("--shapes: empty selection")
    try:
        shapes = tuple(dict.fromkeys(Shape.parse(s) for s in items))
    except SelectionError as e:  # the line names the option, as every option's error does
        raise SelectionError(f"--shapes: {e}") from None
    if not force:
        for shape in shapes:
            if not shape.dynamic and not all(
                MIN_SIDE <= side <= MAX_SIDE for side in (shape.height, shape.width)
            ):
                raise SelectionError(
                    f"--shapes: {shape.label} is outside {MIN_SIDE}..{MAX_SIDE} pixels per side "
                    f"({FORCE_OPTION} runs it anyway)"
                )
    return shapes


def parse_batches(text: str | None, force: bool = False) -> tuple[int, ...] | None:
    """Parse `--batches`; a batch above MAX_BATCH is refused unless `force` (--force-shapes)."""
    if text is None:
        return None
    out = []
    for s in text.split(","):
        s = s.strip()
        if not s:
            continue
        if not re.fullmatch(r"[0-9]{1,9}", s) or int(s) <= 0:  # ASCII digits, few enough for int()
            raise SelectionError(f"--batches: {s!r} is not a positive integer")
        if int(s) > MAX_BATCH and not force:
            raise SelectionError(f"--batches: {s} is above {MAX_BATCH} ({FORCE_OPTION} runs it anyway)")
        out.append(int(s))
    if not out:
        raise SelectionError("--batches: empty selection")
    return tuple(dict.fromkeys(out))
