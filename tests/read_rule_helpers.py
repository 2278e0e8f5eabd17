"""Shared by tests/test_read_rule.py and tests/test_fuzz_records.py: a small run to damage, and the commands that
read it (report, export, import) run in-process with their terminal output captured."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from harness.core.safe_text import unsafe_on_page
from harness.exports.cli import main as export_main
from harness.history.cli import main_import
from harness.report.cli import main as report_main
from tests.fuzz_kit import captured

CPU_RUN = Path(__file__).parent / "data" / "report" / "cpu_run"
#: four records of CPU_RUN: ok (onnxruntime, with a log), skipped, parity_failed and run_failed (with failures)
SMALL = (1, 4, 16, 17)


def record_lines() -> list[bytes]:
    """CPU_RUN's record lines (each with its newline)."""
    return (CPU_RUN / "cells.jsonl").read_bytes().splitlines(keepends=True)


def small_records() -> list[dict]:
    lines = record_lines()
    return [json.loads(lines[i]) for i in SMALL]


def make_run(
    root: Path, lines: list[bytes] | None = None, env: bytes | None = None, name: str = "run"
) -> Path:
    """A results directory under `root`: `lines` as cells.jsonl (default: the SMALL records), CPU_RUN's env.json
    (or `env`), and CPU_RUN's logs."""
    run = root / name
    run.mkdir(parents=True)
    if lines is None:
        lines = [record_lines()[i] for i in SMALL]
    (run / "cells.jsonl").write_bytes(b"".join(lines))
    (run / "env.json").write_bytes(env if env is not None else (CPU_RUN / "env.json").read_bytes())
    shutil.copytree(CPU_RUN / "logs", run / "logs")
    return run


def line_of(rec: dict) -> bytes:
    return (json.dumps(rec) + "\n").encode("utf-8")


@dataclass
class Ran:
    status: int
    out: str
    err: str

    @property
    def error_lines(self) -> list[str]:
        """stderr's lines but the INFO ones (what a user reads as warnings and errors)."""
        return [ln for ln in self.err.splitlines() if ln.strip() and not ln.startswith("INFO ")]


def call(main, argv: list[str]) -> Ran:
    """`main(argv)` in-process; an exception out of it propagates (the traceback a user would see)."""
    with captured() as (out, err):
        try:
            status = main(argv)
        except SystemExit as e:
            status = e.code if isinstance(e.code, int) else 2
    return Ran(status, out.getvalue(), err.getvalue())


def report(run: Path, out: Path) -> Ran:
    return call(report_main, [str(run), "-o", str(out)])


def export(run: Path, fmt: str = "csv") -> Ran:
    return call(export_main, [str(run), "--format", fmt])


def import_(run: Path, db: Path) -> Ran:
    return call(main_import, [str(run), "--db", str(db)])


def page_files(out: Path) -> dict[str, str]:
    """index.html and summary.md of every report under `out` (latest/ included)."""
    return {
        str(p): p.read_text(encoding="utf-8")
        for name in ("index.html", "summary.md")
        for p in sorted(out.rglob(name))
    }


def raw_unsafe(out: Path) -> dict[str, list[str]]:
    """The raw control and bidirectional characters in each page file (a tab and a newline are the page's own)."""
    return {
        path: sorted(set(found)) for path, text in page_files(out).items() if (found := unsafe_on_page(text))
    }
