"""Build the list of cells from a profile and command-line selections; apply declarative exclusions."""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass
from pathlib import Path

import yaml

from harness import backends
from harness.core.axes import (
    DEFAULT_FAMILY,
    FAMILIES,
    HEADS,
    PRECISIONS,
    SIZES,
    TASKS,
    SelectionError,
    Shape,
    family_heads,
)
from harness.core.cell import Cell

log = logging.getLogger(__name__)

MATRIX_FILE = Path(__file__).with_name("matrix.yaml")
AXES = ("sizes", "tasks", "heads", "backends", "shapes", "batches", "precisions")


@dataclass(frozen=True)
class Selection:
    """Command-line overrides; None leaves the profile's value for that axis."""

    sizes: tuple[str, ...] | None = None
    tasks: tuple[str, ...] | None = None
    heads: tuple[str, ...] | None = None
    backends: tuple[str, ...] | None = None
    devices: tuple[str, ...] | None = None
    shapes: tuple[Shape, ...] | None = None
    batches: tuple[int, ...] | None = None
    precisions: tuple[str, ...] | None = None
    #: the model families (YOLO26 first; --families); None leaves the profile's (a block without `families`:
    #: YOLO26 alone)
    families: tuple[str, ...] | None = None


@dataclass(frozen=True)
class PlannedCell:
    """A cell and, when an exclusion matches it, the reason it is skipped."""

    cell: Cell
    excluded: str | None = None


def load_spec(path: Path = MATRIX_FILE) -> dict:
    with open(path) as f:
        return yaml.safe_load(f)


def profile_names(spec: dict | None = None) -> tuple[str, ...]:
    return tuple((spec or load_spec())["profiles"])


def _backend_devices(names: tuple[str, ...], devices: tuple[str, ...] | None) -> list[tuple[str, str]]:
    pairs = []
    for name in names:
        for dev in backends.get(name).devices:
            if devices is None or dev in devices:
                pairs.append((name, dev))
    return pairs


def _matches(cell: Cell, where: dict) -> bool:
    values = {
        "export_only": getattr(backends.get(cell.backend), "export_only", False),
        "family": cell.family,
        "size": cell.size,
        "task": cell.task,
        "head": cell.head,
        "backend": cell.backend,
        "device": cell.device,
        "shape": cell.shape.label,
        "batch": cell.batch,
        "precision": cell.precision,
    }
    for k, v in where.items():
        want = v if isinstance(v, list) else [v]
        if values[k] not in want and str(values[k]) not in map(str, want):
            return False
    return True


def build(profile: str, sel: Selection, spec: dict | None = None) -> list[PlannedCell]:
    """Cross-product of each block of `profile` with the overrides in `sel`, deduplicated, exclusions applied."""
    spec = spec or load_spec()
    if profile not in spec["profiles"]:
        raise SelectionError(f"--profile: unknown {profile!r}; valid: {', '.join(spec['profiles'])}")
    all_backends = backends.names()
    cells: dict[str, Cell] = {}
    block_skip: dict[str, str] = {}
    for block in spec["profiles"][profile]:
        sizes = sel.sizes or tuple(block["sizes"])
        tasks = sel.tasks or tuple(block["tasks"])
        heads = sel.heads or tuple(block["heads"])
        names = sel.backends or (all_backends if block["backends"] == "all" else tuple(block["backends"]))
        shapes = sel.shapes or tuple(Shape.parse(str(s)) for s in block["shapes"])
        batches = sel.batches or tuple(block["batches"])
        precisions = sel.precisions or tuple(block["precisions"])
        # a block may name its devices (the int8 block: the CPU backends' int8, not their GPU devices)
        devices = sel.devices or (tuple(block["devices"]) if block.get("devices") else None)
        families = sel.families or tuple(block.get("families") or (DEFAULT_FAMILY,))
        for family, size, task, shape, batch, head, (name, dev), prec in itertools.product(
            families, sizes, tasks, shapes, batches, heads, _backend_devices(names, devices), precisions
        ):
            # YOLO11 and YOLOv8 have the one-to-many head only: their cells are head raw whatever the heads
            # axis says (not exclusions: the family has no other head to skip)
            if head not in family_heads(family):
                head = "raw"
            c = Cell(size, task, head, name, dev, shape, batch, prec, family)
            if c.id in cells:
                continue
            cells[c.id] = c
            reason = next((s["reason"] for s in block.get("skip", []) if _matches(c, s["where"])), None)
            if reason and not sel.backends:
                block_skip[c.id] = reason
    planned = []
    for c in cells.values():
        reason = next((e["reason"] for e in spec.get("exclusions", []) if _matches(c, e["where"])), None)
        planned.append(PlannedCell(c, reason or block_skip.get(c.id)))
    # group cells that share a model and input so references and checkpoints are reused
    planned.sort(
        key=lambda p: (
            FAMILIES.index(p.cell.family),
            SIZES.index(p.cell.size),
            TASKS.index(p.cell.task),
            p.cell.shape,
            p.cell.batch,
            HEADS.index(p.cell.head),
            PRECISIONS.index(p.cell.precision),
            p.cell.backend,
            p.cell.device,
        )
    )
    return planned


def validate_backends(names: tuple[str, ...] | None) -> None:
    if names is None:
        return
    valid = backends.names()
    bad = [n for n in names if n not in valid]
    if bad:
        raise SelectionError(f"--backends: unknown {', '.join(map(repr, bad))}; valid: {', '.join(valid)}")


def all_devices() -> tuple[str, ...]:
    out: list[str] = []
    for n in backends.names():
        out.extend(d for d in backends.get(n).devices if d not in out)
    return tuple(out)
