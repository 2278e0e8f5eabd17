"""Command lines of the history stage: `python -m harness import|compare|merge ...`.

Exit statuses: 0 success (compare: no regression), 1 compare found a regression, 2 the command could not run
(bad arguments, refused import, unknown run).
"""

from __future__ import annotations

import argparse
import json
import logging
import sqlite3
import sys
from pathlib import Path

from harness.core import locations
from harness.core.cli_args import Parser, argparse_type, database_file, output_dir, output_file
from harness.core.numeric_options import number
from harness.core.results_dir import HistoryError, is_results_dir
from harness.core.safe_text import terminal_text
from harness.history import query
from harness.history.compare import BaselineSpec, Comparison, Thresholds, compare_run
from harness.history.markdown import render
from harness.history.merge import merge_runs
from harness.history.report import history_view
from harness.history.store import (
    ImportResult,
    db_error,
    default_db_path,
    import_run_dir,
    open_db,
)

log = logging.getLogger(__name__)

EXIT_OK, EXIT_REGRESSION, EXIT_ERROR = 0, 1, 2


def _setup_logging() -> None:
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr
        )


def _db_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        type=argparse_type(database_file, "--db"),
        default=None,
        help="history database (default: $YOLO26_BENCH_HISTORY, else RESULTS_DIR/history.sqlite)",
    )
    parser.add_argument(
        "--results-dir",
        type=Path,
        default=Path(locations.results_dir()),
        metavar="DIR",
        help="the suite's --results-dir, whose history.sqlite is the default database (default: results)",
    )


def _db(args: argparse.Namespace) -> Path:
    """--db, else the database the suite imports into for --results-dir (store.default_db_path)."""
    return args.db or default_db_path(args.results_dir)


def main_import(argv: list[str] | None = None) -> int:
    """`python -m harness import RESULTS_DIR... [--db PATH]`: import runs into the history (idempotent)."""
    _setup_logging()
    parser = Parser("import", description=main_import.__doc__)
    parser.add_argument("results_dirs", nargs="+", type=Path, metavar="RESULTS_DIR")
    _db_arg(parser)
    args = parser.parse(argv)
    if isinstance(args, int):  # --help, or argparse's one error line (already printed)
        return args
    db = _db(args)
    failed = 0
    for run_dir in args.results_dirs:
        try:
            for r in import_run_dir(db, run_dir):
                print(r.describe())
        except HistoryError as e:
            log.error("%s", e)
            failed += 1
    return EXIT_ERROR if failed else EXIT_OK


def _thresholds(args: argparse.Namespace) -> Thresholds:
    return Thresholds(
        latency_pct=args.threshold,
        spread_k=args.spread_k,
        alpha=args.alpha,
        mem_pct=args.mem_pct,
        mem_mb=args.mem_mb,
        window=args.spread_window,
        min_runs=args.min_runs,
    )


def _compare_parser() -> Parser:
    d = Thresholds()
    p = Parser(
        "compare",
        description="Compare a run with its baseline in its series; exit 1 on any regression.",
    )
    p.add_argument("run", nargs="?", help="run id or results directory (imported first); default: newest run")
    p.add_argument("--baseline", default="window:5", help="RUN | last | window:N (default: window:5)")
    p.add_argument("--machine", help="only this machine's run, when the run id exists on several")
    p.add_argument(
        "--threshold",
        type=number("--threshold").argparse_type(),
        default=d.latency_pct,
        help="latency threshold, percent",
    )
    p.add_argument(
        "--spread-k",
        type=number("--spread-k").argparse_type(),
        default=d.spread_k,
        help="multiple of the series' robust spread",
    )
    p.add_argument(
        "--spread-window",
        type=number("--spread-window").argparse_type(),
        default=d.window,
        help="runs behind the series' spread",
    )
    p.add_argument(
        "--alpha",
        type=number("--alpha").argparse_type(),
        default=d.alpha,
        help="significance level of the Mann-Whitney test",
    )
    p.add_argument(
        "--min-runs",
        type=number("--min-runs").argparse_type(),
        default=d.min_runs,
        help="runs the series must hold before latency changes fail a run (fewer: insufficient history)",
    )
    p.add_argument(
        "--mem-pct",
        type=number("--mem-pct").argparse_type(),
        default=d.mem_pct,
        help="memory threshold, percent",
    )
    p.add_argument(
        "--mem-mib",
        "--mem-mb",
        dest="mem_mb",
        type=number("--mem-mib").argparse_type(),
        default=d.mem_mb,
        help="memory threshold, MiB",
    )
    p.add_argument(
        "--markdown",
        type=argparse_type(output_file, "--markdown"),
        help="also write the Markdown to this file",
    )
    p.add_argument(
        "--json", type=argparse_type(output_file, "--json"), help="write the comparison as JSON to this file"
    )
    p.add_argument(
        "--report-json",
        type=argparse_type(output_file, "--report-json"),
        help="write trends and regressions for `python -m harness report --history FILE` (null: no history)",
    )
    _db_arg(p)
    return p


