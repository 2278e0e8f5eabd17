"""The cell: one point of the matrix (model x backend x device x shape x batch x precision)."""

from __future__ import annotations

from dataclasses import dataclass

from harness.core.axes import (
    DEFAULT_FAMILY,
    FAMILIES,
    FAMILY_GFLOPS_640,
    HEADS,
    PRECISIONS,
    SIZES,
    TASKS,
    SelectionError,
    Shape,
    family_heads,
)


@dataclass(frozen=True, order=True)
class Cell:
    """One benchmark cell. Its id reads like the cell; records keep every axis as its own field. `family` is the
    model family (YOLO26 unless a run measures the model a user migrates from beside it: harness.core.axes
    FAMILIES); a YOLO26 cell's id and fields are what they were before families existed."""

    size: str
    task: str
    head: str
    backend: str
    device: str
    shape: Shape
    batch: int = 1
    precision: str = "fp32"
    family: str = DEFAULT_FAMILY

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise SelectionError(f"family {self.family!r}: valid families are {', '.join(FAMILIES)}")
        if self.size not in SIZES:
            raise SelectionError(f"size {self.size!r}: valid sizes are {', '.join(SIZES)}")
        if self.task not in TASKS:
            raise SelectionError(f"task {self.task!r}: valid tasks are {', '.join(TASKS)}")
        if self.head not in HEADS:
            raise SelectionError(f"head {self.head!r}: valid heads are {', '.join(HEADS)}")
        if self.head not in family_heads(self.family):
            raise SelectionError(
                f"head {self.head!r}: {self.family} has the one-to-many head only (head raw, with NMS after it)"
            )
        if self.precision not in PRECISIONS:
            raise SelectionError(
                f"precision {self.precision!r}: valid precisions are {', '.join(PRECISIONS)}"
            )
        if self.batch <= 0:
            raise SelectionError(f"batch {self.batch}: must be a positive integer")

    @property
    def model(self) -> str:
        """The ultralytics model name, also the weights file stem: yolo26n, yolo26n-seg, yolo11n, ..."""
        return f"{self.family}{self.size}" + ("" if self.task == "detect" else f"-{self.task}")

    @property
    def id(self) -> str:
        return (
            f"{self.family}{self.size}-{self.task}-{self.head}-{self.backend}-{self.device}-"
            f"{self.shape.label}-b{self.batch}-{self.precision}"
        )

    @property
    def gflops(self) -> float | None:
        """Published detect-model GFLOPs of the family scaled by pixel count and batch; None for other tasks and
        dynamic."""
        if self.task != "detect" or not self.shape.height:
            return None
        per_size = FAMILY_GFLOPS_640[self.family]
        return per_size[self.size] * self.shape.height * self.shape.width / (640 * 640) * self.batch

    def to_dict(self) -> dict:
        out = {
            "size": self.size,
            "task": self.task,
            "head": self.head,
            "backend": self.backend,
            "device": self.device,
            "height": self.shape.height,
            "width": self.shape.width,
            "dynamic": self.shape.dynamic,
            "batch": self.batch,
            "precision": self.precision,
        }
        if self.family != DEFAULT_FAMILY:
            out["family"] = self.family
        return out

    @classmethod
    def from_dict(cls, d: dict) -> Cell:
        shape = Shape(d["height"], d["width"], d.get("dynamic", False))
        return cls(
            d["size"], d["task"], d["head"], d["backend"], d["device"], shape, d["batch"], d["precision"],
            d.get("family", DEFAULT_FAMILY),
        )  # fmt: skip

    def with_(self, **changes) -> Cell:
        """A copy with some axes changed (remedies and sweeps derive cells this way)."""
        from dataclasses import replace

        return replace(self, **changes)

    def axes(self) -> dict:
        """The structured axes as record fields (`family` is written only on another family's records: absent, a
        record is YOLO26's)."""
        return {
            "family": self.family,
            "model": self.model,
            "size": self.size,
            "task": self.task,
            "head": self.head,
            "backend": self.backend,
            "device": self.device,
            "height": self.shape.height or None,
            "width": self.shape.width or None,
            "dynamic": self.shape.dynamic,
            "batch": self.batch,
            "precision_requested": self.precision,
        }
