"""`yolo26-bench check RUN_DIR...`: list each record whose figures break a relation the harness states.

One line per record and relation (`RUN: CELL_ID: RELATION: the figures that break it`, every field escaped by
harness.core.cli_args.printable, so a cell id holding a newline or a terminal escape stays on its line); the
relations and their tolerances are harness.check.relations' (docs/gpu.md, "Relations a record's figures satisfy").
A RUN_DIR is a results directory (holding cells.jsonl) or a cells.jsonl-format file itself.

A run marked incomplete in its env.json (killed, interrupted, stopped by a full disk) is said so on stderr, its
recorded cells checked as any others. What the records file itself says is wrong is a finding too
(harness.check.records_file): a line the reading rule skipped (unreadable, or a record that does not fit the schema:
`RUN: cells.jsonl:19: record-skipped: ...`), and a cell recorded more than once, with the figures its records
disagree on.

Exit statuses: 0 no finding, 1 at least one (a broken relation, a skipped line, a cell recorded twice), 2 bad input
(one line, nothing checked): an argument that is not a run, a records file that cannot be read, or one that holds no
record ("no records", every line skipped included).
"""

from __future__ import annotations

import sys
from pathlib import Path

from harness.check import fake_vs_gpu
from harness.check.records_file import SKIPPED, TWICE, skipped_findings, twice_findings
from harness.check.relations import RELATIONS, Finding, check_records
from harness.core.cli_args import Parser, printable
from harness.core.record import CellRecord
from harness.core.results_dir import SkippedLine, incomplete_note, is_results_dir, read_env, read_records


def build_parser() -> Parser:
    listing = "; ".join(f"{name}: {text}" for name, (text, _) in RELATIONS.items())
    listing += f"; {fake_vs_gpu.RELATION} (across the runs given): {fake_vs_gpu.DESCRIPTION}"
    p = Parser(
        "check",
        description="List each record whose figures break a relation the harness states, one line per record "
        f"and relation; exit 1 when any breaks, 0 when none, 2 on bad input. Relations: {listing}.",
    )
    p.add_argument(
        "runs", type=Path, nargs="+", metavar="RUN_DIR", help="a results directory (or a cells.jsonl file)"
    )
    return p


def bad_input(paths: list[Path]) -> str | None:
    """The first path that is neither a results directory nor a file, as one line; None when all are usable."""
    for path in paths:
        try:
            usable = is_results_dir(path) or (path.exists() and not path.is_dir())  # the reader names a FIFO
        except OSError as e:  # a name too long to look up
            return f"{path}: cannot be read ({e.strerror or e})"
        if not usable:
            return f"{path}: no cells.jsonl; not a results directory or a records file"
    return None


def run_label(path: Path) -> str:
    return path.name if path.is_dir() else str(path)


def incomplete(path: Path) -> str | None:
    """'incomplete: N of M cells (why)' when the run at `path` is marked so in its env.json (killed, interrupted,
    stopped by a full disk: harness.core.results_dir.incomplete_note), else None; an env.json that cannot be read
    says nothing here (check relates the records, which it read)."""
    if not path.is_dir():
        return None
    try:
        env = read_env(path)
    except ValueError:
        return None
    return incomplete_note(env) if env else None


def _records(path: Path, skipped: list[SkippedLine]) -> list[CellRecord]:
    """The records at `path`: the reader's rule (harness.core.results_dir: a bad line skipped, named and appended
    to `skipped`, a bad file or no record at all a ValueError of one line naming the file)."""
    return read_records(path, required=True, skipped=skipped)


def check_paths(paths: list[Path]) -> tuple[list[tuple[str, Finding]], int]:
    """(run label, finding) of every broken relation in the runs at `paths`, every line the reading rule skipped
    and every cell recorded twice, and how many records were read. Raises ValueError (one line naming the file) for
    records that cannot be read or a run that holds none ("no records", as harness.core.results_dir's own refusal
    when it gives one): every run is read before any is checked."""
    runs, found = [], []
    for path in paths:
        skipped: list[SkippedLine] = []
        runs.append((run_label(path), _records(path, skipped)))
        found += [(runs[-1][0], f) for f in skipped_findings(skipped)]
    found += [(label, f) for label, records in runs for f in twice_findings(records)]
    found += [(label, f) for label, records in runs for f in check_records(records)]
    found += fake_vs_gpu.compare(runs)  # a fake-device trace against the same cell's GPU export, across runs
    return found, sum(len(records) for _, records in runs)


def counted(found: list[tuple[str, Finding]]) -> str:
    """`2 broken relation(s), 1 record line(s) skipped, 1 cell(s) recorded twice`: the findings by kind."""
    skipped = sum(1 for _, f in found if f.relation == SKIPPED)
    twice = sum(1 for _, f in found if f.relation == TWICE)
    kinds = [(len(found) - skipped - twice, "broken relation(s)")]
    kinds += [(skipped, "record line(s) skipped"), (twice, "cell(s) recorded twice")]
    return ", ".join(f"{n} {what}" for n, what in kinds if n) or "nothing"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse(argv)
    if isinstance(args, int):  # --help, or argparse's one error line (already printed)
        return args
    why = bad_input(args.runs)
    if why:
        print(f"check: {printable(why)}", file=sys.stderr)
        return 2
    try:
        found, n = check_paths(args.runs)
    except (OSError, ValueError) as e:
        print(f"check: {printable(str(e))}", file=sys.stderr)
        return 2
    for run, f in found:
        print(f.line(run))
    for path in args.runs:
        note = incomplete(path)
        if note:
            print(
                f"check: {printable(run_label(path))}: {note}; only the cells it recorded were checked",
                file=sys.stderr,
            )
    runs = len(args.runs)
    if found:
        print(f"check: {counted(found)} in {n} records of {runs} run(s)", file=sys.stderr)
        return 1
    print(f"check: {n} records of {runs} run(s): no relation broken", file=sys.stderr)
    return 0
