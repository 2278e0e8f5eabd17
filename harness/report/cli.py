"""`python -m harness report RESULTS_DIR... [-o OUT] [--history FILE] [--accuracy-floor P=S] [--memory-cap MiB]
[--camera-fps FPS] [--server-bound-ms MS] [--min-shape PX] [--headroom SHARE]`: decides again from the records, never re-running."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from harness.core.cli_args import Parser, argparse_type, input_file, output_dir
from harness.core.numeric_options import number
from harness.core.results_dir import read_json_file
from harness.core.safe_text import terminal_text

log = logging.getLogger(__name__)


def build_parser() -> Parser:
    """The report command's arguments."""
    p = Parser(
        "report",
        description="Render results/<run_id>/ directories into reports/<run_id>/index.html (one column group per run).",
    )
    p.add_argument(
        "results", nargs="+", type=Path, help="run directories (holding cells.jsonl), or their parent"
    )
    p.add_argument(
        "-o",
        "--out",
        type=argparse_type(output_dir, "-o"),
        default=Path("reports"),
        help="report root (default: reports)",
    )
    p.add_argument(
        "--history",
        type=argparse_type(input_file, "--history"),
        help="JSON file from the history stage: trends and regressions",
    )
    p.add_argument(
        "--accuracy-floor",
        action="append",
        default=[],
        metavar="PRECISION=SHARE",
        help="share of the PyTorch fp32 reference's mAP50-95 a cell must keep to be picked, per precision "
        "(default fp32=0.99 fp16=0.99 int8=0.95); repeatable",
    )
    p.add_argument(
        "--memory-cap",
        type=number("--memory-cap").argparse_type(),
        metavar="MiB",
        help="pick only cells whose host peak RSS (and process device peak, where measured) is at most MiB; "
        "a cell without a memory figure is not known to fit and is rejected; applies to every use case",
    )
    p.add_argument(
        "--camera-fps",
        type=number("--camera-fps").argparse_type(),
        default=30.0,
        metavar="FPS",
        help="the camera use case's frame rate: a pick keeps its e2e p99 within 1000/FPS ms (default 30)",
    )
    p.add_argument(
        "--server-bound-ms",
        type=number("--server-bound-ms").argparse_type(),
        metavar="MS",
        help="the server use case's p99 bound: re-decided from the rates each server scenario tried (default: the "
        "bound the run measured under)",
    )
    p.add_argument(
        "--min-shape",
        type=number("--min-shape").argparse_type(),
        metavar="PX",
        help="pick only configurations whose smaller input side is at least PX pixels",
    )
    p.add_argument(
        "--headroom",
        type=number("--headroom").argparse_type(),
        default=1.0,
        metavar="SHARE",
        help="keep each latency figure within SHARE of its bound (0.8: the camera's e2e p99 within 80%% of the "
        "frame time, the server's percentile within 80%% of its bound); default 1",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="print only errors")
    return p


def constraints(args: argparse.Namespace, floors: dict[str, float]):
    """The report's constraints from its arguments (each number parsed by its declaration,
    harness.core.numeric_options, so out-of-range values never reach the decision)."""
    from harness.decide.picks import Constraints

    return Constraints(
        floors, args.memory_cap, args.camera_fps, args.server_bound_ms, args.min_shape, args.headroom
    )


def accuracy_floors(items: list[str]) -> dict[str, float]:
    """--accuracy-floor PRECISION=SHARE items over the defaults; ValueError with one line on a bad item."""
    from harness.decide.picks import ACCURACY_FLOORS

    floors = dict(ACCURACY_FLOORS)
    for item in items:
        name, _, value = item.partition("=")
        try:
            share = float(value)
        except ValueError:
            share = float("nan")
        if name not in floors or not 0.0 <= share <= 1.0:
            raise ValueError(
                f"--accuracy-floor {item!r}: expected PRECISION=SHARE with PRECISION one of "
                f"{', '.join(floors)} and SHARE between 0 and 1"
            )
        floors[name] = share
    return floors


def _one_line(e: Exception) -> str:
    return terminal_text(str(e).replace("\n", " "))


def main(argv: list[str] | None = None) -> int:
    """Run the report command; returns the exit status (0 written, 2 bad input: an option, a file that breaks the
    reading rule of harness.core.results_dir, a run holding no records). A bad line of cells.jsonl is skipped
    with a warning naming its file and line, and the report is written from the rest."""
    args = build_parser().parse(argv)
    if isinstance(args, int):  # --help, or argparse's one error line (already printed)
        return args
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO, format="%(message)s")
    from harness.report.render import render_report

    try:  # every option before any file is read
        floors = accuracy_floors(args.accuracy_floor)
        cons = constraints(args, floors)
    except ValueError as e:
        print(f"report: {_one_line(e)}", file=sys.stderr)
        return 2
    history = None
    if args.history:
        try:
            history = read_json_file(args.history, "history file")  # the reading rule of every run file
            if not isinstance(history, dict):
                raise ValueError(f"a JSON {type(history).__name__}, not an object")
        except (OSError, ValueError) as e:  # ValueError: not JSON, not UTF-8, too big or too deep
            print(
                f"report: --history {_one_line(args.history)}: cannot read it: {_one_line(e)}",
                file=sys.stderr,
            )
            return 2
    try:
        index = render_report(args.results, args.out, history, cons=cons)
    except (OSError, ValueError) as e:
        print(f"report: {_one_line(e)}", file=sys.stderr)
        return 2
    if not args.quiet:
        # the path on stdout first, flushed: a failed write (`> /dev/full`) is the command's one error line
        # (cli_args.guarded_stdout), never after a line saying the report was written
        print(terminal_text(index))
        sys.stdout.flush()
        log.info("report written to %s", terminal_text(index))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
