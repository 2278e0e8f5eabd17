"""Selecting a model's head through ultralytics' documented API, whichever version is installed.

YOLO26 has two heads: the NMS-free one-to-one head (top-k after it: `e2e`) and the one-to-many head that needs NMS
(`raw`). ultralytics 8.4.142 (PR #26066) made the one-to-many head the default and folded the `end2end` argument
into `nms`: `nms=False` selects the NMS-free head, `nms=None` (the default) the one-to-many head's raw outputs, and
`end2end=` is deprecated (mapped onto `nms` with a warning). Before it, `end2end=True/False` chose the head and the
NMS-free head was YOLO26's default. YOLO11 and YOLOv8 have the one-to-many head only: nothing is selected for them.

The harness asks here for both ways a head is selected: the arguments `YOLO.export` is given (the backends that
export through ultralytics' exporter), and the model attribute set on a model prepared in this process
(`DetectionModel.end2end`, which the exporter itself sets from `nms`: torch, ExecuTorch, AOTInductor). Each record
says which (`head_selection`), so a reader knows what a newer ultralytics was asked.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from importlib import metadata

from harness.core.axes import DEFAULT_FAMILY, ONE_TO_ONE_FAMILIES

log = logging.getLogger(__name__)

#: the first ultralytics whose `nms` argument selects the head (PR #26066); `end2end` before it
NMS_SELECTS_FROM = (8, 4, 142)
BRANCH = {"e2e": "one-to-one (NMS-free, top-k)", "raw": "one-to-many (NMS after it)"}


def ultralytics_version() -> str:
    """The installed ultralytics' version (read from its metadata: nothing is imported)."""
    try:
        return metadata.version("ultralytics")
    except metadata.PackageNotFoundError:
        return "not installed"


def _release(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


@dataclass(frozen=True)
class HeadSelection:
    """How one head is selected: `export_args` for `YOLO.export`, `model_end2end` for the in-process model
    (None: leave the model's own), the rule in words, and the ultralytics version it was chosen for."""

    head: str
    family: str
    export_args: dict = field(default_factory=dict)
    model_end2end: bool | None = None
    rule: str = ""
    ultralytics: str = ""

    def record(self) -> dict:
        """The record's `head_selection` section."""
        model = (
            f"DetectionModel.end2end = {self.model_end2end}"
            if self.model_end2end is not None
            else "the model's own head (nothing set)"
        )
        return {
            "head": self.head,
            "branch": BRANCH.get(self.head, self.head),
            "export_args": dict(self.export_args),
            "model": model,
            "rule": self.rule,
            "ultralytics": self.ultralytics,
        }


def select(head: str, family: str = DEFAULT_FAMILY, version: str | None = None) -> HeadSelection:
    """How to select `head` of a `family` model with ultralytics `version` (default: the installed one)."""
    version = version or ultralytics_version()
    if family not in ONE_TO_ONE_FAMILIES:
        return HeadSelection(
            head,
            family,
            {"nms": None},
            None,
            f"{family} has the one-to-many head only: its raw outputs (nms=None), NMS after them",
            version,
        )
    e2e = head == "e2e"
    if _release(version) >= NMS_SELECTS_FROM:
        args = {"nms": False} if e2e else {"nms": None}
        rule = (
            "ultralytics >= 8.4.142: nms=False selects the NMS-free one-to-one head, nms=None (the default) the "
            "one-to-many head's raw outputs; end2end= is deprecated"
        )
    else:
        args = {"end2end": e2e}
        rule = "ultralytics < 8.4.142: end2end=True selects the NMS-free one-to-one head, end2end=False the one-to-many"
    return HeadSelection(head, family, args, e2e, rule, version)


def apply(model, head: str) -> None:
    """Select `head` on a model prepared in this process, as ultralytics' exporter does from `nms`
    (`model.end2end`, the DetectionModel property that keeps both branches). A model whose head has no one-to-one
    branch (YOLO11, YOLOv8) has nothing to select and is left alone."""
    last = model.model[-1] if hasattr(model, "model") and hasattr(model.model, "__getitem__") else None
    if last is None or getattr(last, "one2one_cv2", None) is None or not hasattr(model, "end2end"):
        return
    chosen = select(head)
    if chosen.model_end2end is not None:
        model.end2end = chosen.model_end2end
