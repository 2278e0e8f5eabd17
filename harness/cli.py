"""The one command line: `yolo26-bench COMMAND ...` (the console script) and `python -m harness COMMAND ...`.

Both names run `main`; each command's own module parses its arguments, so `COMMAND --help` is that module's help.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from harness.core.cli_args import guarded_stdout, prog_name

#: command -> (module, function, one line of help); each function takes argv and returns the exit status
COMMANDS: dict[str, tuple[str, str, str]] = {
    "run": (
        "harness.cli",
        "main_run",
        "run the benchmark matrix: `pytest suites/ --benchmark-only [OPTIONS]` (the README's main job)",
    ),
    "report": ("harness.report.cli", "main", "render the static HTML report (reports/<run_id>/index.html)"),
    "import": ("harness.history.cli", "main_import", "import runs into the history database"),
    "compare": (
        "harness.history.cli",
        "main_compare",
        "compare a run with its history; exit 1 on regressions",
    ),
    "merge": ("harness.history.cli", "main_merge", "merge runs from several machines into one results dir"),
    "check": (
        "harness.check.cli",
        "main",
        "list each record whose figures break a relation the harness states; exit 1 when any breaks",
    ),
    "durations": (
        "harness.pytest_plugin.durations_file",
        "main",
        "write pytest-split's durations file from the history's per-cell estimates (shards of equal time)",
    ),
    "export": (
        "harness.exports.cli",
        "main",
        "write a run as Bencher Metric Format JSON or a CSV table (dashboards, spreadsheets)",
    ),
}


def usage(prog: str) -> str:
    width = max(len(c) for c in COMMANDS)
    lines = [f"usage: {prog} COMMAND [ARGS]", "", "commands:"]
    lines += [f"  {name:<{width}}  {text}" for name, (_, _, text) in COMMANDS.items()]
    lines += ["", f"`{prog} COMMAND --help` shows a command's options."]
    return "\n".join(lines)


def command(name: str) -> Callable[[list[str]], int]:
    """The function behind a command (imported late: `--help` of one command imports only its module)."""
    module, func, _ = COMMANDS[name]
    return getattr(importlib.import_module(module), func)


def nearest(name: str) -> str:
    """The command `name` was most likely meant to be (the closest by spelling; the first when none is close)."""
    import difflib

    close = difflib.get_close_matches(name.lower(), COMMANDS, n=1, cutoff=0.0)
    return close[0] if close else next(iter(COMMANDS))


def main(argv: list[str] | None = None) -> int:
    """Dispatch `COMMAND ARGS...`; returns the exit status (2: unknown command). Every command's standard output
    is checked (harness.core.cli_args.guarded_stdout): a reader that closes it early (`yolo26-bench --help | head
    -1`) ends it quietly, a full disk under it (`> out.csv`) is one error line and status 2."""
    args = list(sys.argv[1:] if argv is None else argv)
    name = args[0] if args and args[0] in COMMANDS else None
    prog = f"{prog_name()} {name}" if name else prog_name()
    return guarded_stdout(lambda: _dispatch(args), prog)


def _dispatch(argv: list[str]) -> int:
    prog = prog_name()
    if not argv or argv[0] in ("-h", "--help"):
        print(usage(prog))
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        shown = repr(name if len(name) <= 40 else name[:40] + "...")
        print(
            f"{prog}: error: unknown command {shown}; did you mean {nearest(name)!r}? (`{prog} --help` lists "
            "the commands)",
            file=sys.stderr,
        )
        return 2
    return command(name)(rest)


# -- run -----------------------------------------------------------------------------------------------------------
SUITES = "suites"
MATRIX_GROUP = "YOLO26 benchmark matrix:"  # the title of the plugin's option group in `pytest --help`


def repository(cwd: Path | None = None) -> Path | None:
    """Where the suites are: the working directory when it holds suites/ and conftest.py, else the checkout this
    package was installed from (an editable install), else None."""
    for root in (Path(cwd or Path.cwd()), Path(__file__).resolve().parents[1]):
        if (root / SUITES).is_dir() and (root / "conftest.py").is_file():
            return root
    return None


def pytest_command(options: list[str]) -> list[str]:
    """The README's main job with `options` passed through."""
    return [sys.executable, "-m", "pytest", f"{SUITES}/", "--benchmark-only", *options]


def matrix_help(root: Path) -> str:
    """The plugin's option group, cut from `pytest --help` (the options are the plugin's, not a copy)."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest", f"{SUITES}/", "--help"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    lines = out.splitlines()
    if MATRIX_GROUP not in lines:
        return "(the plugin's options could not be read from `pytest --help`)"
    start = lines.index(MATRIX_GROUP)
    end = next(
        (i for i in range(start + 1, len(lines)) if lines[i] and not lines[i][0].isspace()), len(lines)
    )
    return "\n".join(lines[start:end]).rstrip()


def main_run(argv: list[str]) -> int:
    """`run [PYTEST OPTIONS]`: `pytest suites/ --benchmark-only OPTIONS` in the repository; pytest's exit status."""
    prog = f"{prog_name()} run"
    root = repository()
    if argv and argv[0] in ("-h", "--help"):
        print(
            f"usage: {prog} [OPTIONS]\n\nRuns `pytest suites/ --benchmark-only OPTIONS` in the repository (the "
            "README's main job): records in results/<run_id>/, the report in reports/latest/index.html.\nEvery "
            "pytest option passes through (-k, -m, -x, -q, ...); the matrix options are:\n"
        )
        print(matrix_help(root) if root else "(no suites/ found: run it from a clone of yolo26-bench)")
        return 0
    if root is None:
        print(
            f"{prog}: no {SUITES}/ with conftest.py in {Path.cwd()} (nor beside the installed package): run it "
            "from a clone of yolo26-bench",
            file=sys.stderr,
        )
        return 2
    return subprocess.run(pytest_command(argv), cwd=root, check=False).returncode
