"""Moving from YOLO11 (and from YOLOv8): should a user who ships the older model move to YOLO26, on each machine?

Shown only where a run holds the other family (`--families yolo11`, the `families` profile). Objective: YOLO26
against the other family on the same backend, size, shape and precision, end to end (the same pre-processing; the
other's one-to-many head with ultralytics' NMS after it, YOLO26's NMS-free head with its top-k filter), as the
paired ratio of e2e p50s with its 95% interval, timed interleaved; the model-only ratio beside it (what ultralytics'
published speeds compare); the published (or measured) accuracy difference. Tie rule: tied where the end-to-end
interval holds 1. The other use cases decide on YOLO26's cells alone (harness.decide.tasks): this answer is the
only place the families meet (harness.decide.migration).
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.decide import migration
from harness.decide.index import RunIndex
from harness.decide.picks import Constraints
from harness.decide.registry import IF_ANSWERED, Outcome, register_use_case

CRITERION = (
    "YOLO26 against {other} on the same backend, size, shape and precision: end to end (the same pre-processing; "
    "{other} with ultralytics' NMS, YOLO26's NMS-free head with its top-k filter), the paired ratio of e2e p50s "
    "with its 95% interval, timed interleaved; the model-only ratio beside it; the accuracy difference"
)
RULE = "tied where the end-to-end interval holds 1"


@dataclass(frozen=True)
class Migration:
    """The migration answer from one family, on each machine that ran it."""

    family: str
    order: int
    first_screen: str = IF_ANSWERED
    scenario: str | None = None
    #: this use case pairs the families (harness.decide.decision gives it every family's cells)
    families: bool = True

    @property
    def key(self) -> str:
        return f"from-{self.family}"

    def decide(self, indexes: list[RunIndex], cons: Constraints) -> list[Outcome]:
        if not any(r.family == self.family for idx in indexes for r in idx.cells):
            return []  # the run holds no such cell: no row at all
        other = migration.name(self.family)
        out = []
        for idx in indexes:
            ans, entry = migration.answer(
                idx,
                indexes,
                self.family,
                self.key,
                f"Moving from {other}",
                CRITERION.format(other=other),
                RULE,
            )
            out.append(Outcome(ans, entry))
        return out


register_use_case(Migration("yolo11", order=5))
register_use_case(Migration("yolov8", order=6))
