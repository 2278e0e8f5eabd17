"""The corruption knob: break a backend's outputs on purpose before parity, to check the check on a real run.

`YOLO26_BENCH_CORRUPT=<backend>=<mode>[,<backend>=<mode>...]` (off by default) applies `mode` to the first-run
outputs of every cell of `backend` before they are compared with the reference; a backend named twice gets both
modes, in order. The record says so: its `reason` names the modes and the knob, and its `corrupted` field (and
`parity.corrupted`) lists them. A mode that does not apply to a cell's outputs (drop-masks on a detect cell,
shift-boxes on a classifier) changes nothing, and the record says that too. Modes:

- zero-scores: every score 0 (end-to-end score column, raw-head class-score rows, class probabilities).
- shift-classes: every detection's class moved to the next class index (raw head and classifier: the class-score
  rows rolled by one class).
- shift-boxes: every box moved `SHIFT_PX` pixels right and down.
- drop-masks: the segmentation prototypes zeroed, so every mask is empty.
"""

from __future__ import annotations

import os

import numpy as np

from harness.core.axes import SelectionError

CORRUPT_ENV = "YOLO26_BENCH_CORRUPT"
SHIFT_PX = 4.0
MODES = ("zero-scores", "shift-classes", "shift-boxes", "drop-masks")


class CorruptionError(SelectionError):
    """An invalid YOLO26_BENCH_CORRUPT value; the message is one line for the user (the suite reports it as a
    usage error before anything runs)."""


def corruptions(
    env: str | None = None, known_backends: tuple[str, ...] | None = None
) -> dict[str, tuple[str, ...]]:
    """Parse YOLO26_BENCH_CORRUPT (or `env`) into {backend: modes}; raises CorruptionError on any invalid part.

    Backend names are checked against `known_backends`, or the registry when it is not given."""
    text = os.environ.get(CORRUPT_ENV, "") if env is None else env
    out: dict[str, tuple[str, ...]] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, mode = (s.strip() for s in part.partition("="))
        if not sep or not name or not mode:
            raise CorruptionError(f"{CORRUPT_ENV}: {part!r} is not backend=mode (modes: {', '.join(MODES)})")
        if mode not in MODES:
            raise CorruptionError(
                f"{CORRUPT_ENV}: unknown mode {mode!r} in {part!r}; valid: {', '.join(MODES)}"
            )
        out[name] = (*out.get(name, ()), mode)
    if out:
        if known_backends is None:
            from harness import backends

            known_backends = backends.names()
        unknown = sorted(set(out) - set(known_backends))
        if unknown:
            raise CorruptionError(
                f"{CORRUPT_ENV}: unknown backend {', '.join(map(repr, unknown))}; valid: {', '.join(known_backends)}"
            )
    return out


def corrupt(outputs: list[np.ndarray], modes: tuple[str, ...], layout) -> tuple[list[np.ndarray], list[str]]:
    """`outputs` with `modes` applied (copies; the originals are untouched) and, per mode, what it changed.

    `layout` is the outputs' harness.measure.parity.Layout (task, head, classes)."""
    outs = [np.array(o, dtype=np.float32, copy=True) for o in outputs]
    notes = []
    for mode in modes:
        changed = _apply(outs, mode, layout)
        notes.append(f"{mode}: {changed}")
    return outs, notes


def _apply(outs: list[np.ndarray], mode: str, layout) -> str:
    """Apply one mode in place; returns what it changed (or why nothing)."""
    if not outs:
        return "no outputs, nothing changed"
    first, task, nc = outs[0], layout.task, layout.nc
    if task == "cls" and first.ndim == 2:
        return _classifier(first, mode)
    if mode == "drop-masks":
        if task != "seg" or len(outs) < 2:
            return f"no mask prototypes in {task} outputs, nothing changed"
        outs[1][...] = 0.0
        return "mask prototypes zeroed"
    if layout.head == "e2e" and first.ndim == 3 and first.shape[-1] >= 6:
        return _rows(first, mode, task, nc)
    if first.ndim == 3 and nc and first.shape[1] >= 4 + nc:
        return _raw(first, mode, task, nc, layout.raw_boxes)
    return f"outputs of shape {first.shape} have no known layout, nothing changed"


def _rows(rows: np.ndarray, mode: str, task: str, nc: int | None) -> str:
    """End-to-end rows [B, K, 6 + extra]: x1 y1 x2 y2 (obb: cx cy w h) score class extra."""
    if mode == "zero-scores":
        rows[..., 4] = 0.0
        return "score column zeroed"
    if mode == "shift-classes":
        rows[..., 5] = (rows[..., 5] + 1) % nc if nc else rows[..., 5] + 1
        return "class column moved to the next class"
    if task == "obb":
        rows[..., 0:2] += SHIFT_PX
    else:
        rows[..., 0:4] += SHIFT_PX
    return f"boxes moved {SHIFT_PX:g} px right and down"


def _raw(raw: np.ndarray, mode: str, task: str, nc: int, boxes: str) -> str:
    """Raw head [B, 4 + nc + extra, anchors]: boxes (xywh, or xyxy for the backbone-only remedy), class scores."""
    scores = raw[:, 4 : 4 + nc]
    if mode == "zero-scores":
        scores[...] = 0.0
        return "class-score rows zeroed"
    if mode == "shift-classes":
        scores[...] = np.roll(scores, 1, axis=1)
        return "class-score rows rolled by one class"
    if boxes == "xyxy" and task != "obb":
        raw[:, 0:4] += SHIFT_PX
    else:
        raw[:, 0:2] += SHIFT_PX
    return f"boxes moved {SHIFT_PX:g} px right and down"


def _classifier(probs: np.ndarray, mode: str) -> str:
    if mode == "zero-scores":
        probs[...] = 0.0
        return "class probabilities zeroed"
    if mode == "shift-classes":
        probs[...] = np.roll(probs, 1, axis=-1)
        return "class probabilities rolled by one class"
    return f"a classifier has no {'boxes' if mode == 'shift-boxes' else 'masks'}, nothing changed"