def _resolve(
    conn: sqlite3.Connection, db: Path, run: str | None, machine: str | None, imported: list[ImportResult]
) -> list[query.RunRef]:
    """The run(s) RUN names: those just imported from a results directory, else a run id (default: newest)."""
    if imported:
        refs = [ref for r in imported for ref in query.resolve_run(conn, r.run_id, r.machine)]
        return [r for r in refs if machine is None or r.machine == machine]
    run = run or query.newest_run_id(conn)
    if run is None:
        raise HistoryError(f"{db}: the history holds no run")
    refs = query.resolve_run(conn, run, machine)
    if not refs:
        where = f" on machine {machine!r}" if machine else ""
        raise HistoryError(f"run {run!r}{where} is not in the history {db}")
    return refs


def main_compare(argv: list[str] | None = None) -> int:
    """`python -m harness compare [RUN] [--baseline RUN|last|window:N]`: Markdown on stdout, exit 1 on regression."""
    _setup_logging()
    args = _compare_parser().parse(argv)
    if isinstance(args, int):  # --help, or argparse's one error line (already printed)
        return args
    db = _db(args)
    try:
        spec = BaselineSpec.parse(args.baseline)
        # RUN may be a results directory: import it first (validated before the database is touched).
        imported = import_run_dir(db, args.run) if args.run and is_results_dir(args.run) else []
        if not db.exists():
            raise HistoryError(f"{db}: no history database; import a results directory first")
        conn = open_db(db)
        try:
            refs = _resolve(conn, db, args.run, args.machine, imported)
            comparisons: list[Comparison] = [compare_run(conn, ref, spec, _thresholds(args)) for ref in refs]
            view = history_view(conn, comparisons) if args.report_json else None
        except sqlite3.Error as e:  # a database damaged under us: one line, like every other history error
            raise HistoryError(db_error(db, e)) from None
        finally:
            conn.close()
    except (HistoryError, ValueError) as e:
        log.error("%s", e)
        return EXIT_ERROR
    text = render(comparisons)
    print(text)
    if args.markdown:
        args.markdown.write_text(text, encoding="utf-8")
    if args.json:
        args.json.write_text(json.dumps([c.to_dict() for c in comparisons], indent=2), encoding="utf-8")
    if args.report_json:
        args.report_json.write_text(json.dumps(view, indent=1), encoding="utf-8")
    return EXIT_REGRESSION if any(c.regressions for c in comparisons) else EXIT_OK


def main_merge(argv: list[str] | None = None) -> int:
    """`python -m harness merge RESULTS_DIR... -o OUT_DIR`: import runs of several machines, write one merged run."""
    _setup_logging()
    parser = Parser("merge", description=main_merge.__doc__)
    parser.add_argument("results_dirs", nargs="+", type=Path, metavar="RESULTS_DIR")
    parser.add_argument(
        "-o",
        "--output",
        type=argparse_type(output_dir, "-o"),
        required=True,
        metavar="OUT_DIR",
        help="merged results dir (not a symbolic link: name the directory itself)",
    )
    parser.add_argument("--run-id", help="id of the merged run (default: the name of OUT_DIR)")
    parser.add_argument(
        "--replace",
        action="store_true",
        help="replace OUT_DIR when it already holds files (without it such a directory is refused)",
    )
    _db_arg(parser)
    args = parser.parse(argv)
    if isinstance(args, int):  # --help, or argparse's one error line (already printed)
        return args
    try:
        result = merge_runs(
            _db(args), args.results_dirs, args.output, args.run_id, replace_existing=args.replace
        )
    except HistoryError as e:
        log.error("%s", e)
        return EXIT_ERROR
    print(terminal_text(f"merged run {result.run_id}: {', '.join(result.machines)} -> {result.out_dir}"))
    return EXIT_OK
