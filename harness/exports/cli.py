"""`yolo26-bench export --format bencher|csv RUN_DIR [-o FILE]`: a run for dashboards and spreadsheets.

Exit statuses: 0 written, 2 bad input (not a results directory, a file that breaks the reading rule of
harness.core.results_dir, no records). A bad line of cells.jsonl (unreadable, or a record that does not fit the
schema) is skipped with a warning naming its file, line and why, the rest is exported, and a last line on stderr
counts what was skipped.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from harness.core.cli_args import Parser, argparse_type, output_file
from harness.core.results_dir import SkippedLine, is_results_dir, load_run, skipped_words, write_text_atomic
from harness.core.safe_text import terminal_text
from harness.exports import bencher, table

FORMATS = ("bencher", "csv")


def build_parser() -> Parser:
    p = Parser(
        "export",
        description="Write a run as Bencher Metric Format JSON (one benchmark per cell id: latency p50 with its "
        "95%% interval and throughput as Bencher's built-in measures, end-to-end p99, host peak RSS, mAP ratio; "
        "only figures the run measured) or as a CSV table (one row per cell).",
    )
    p.add_argument("run", type=Path, metavar="RUN_DIR", help="a results directory (holding cells.jsonl)")
    p.add_argument("--format", choices=FORMATS, default="bencher", help="bencher (default) or csv")
    p.add_argument(
        "-o",
        "--output",
        type=argparse_type(output_file, "-o"),
        metavar="FILE",
        help="write here, replacing the file whole (default: standard output)",
    )
    return p


def render(run_dir: Path, fmt: str, skipped: list[SkippedLine] | None = None) -> str:
    """The export's text; the lines of cells.jsonl the reading rule skipped appended to `skipped`. Raises
    ValueError (one line) for a directory that is not a readable run."""
    if not is_results_dir(run_dir):
        raise ValueError(f"{terminal_text(run_dir)}: no cells.jsonl; not a results directory")
    runs = load_run(run_dir)
    if skipped is not None:
        skipped.extend(s for run in runs for s in run.skipped)
    if fmt == "csv":
        return table.to_csv(runs)
    doc = bencher.to_bmf(runs)
    errors = bencher.shape_errors(doc)
    if errors:  # a harness bug: never hand a dashboard a document it would refuse
        raise ValueError(f"the BMF document does not conform: {errors[0]}")
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse(argv)
    if isinstance(args, int):  # --help, or argparse's one error line (already printed)
        return args
    skipped: list[SkippedLine] = []
    try:
        text = render(args.run, args.format, skipped)
    except (OSError, ValueError) as e:
        print(f"export: {terminal_text(str(e).replace(chr(10), ' '))}", file=sys.stderr)
        return 2
    if args.output:
        try:
            write_text_atomic(args.output, text)
        except OSError as e:  # the checks passed, the write did not (a full disk, a race)
            print(f"export: cannot write {terminal_text(args.output)}: {e.strerror or e}", file=sys.stderr)
            return 2
        print(f"export: {args.format} -> {terminal_text(args.output)}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    if skipped:
        print(f"export: {skipped_words(skipped)}; the rest exported", file=sys.stderr)
    return 0
