"""`python -m harness report RESULTS_DIR... [-o OUT] [--history FILE]`."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

log = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    """The report command's arguments."""
    p = argparse.ArgumentParser(
        prog="python -m harness report",
        description="Render results/<run_id>/ directories into reports/<run_id>/index.html (one column group per run).",
    )
    p.add_argument(
        "results", nargs="+", type=Path, help="run directories (holding cells.jsonl), or their parent"
    )
    p.add_argument("-o", "--out", type=Path, default=Path("reports"), help="report root (default: reports)")
    p.add_argument("--history", type=Path, help="JSON file from the history stage: trends and regressions")
    p.add_argument("-q", "--quiet", action="store_true", help="print only errors")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the report command; returns the exit status (0 written, 2 bad input)."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO, format="%(message)s")
    from harness.report.render import render_report

    history = None
    if args.history:
        try:
            history = json.loads(args.history.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            print(f"report: cannot read history {args.history}: {e}", file=sys.stderr)
            return 2
    try:
        index = render_report(args.results, args.out, history)
    except (FileNotFoundError, ValueError) as e:
        print(f"report: {e}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(index)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
