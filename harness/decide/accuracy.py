"""What is known of a configuration's accuracy, labelled by where it comes from.

Three sources, in this order: the cell's measured mAP50-95 and its ratio to the fp32 reference (the run's weights and
dataset: stand-in weights and the generated dataset, or the user's `--weights-dir` and `--data`); the published COCO
mAP50-95 of the model size (ultralytics' YOLO26 table, at 640), marked "published, not measured here", for a cell
that was not scored; and "not known" for anything else (a shape the accuracy stage did not score). A configuration
that trades accuracy away (a smaller shape than 640, int8 instead of fp32) says what that costs, or that the cost
is not known.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from harness.core.record import CellRecord
from harness.decide.load import number

log = logging.getLogger(__name__)

# Published COCO val2017 mAP50-95 of the YOLO26 detect models at 640, single model, single scale, from the
# ultralytics documentation's YOLO26 detect table (https://docs.ultralytics.com/tasks/detect/, "mAPval 50-95" for
# the one-to-many head with NMS, "mAPval 50-95(e2e)" for the end-to-end head). Not measured by this harness.
PUBLISHED_MAP_640 = {
    "e2e": {"n": 40.1, "s": 47.8, "m": 52.5, "l": 54.4, "x": 56.9},
    "raw": {"n": 40.9, "s": 48.6, "m": 53.1, "l": 55.0, "x": 57.5},
}
PUBLISHED_SOURCE = "ultralytics YOLO26 detect table, COCO val2017 at 640 (docs.ultralytics.com/tasks/detect)"

MEASURED = "measured"
PUBLISHED = "published, not measured here"
NOT_KNOWN = "not known"
REFERENCE_SIDE = 640


@dataclass(frozen=True)
class Accuracy:
    """A configuration's accuracy as known: `map50_95` on `source`'s scale (the run's dataset when measured, COCO
    when published), `ratio` to its fp32 reference at the same shape (measured), `shape_ratio` of its fp32
    reference's mAP at this shape over the one at 640 (measured on the same images), `coco` the published COCO mAP
    of its size times the measured ratios (None where a factor is not known), `cost` what it trades, in words."""

    map50_95: float | None
    source: str
    ratio: float | None = None
    shape_ratio: float | None = None
    coco: float | None = None
    cost: str = ""
    why: str = ""  # why not known
    basis: str = ""  # measured: on what (the weights' kind, the images scored)

    def text(self) -> str:
        """The accuracy in a few words, its source named."""
        if self.source == MEASURED and self.map50_95 is not None:
            said = f"mAP50-95 {self.map50_95:.3f} (measured" + (f" {self.basis}" if self.basis else "")
            said += f", {self.ratio:.3f}× its fp32 reference)" if self.ratio is not None else ")"
            return said
        if self.source == PUBLISHED and self.coco is not None:
            return f"COCO mAP50-95 {self.coco:.1f} (published, not measured here)"
        return f"accuracy not known ({self.why})" if self.why else "accuracy not known"

    def as_dict(self) -> dict:
        return {
            "map50_95": self.map50_95,
            "source": self.source,
            "ratio_to_fp32_reference": self.ratio,
            "shape_ratio_to_640": self.shape_ratio,
            "published_coco_map50_95_x_measured_ratios": self.coco,
            "cost": self.cost or None,
            "why_not_known": self.why or None,
            "basis": self.basis or None,
        }


def _basis(rec: CellRecord) -> str:
    """What a measured mAP rests on: stand-in, random-init or the user's weights, and how many images."""
    weights = str(rec.weights or "")
    kind = (
        "stand-in weights"
        if weights.startswith("standin")
        else "random-init weights"
        if weights.startswith("random-init")
        else "the run's weights"
    )
    images = number(rec.accuracy, "images")
    return f"with {kind}" + (f" on {int(images)} val images" if images else "")


def published_map(rec: CellRecord) -> float | None:
    """The published COCO mAP50-95 of the record's model size at 640 (detect only), or None."""
    if rec.task != "detect":
        return None
    return PUBLISHED_MAP_640.get(str(rec.head), {}).get(str(rec.size))


def _is_reference_shape(rec: CellRecord) -> bool:
    return rec.height == REFERENCE_SIDE and rec.width == REFERENCE_SIDE


def _shape(rec: CellRecord) -> str:
    h, w = rec.height, rec.width
    return str(h) if h == w else f"{h}x{w}"


def reference_map_640(rec: CellRecord, cells: list[CellRecord]) -> float | None:
    """The measured fp32 mAP50-95 of the same model (size, task, head) at 640 on the same images: the reference a
    smaller shape's accuracy is compared with."""
    for other in cells:
        if (
            other.status == "ok"
            and (other.size, other.task, other.head) == (rec.size, rec.task, rec.head)
            and _is_reference_shape(other)
            and not other.dynamic
        ):
            ref = number(other.accuracy, "reference_map50_95")
            if ref is not None:
                return ref
    return None


def accuracy_of(rec: CellRecord, cells: list[CellRecord]) -> Accuracy:
    """What is known of `rec`'s accuracy, `cells` being the machine's cells (for the 640 reference)."""
    measured = number(rec.accuracy, "map50_95")
    ratio = number(rec.accuracy, "ratio")
    precision = str(rec.precision_requested)
    published = published_map(rec)
    at_640 = _is_reference_shape(rec)
    shape_ratio = None
    costs = []
    if not at_640:
        here, ref = number(rec.accuracy, "reference_map50_95"), reference_map_640(rec, cells)
        if here is not None and ref:
            shape_ratio = here / ref
            costs.append(f"640→{_shape(rec)}: {shape_ratio:.3f}× the 640 mAP (measured, fp32 reference)")
        else:
            costs.append(f"640→{_shape(rec)}: accuracy cost not known (not scored at both shapes)")
    if precision != "fp32":
        if ratio is not None:
            costs.append(f"fp32→{precision}: keeps {ratio:.3f} of the fp32 mAP (measured)")
        else:
            costs.append(f"fp32→{precision}: accuracy cost not known (not scored)")
    cost = "; ".join(costs)
    prec_factor = 1.0 if precision == "fp32" else ratio
    shape_factor = 1.0 if at_640 else shape_ratio
    coco = None
    if published is not None and prec_factor is not None and shape_factor is not None:
        coco = published * prec_factor * shape_factor
    if measured is not None:
        return Accuracy(measured, MEASURED, ratio, shape_ratio, coco, cost, basis=_basis(rec))
    if published is not None and at_640 and precision == "fp32":
        return Accuracy(None, PUBLISHED, None, None, published, cost)
    why = "the accuracy stage did not score this cell"
    if published is not None and not at_640:
        why += f"; the published mAP is at 640, not {_shape(rec)}"
    elif published is not None:
        why += f"; the published mAP is for fp32, not {precision}"
    return Accuracy(None, NOT_KNOWN, None, None, None, cost, why)
