"""Do two runs of the same cells write the same records, field for field? (A refactor must not change them.)

    .venv/bin/python benchmarks/same_records.py RUN_DIR_A RUN_DIR_B

For every cell id both runs recorded, compares (1) the record's shape: every key path, at every depth, in the order
written, and (2) every value that does not come from a clock or the machine's state: status, reason, the axes,
what ran (threads, precision executed), the artifact's size, parity's verdict and failing metrics, accuracy's
figures, the null reasons' keys. Timed figures (latencies, rounds, memory, durations, paths, timestamps) are
compared by shape only; `benchmarks/paired_stability.py` compares their paired ratios. Exits 1 on any difference.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

#: values that must match exactly between two runs of the same code on the same cells
DETERMINISTIC = (
    "status",
    "reason",
    "model",
    "size",
    "task",
    "head",
    "backend",
    "device",
    "height",
    "width",
    "dynamic",
    "batch",
    "precision_requested",
    "precision_executed",
    "precision_source",
    "threads",
    "threads_requested",
    "weights",
    "artifact_bytes",
    "remedy",
    "remedy_of",
    "gflops",
    "parity.ok",
    "parity.failed",
    "accuracy.map50_95",
    "accuracy.map50",
    "accuracy.images",
    "scenario",
)


def key_paths(value: Any, prefix: str = "") -> list[str]:
    """Every key path of `value` in written order (list items by index)."""
    out = []
    if isinstance(value, dict):
        for k, v in value.items():
            out.append(f"{prefix}{k}")
            out.extend(key_paths(v, f"{prefix}{k}."))
    elif isinstance(value, list):
        for i, v in enumerate(
            value[:1]
        ):  # the first item's shape: lists of rounds differ in length by design
            out.extend(key_paths(v, f"{prefix}[{i}]."))
    return out


def dig(rec: dict, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(rec, dict):
            return None
        rec = rec.get(part)
    return rec


def last_records(run_dir: Path) -> dict[str, dict]:
    out = {}
    for line in (run_dir / "cells.jsonl").read_text().splitlines():
        if line.strip():
            rec = json.loads(line)
            out[rec["cell_id"]] = rec
    return out


def differences(a: dict, b: dict) -> list[str]:
    """How record `b` departs from record `a` of the same cell (empty when they agree)."""
    out = []
    pa, pb = key_paths(a), key_paths(b)
    if pa != pb:
        only_a = [p for p in pa if p not in pb]
        only_b = [p for p in pb if p not in pa]
        if only_a or only_b:
            out.append(f"keys only in A: {only_a[:8]}; only in B: {only_b[:8]}")
        else:
            out.append("same keys in another order")
    for path in DETERMINISTIC:
        va, vb = dig(a, path), dig(b, path)
        if va != vb:
            out.append(f"{path}: {va!r} != {vb!r}")
    na, nb = sorted(a.get("null_reasons") or {}), sorted(b.get("null_reasons") or {})
    if na != nb:
        out.append(f"null_reasons keys: {na} != {nb}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_a", type=Path)
    ap.add_argument("run_b", type=Path)
    args = ap.parse_args(argv)
    ra, rb = last_records(args.run_a), last_records(args.run_b)
    common = [c for c in ra if c in rb]
    bad = 0
    for cell_id in common:
        diff = differences(ra[cell_id], rb[cell_id])
        print(f"{'same' if not diff else 'DIFFERENT'}  {cell_id}")
        for d in diff:
            print(f"    {d}")
        bad += bool(diff)
    for cell_id in sorted(set(ra) ^ set(rb)):
        print(f"ONLY IN {'A' if cell_id in ra else 'B'}  {cell_id}")
        bad += 1
    print(f"{len(common)} cells in both runs, {bad} with differences")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
