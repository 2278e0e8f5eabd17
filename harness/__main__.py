"""`python -m harness COMMAND ...`: report, import, compare, merge."""

from __future__ import annotations

import sys

USAGE = """usage: python -m harness COMMAND [ARGS]

commands:
  report RESULTS_DIR... [-o OUT]   render the static HTML report (reports/<run_id>/index.html)
  import RESULTS_DIR...            import runs into the history database (--results-dir DIR: the suite's
                                   results dir, whose history.sqlite is the default; or --db PATH)
  compare [RUN] [--baseline ...]   compare a run with its history; non-zero exit on regressions
                                   (--results-dir DIR / --db PATH as for import)
  merge RESULTS_DIR... -o OUT      merge runs from several machines into one results dir
"""


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    cmd, rest = argv[0], argv[1:]
    if cmd == "report":
        from harness.report.cli import main as run
    elif cmd == "compare":
        from harness.history.cli import main_compare as run
    elif cmd == "merge":
        from harness.history.cli import main_merge as run
    elif cmd == "import":
        from harness.history.cli import main_import as run
    else:
        print(f"error: unknown command {cmd!r}\n{USAGE}", file=sys.stderr)
        return 2
    return run(rest)


if __name__ == "__main__":
    sys.exit(main())
