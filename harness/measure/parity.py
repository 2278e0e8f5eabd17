"""Numerical agreement of a backend's outputs with the PyTorch fp32 eager reference on the same input.

Raw-head and classification outputs are compared element-wise. End-to-end outputs ([B, K, 6+extra], rows ordered
by a top-k) are compared as sets: near-equal scores can legitimately swap places in the top-k under float
rounding, so each backend row is matched one-to-one to its nearest reference row before differences are taken.
Rows in the bottom `TAIL` of the reference score range are left out, since the row that enters the top-k at the
boundary can differ between two correct implementations.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

log = logging.getLogger(__name__)

# rel_l2 = ||out - ref|| / ||ref|| allowed per requested precision
TOLERANCE = {"fp32": 1e-3, "fp16": 3e-2, "int8": 2e-1}
TAIL = 0.05


@dataclass(frozen=True)
class Parity:
    max_abs: float
    rel_l2: float
    tolerance: float
    compared: str  # what was compared, e.g. "elementwise" or "matched 285/300 rows"
    reference: str = "torch-eager-cpu-fp32"

    @property
    def ok(self) -> bool:
        return bool(np.isfinite(self.rel_l2)) and self.rel_l2 <= self.tolerance

    def to_dict(self) -> dict:
        return {
            "max_abs": self.max_abs,
            "rel_l2": self.rel_l2,
            "tolerance": self.tolerance,
            "compared": self.compared,
            "reference": self.reference,
            "ok": self.ok,
        }


def _match_rows(out: np.ndarray, ref: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One-to-one greedy matching of rows by L-inf distance (class column included, so classes must agree)."""
    d = np.abs(out[:, None, :] - ref[None, :, :]).max(axis=-1)
    order = np.argsort(d, axis=None, kind="stable")
    used_o = np.zeros(len(out), bool)
    used_r = np.zeros(len(ref), bool)
    oi, ri = [], []
    for flat in order:
        i, j = divmod(int(flat), d.shape[1])
        if used_o[i] or used_r[j]:
            continue
        used_o[i] = used_r[j] = True
        oi.append(i)
        ri.append(j)
        if len(oi) == min(len(out), len(ref)):
            break
    return np.array(oi), np.array(ri)


def compare(outputs: list[np.ndarray], reference: list[np.ndarray], head: str, precision: str) -> Parity:
    """Compare backend outputs with the reference. Shapes must match; a mismatch is infinite error."""
    tol = TOLERANCE[precision]
    if len(outputs) != len(reference):
        return Parity(
            float("inf"), float("inf"), tol, f"{len(outputs)} outputs vs {len(reference)} in reference"
        )
    diffs, refs, notes = [], [], []
    for k, (o, r) in enumerate(zip(outputs, reference, strict=True)):
        o = np.asarray(o, np.float64)
        r = np.asarray(r, np.float64)
        if o.shape != r.shape:
            return Parity(
                float("inf"), float("inf"), tol, f"output {k} shape {o.shape} vs reference {r.shape}"
            )
        if head == "e2e" and k == 0 and o.ndim == 3 and o.shape[-1] >= 6:
            kept = total = 0
            for b in range(o.shape[0]):
                scores = r[b, :, 4]
                lo, hi = scores.min(), scores.max()
                oi, ri = _match_rows(o[b], r[b])
                keep = r[b, ri, 4] > lo + TAIL * (hi - lo)
                diffs.append((o[b, oi[keep]] - r[b, ri[keep]]).ravel())
                refs.append(r[b, ri[keep]].ravel())
                kept += int(keep.sum())
                total += o.shape[1]
            notes.append(f"output {k}: matched {kept}/{total} rows")
        else:
            diffs.append((o - r).ravel())
            refs.append(r.ravel())
            notes.append(f"output {k}: elementwise")
    diff = np.concatenate(diffs) if diffs else np.zeros(0)
    ref = np.concatenate(refs) if refs else np.zeros(0)
    max_abs = float(np.abs(diff).max()) if diff.size else 0.0
    denom = float(np.linalg.norm(ref))
    rel = float(np.linalg.norm(diff) / denom) if denom > 0 else (0.0 if max_abs == 0 else float("inf"))
    if not np.isfinite(max_abs):
        rel = float("inf")
    return Parity(max_abs, rel, tol, "; ".join(notes))


class References:
    """PyTorch fp32 eager outputs on a cell's input, memoised for the run (the last few are kept)."""

    def __init__(self, keep: int = 8) -> None:
        self.keep = keep
        self._outputs: dict[tuple, list[np.ndarray]] = {}

    def get(self, mat, cell, height: int, width: int, options: dict) -> list[np.ndarray]:
        import torch

        from harness.backends.torch_eager import flatten_outputs
        from harness.yolo.inputs import letterboxed
        from harness.yolo.models import prepared_model

        variant = options.get("remedy")
        key = (mat.sha256, cell.head, height, width, cell.batch, variant)
        if key not in self._outputs:
            if len(self._outputs) >= self.keep:
                self._outputs.pop(next(iter(self._outputs)))
            model = prepared_model(mat.checkpoint, cell.head, (height, width))
            if variant == "backbone-only":
                from harness.backends.executorch_cuda import backbone_only

                model = backbone_only(model)
            with torch.inference_mode():
                y = model(torch.from_numpy(letterboxed(height, width, cell.batch).copy()))
            self._outputs[key] = flatten_outputs(y)
        return self._outputs[key]
