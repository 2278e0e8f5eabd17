"""`yolo26-bench check RUN_DIR...`: list each record whose figures break a relation the harness states.

One line per record and relation (`RUN: CELL_ID: RELATION: the figures that break it`); the relations and their
tolerances are harness.check.relations' (docs/gpu.md, "Relations a record's figures satisfy"). A RUN_DIR is a
results directory (holding cells.jsonl) or a cells.jsonl-format file itself.

Exit statuses: 0 no relation broken, 1 at least one broken, 2 bad input (nothing is checked then).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.check.relations import RELATIONS, Finding, check_records
from harness.core.record import CellRecord
from harness.core.results_dir import is_results_dir, read_records


def build_parser(prog: str = "yolo26-bench check") -> argparse.ArgumentParser:
    listing = "; ".join(f"{name}: {text}" for name, (text, _) in RELATIONS.items())
    p = argparse.ArgumentParser(
        prog=prog,
        description="List each record whose figures break a relation the harness states, one line per record "
        f"and relation; exit 1 when any breaks, 0 when none. Relations: {listing}.",
    )
    p.add_argument(
        "runs", type=Path, nargs="+", metavar="RUN_DIR", help="a results directory (or a cells.jsonl file)"
    )
    return p


def bad_input(paths: list[Path]) -> str | None:
    """The first path that is neither a results directory nor a file, as one line; None when all are usable."""
    for path in paths:
        if not (is_results_dir(path) or path.is_file()):
            return f"{path}: no cells.jsonl; not a results directory or a records file"
    return None


def run_label(path: Path) -> str:
    return path.name if path.is_dir() else str(path)


def check_paths(paths: list[Path]) -> tuple[list[tuple[str, Finding]], int]:
    """(run label, finding) of every broken relation in the runs at `paths`, and how many records were read.
    Raises ValueError (one line naming the file) for records that cannot be read."""
    found: list[tuple[str, Finding]] = []
    n = 0
    for path in paths:
        records: list[CellRecord] = read_records(path)
        n += len(records)
        found += [(run_label(path), f) for f in check_records(records)]
    return found, n


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    why = bad_input(args.runs)
    if why:
        print(f"check: {why}", file=sys.stderr)
        return 2
    try:
        found, n = check_paths(args.runs)
    except (OSError, ValueError) as e:
        print(f"check: {e}", file=sys.stderr)
        return 2
    for run, f in found:
        print(f.line(run))
    runs = len(args.runs)
    if found:
        print(f"check: {len(found)} broken relation(s) in {n} records of {runs} run(s)", file=sys.stderr)
        return 1
    print(f"check: {n} records of {runs} run(s): no relation broken", file=sys.stderr)
    return 0
