"""`yolo26-bench durations`: pytest-split's durations file, written from the history's estimates.

pytest-split (`--splits N --group K --splitting-algorithm least_duration --durations-path FILE`) balances its
shards by the seconds this file gives each test. Its own `--store-durations` records each test's wall time, which
here says little (the first test of a run holds the whole export phase; a workload's timing phase lands on one
test), so the file is written from the one estimator (harness.plan.price) instead: every cell of the profile with its
expected seconds, whatever their source (recorded timelines, history, export cache, nearest cell, the plan's
table scaled to this machine's speed); a skip here 0. The shards then hold equal expected time, not equal counts.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

from harness.core import locations
from harness.core.axes import SelectionError
from harness.core.cli_args import Parser, argparse_type, output_file, printable
from harness.core.results_dir import write_text_atomic
from harness.history.store import default_db_path
from harness.plan.matrix import Selection, build, profile_names
from harness.pytest_plugin.nightplan import estimate_planned
from harness.pytest_plugin.options import scenario_mode

#: the parametrized test every cell is (suites/test_matrix.py), as pytest names it from the repository root
NODE = "suites/test_matrix.py::test_cell[{}]"


def durations(
    profile: str, db: Path, cache_dir: Path | None, scenarios: str, results_dir: Path | None = None
) -> tuple[dict[str, float], dict]:
    """Node id -> expected seconds for every cell of `profile`; and how many estimates came from each source."""
    planned = build(profile, Selection())
    _, costs, _ = estimate_planned(planned, db, cache_dir, scenarios, results_dir=results_dir)
    sources: dict[str, int] = {}
    for c in costs.values():
        sources[c.source] = sources.get(c.source, 0) + 1
    return {NODE.format(cid): round(c.seconds, 2) for cid, c in costs.items()}, sources


def _harness_record(record: logging.LogRecord) -> bool:
    return record.name == "harness" or record.name.startswith("harness.")


@contextlib.contextmanager
def only_harness_warnings() -> Iterator[None]:
    """While the estimate runs, only harness's own warnings on stderr: each backend's probe imports its library,
    and those warn on import about versions and optional parts this command never uses (coremltools, torchao,
    torch: 13 lines on a CPU install); a warning of the harness (a history it could not read) still shows."""
    root = logging.getLogger()
    handler = logging.StreamHandler(
        sys.stderr
    )  # the root has a handler: Python's last-resort one is not used
    handler.addFilter(_harness_record)
    root.addHandler(handler)
    torch_log = logging.getLogger("torch")  # torch's own handler, set up when it is imported
    level = torch_log.level
    try:
        with contextlib.suppress(ImportError):
            import torch  # noqa: F401

            level = torch_log.level
            torch_log.setLevel(logging.ERROR)
        yield
    finally:
        torch_log.setLevel(level)
        root.removeHandler(handler)


def build_parser() -> Parser:
    p = Parser("durations", description=__doc__.split("\n\n")[0])
    p.add_argument("--profile", default="nightly", help="the matrix profile (default nightly)")
    p.add_argument(
        "-o",
        "--output",
        type=argparse_type(output_file, "-o"),
        required=True,
        metavar="FILE",
        help="the durations file to write (JSON), replacing it whole; its directory must exist, and it is not a "
        "symbolic link (name the file itself)",
    )
    p.add_argument(
        "--results-dir", type=Path, default=Path(locations.results_dir()), help="whose history.sqlite to read"
    )
    p.add_argument(
        "--db", type=Path, help="history database (default: $YOLO26_BENCH_HISTORY, else RESULTS_DIR)"
    )
    p.add_argument("--cache-dir", type=Path, default=Path(locations.cache_dir()), help="the export cache")
    p.add_argument("--scenarios", default="all", help="as the run's --scenarios (default all, the nightly's)")
    return p


def main(argv: list[str] | None = None) -> int:
    """`durations --profile P -o FILE`: write pytest-split's durations file; 2 on bad input (one line, before any
    estimate is made and nothing written)."""
    parser = build_parser()
    args = parser.parse(argv)
    if isinstance(args, int):  # --help, or argparse's one error line (already printed)
        return args
    try:
        if args.profile not in profile_names():
            raise SelectionError(f"--profile: unknown {args.profile!r}; valid: {', '.join(profile_names())}")
        scenario_mode(lambda name: args.scenarios if name == "scenarios" else None, args.profile)
        with only_harness_warnings():
            table, sources = durations(
                args.profile,
                args.db or default_db_path(args.results_dir),
                args.cache_dir,
                args.scenarios,
                args.results_dir,
            )
    except SelectionError as e:
        print(f"{parser.prog}: error: {printable(str(e))}", file=sys.stderr)
        return 2
    try:
        write_text_atomic(args.output, json.dumps(table, indent=1, sort_keys=True) + "\n")
    except OSError as e:  # the checks passed, the write did not (a full disk, a race)
        print(
            f"{parser.prog}: error: cannot write {printable(str(args.output))}: {e.strerror or e}",
            file=sys.stderr,
        )
        return 2
    total = sum(table.values())
    print(
        f"{args.output}: {len(table)} cells, {total / 3600:.1f} h expected; estimates from "
        + ", ".join(f"{n} {s}" for s, n in sorted(sources.items()))
    )
    return 0
