"""What is known of a configuration's accuracy, labelled by where it comes from.

Three sources, and only these: **measured** (the run's own weights on the user's `--data`, at the cell's shape and
precision: the task's figure and its ratio to the fp32 reference on the same images); **published** (ultralytics'
YOLO26 table of the task, harness.accuracy.published: a model size and head at the shape it was published at (640;
obb 1024, classify 224), fp32 only), marked "published, not measured here"; and **not known**.

The stand-in weights (trained here on the generated images) are scored too, but their mAP is a property of that
pair, not of COCO or of the user's data: their figures stay in their own column (`standin`), show what they can
(parity, int8 against fp32 of the same weights, which the accuracy floor reads), and are never multiplied into a
published figure. A configuration that trades accuracy away (a smaller shape than 640, int8 instead of fp32) says
what that costs where it was measured on the user's data, and that the cost is not known here otherwise.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from harness.accuracy import published as published_tables
from harness.accuracy import published_families
from harness.accuracy.standin import is_standin
from harness.core.record import CellRecord
from harness.decide.load import number

log = logging.getLogger(__name__)

# Published COCO val2017 mAP50-95 of the YOLO26 detect models at 640 (harness.accuracy.published holds every task's
# table, with its shape, metric and source). Not measured by this harness.
PUBLISHED_MAP_640 = published_tables.TABLES["detect"].figures
PUBLISHED_SOURCE = published_tables.TABLES["detect"].source

MEASURED = "measured"
PUBLISHED = "published, not measured here"
NOT_KNOWN = "not known"
REFERENCE_SIDE = 640
#: what to do to know the cost of a smaller input or a lower precision, said wherever it is not known
TO_MEASURE = "run with your weights (--weights-dir) and --data to measure it"


@dataclass(frozen=True)
class Accuracy:
    """A configuration's accuracy as known: `map50_95` measured on the user's data (0-1), or `coco` the published
    COCO mAP50-95 of its size and head at 640 (0-100, fp32 at 640 only, never scaled); `ratio` to its fp32
    reference at the same shape and `shape_ratio` of the fp32 reference at this shape over the one at 640 (both
    measured on the user's data); `standin` the stand-in weights' own figures in words (their column, never a
    source); `cost` what the configuration trades, in words."""

    map50_95: float | None
    source: str
    ratio: float | None = None
    shape_ratio: float | None = None
    coco: float | None = None
    cost: str = ""
    why: str = ""  # why not known
    basis: str = ""  # measured: on what (the images scored)
    standin: str = ""  # the stand-in weights' figures, in their own column
    label: str = "COCO mAP50-95"  # the published figure's dataset and metric, in a few words

    @property
    def known(self) -> bool:
        return self.source in (MEASURED, PUBLISHED)

    @property
    def value(self) -> float | None:
        """The figure on its source's scale: measured mAP50-95 (0-1) or published COCO mAP50-95 (0-100)."""
        return self.map50_95 if self.source == MEASURED else self.coco if self.source == PUBLISHED else None

    def short(self) -> str:
        """The figure and its source in a few words: `COCO mAP50-95 40.1 (published)`, `mAP50-95 0.300 (measured)`."""
        if self.source == MEASURED and self.map50_95 is not None:
            return f"mAP50-95 {self.map50_95:.3f} (measured on your data)"
        if self.source == PUBLISHED and self.coco is not None:
            return f"{self.label} {self.coco:.1f} (published, not measured here)"
        return "accuracy not known"

    def text(self) -> str:
        """The accuracy in a few words, its source named."""
        if self.source == MEASURED and self.map50_95 is not None:
            said = f"mAP50-95 {self.map50_95:.3f} (measured on your data" + (
                f" {self.basis}" if self.basis else ""
            )
            said += f", {self.ratio:.3f}× its fp32 reference)" if self.ratio is not None else ")"
            return said
        if self.source == PUBLISHED and self.coco is not None:
            return f"{self.label} {self.coco:.1f} (published, not measured here)"
        return f"accuracy not known ({self.why})" if self.why else "accuracy not known"

    def as_dict(self) -> dict:
        return {
            "map50_95": self.map50_95,
            "source": self.source,
            "ratio_to_fp32_reference": self.ratio,
            "shape_ratio_to_640": self.shape_ratio,
            "published_coco_map50_95": self.coco,
            "published_metric": self.label if self.coco is not None else None,
            "cost": self.cost or None,
            "why_not_known": self.why or None,
            "basis": self.basis or None,
            "standin": self.standin or None,
        }


def _images(rec: CellRecord) -> str:
    images = number(rec.accuracy, "images")
    return f"{int(images)} val images" if images else "val images"


#: the published figure of each task in a few words (Accuracy.label)
PUBLISHED_LABEL = {
    "detect": "COCO mAP50-95",
    "seg": "COCO mask mAP50-95",
    "pose": "COCO keypoints mAP50-95",
    "obb": "DOTAv1 mAP50",
    "cls": "ImageNet top-1",
}


def published_map(rec: CellRecord) -> float | None:
    """The published figure of the record's family, task, model size and head (harness.accuracy.published for
    YOLO26, harness.accuracy.published_families for YOLO11 and YOLOv8: detect, segment and pose at 640, obb at
    1024, classify at 224), or None."""
    table = published_families.table(str(rec.family), str(rec.task))
    return table.figure(str(rec.head), str(rec.size)) if table is not None else None


def reference_side(rec: CellRecord) -> int:
    """The side of the task's reference shape: the one its published figure is at (640 where none is)."""
    table = published_families.table(str(rec.family), str(rec.task))
    return table.side if table is not None else REFERENCE_SIDE


def _is_reference_shape(rec: CellRecord) -> bool:
    side = reference_side(rec)
    return rec.height == side and rec.width == side


def _shape(rec: CellRecord) -> str:
    h, w = rec.height, rec.width
    return str(h) if h == w else f"{h}x{w}"


def reference_map_640(rec: CellRecord, cells: list[CellRecord]) -> float | None:
    """The measured fp32 mAP50-95 of the same model (family, size, task, head, weights) at 640 on the same dataset: the
    reference a smaller shape's accuracy is compared with."""
    for other in cells:
        if (
            other.status == "ok"
            and (other.family, other.size, other.task, other.head, other.weights)
            == (rec.family, rec.size, rec.task, rec.head, rec.weights)
            and _is_reference_shape(other)
            and not other.dynamic
        ):
            ref = number(other.accuracy, "reference_map50_95")
            if ref is not None:
                return ref
    return None


def _standin_words(rec: CellRecord, shape_ratio: float | None) -> str:
    """The stand-in's column: its mAP and ratios on the generated images, said as theirs."""
    mine, ratio = number(rec.accuracy, "map50_95"), number(rec.accuracy, "ratio")
    if mine is None:
        return ""
    metric = str((rec.accuracy or {}).get("metric") or "mAP50-95")
    metric = "mAP50-95" if metric == "box mAP50-95" else metric
    said = f"stand-in weights, {_images(rec)} generated: {metric} {mine:.3f}"
    if ratio is not None:
        said += f", {ratio:.3f}× its fp32 reference"
    if shape_ratio is not None:
        said += f", the fp32 reference at {_shape(rec)} {shape_ratio:.3f}× the one at {reference_side(rec)}"
    return said + " (a property of that pair, not of COCO or of your data)"


def accuracy_of(rec: CellRecord, cells: list[CellRecord]) -> Accuracy:
    """What is known of `rec`'s accuracy, `cells` being the machine's cells (for the 640 reference)."""
    scored = number(rec.accuracy, "map50_95")
    ratio = number(rec.accuracy, "ratio")
    standin = is_standin(rec.weights)
    measured = scored is not None and not standin
    precision = str(rec.precision_requested)
    published = published_map(rec)
    at_640 = _is_reference_shape(rec)  # at the task's reference shape (640; obb 1024, classify 224)
    side = reference_side(rec)
    shape_ratio = None
    if not at_640:
        here, ref = number(rec.accuracy, "reference_map50_95"), reference_map_640(rec, cells)
        shape_ratio = here / ref if here is not None and ref else None
    costs = []
    if not at_640:
        if measured and shape_ratio is not None:
            costs.append(
                f"{side}→{_shape(rec)}: {shape_ratio:.3f}× the {side} mAP (measured on your data, fp32 reference)"
            )
        else:
            costs.append(f"{side}→{_shape(rec)}: accuracy cost not known here; {TO_MEASURE}")
    if precision != "fp32":
        if measured and ratio is not None:
            costs.append(f"fp32→{precision}: keeps {ratio:.3f} of the fp32 mAP (measured on your data)")
        elif standin and ratio is not None:
            costs.append(
                f"fp32→{precision}: keeps {ratio:.3f} of the fp32 mAP on the stand-in weights ({_images(rec)} "
                "generated); on COCO or your data not known"
            )
        else:
            costs.append(f"fp32→{precision}: accuracy cost not known here; {TO_MEASURE}")
    cost = "; ".join(costs)
    column = _standin_words(rec, shape_ratio) if standin else ""
    if measured:
        basis = f"on {_images(rec)}"
        return Accuracy(scored, MEASURED, ratio, shape_ratio, None, cost, basis=basis)
    label = PUBLISHED_LABEL.get(str(rec.task), "COCO mAP50-95")
    if published is not None and at_640 and precision == "fp32":
        return Accuracy(None, PUBLISHED, None, None, published, cost, standin=column, label=label)
    why = (
        "not scored on your data"
        if not standin
        else "scored only on the stand-in weights and generated images"
    )
    if published is not None and not at_640:
        why += f"; the published mAP is at {side}, not {_shape(rec)}"
    elif published is not None:
        why += f"; the published mAP is for fp32, not {precision}"
    return Accuracy(None, NOT_KNOWN, None, None, None, cost, why, standin=column)
