"""Fuzzed, not listed (issue 39): every `yolo26-bench` subcommand and the suite's option parser, driven with
generated values for every option: numbers from the whole float range (inf, nan, -0, 1e309, huge integers), text
with separators, `..`, NUL, newlines, very long strings, and paths of every kind (a directory, a file, a missing
parent, links to each and to nothing, a FIFO, `/dev/null`, `..`, empty).

What must hold for each generated command line (in-process, so thousands run in seconds):
- it ends with exit status 2 (the suite: a SelectionError, pytest's status 4) and exactly one error line, never a
  traceback nor an exception out of the command;
- when a fuzzed option's value is invalid by its own declaration (harness.core.numeric_options, the output-path
  checks of harness.core.cli_args, the suite's validators), that line names the option;
- nothing is written: the scratch directory and the working directory hold the same files afterwards.

Each command is given inputs that fail after the options are checked (a missing run directory, an empty history),
so a valid value reaches the command's own one-line refusal and nothing runs for long. The seed is printed (and
in every failure message): `FUZZ_SEED=N` replays it, `FUZZ_EXAMPLES=N` sets the examples per test (default 100, well
within 60 s in CI; issue 39's note gives the count run locally). A failing example becomes a regular test in
tests/test_option_rules.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, seed
from hypothesis import strategies as st

from harness import cli
from harness.core.axes import SelectionError
from harness.core.cli_args import OutputPathError, database_file, input_file, output_dir, output_file
from harness.core.numeric_options import COMPARE, NUMBERS, REPORT, SUITE
from harness.exports.cli import main as export_main
from harness.history.cli import main_compare, main_import, main_merge
from harness.plan.budget import parse_budget
from harness.pytest_plugin import options
from harness.pytest_plugin.durations_file import main as durations_main
from harness.report.cli import accuracy_floors
from harness.report.cli import main as report_main
from tests.fuzz_kit import SEED, call, error_lines, fuzz_settings, refused

FUZZ = fuzz_settings(100)

# ---- values ---------------------------------------------------------------------------------------------------

SPECIAL = [
    "inf", "-inf", "+inf", "Infinity", "nan", "NaN", "-nan", "1e309", "-1e309", "-0", "0", "-0.0", "1e-320",
    "0x10", "1_000", "", " ", "1,2", "1=2", "a:b", "..", "../..", "/", "\x00", "1\x002", "1\n2", "\t", "--",
    "-x", "=", "a" * 5000, "9" * 5000, "3.5", "1e3", "4294967296", "-1", "2**31", "ω", "\ud800x",
]  # fmt: skip


def _float_texts() -> st.SearchStrategy[str]:
    f = st.floats(allow_nan=True, allow_infinity=True)
    return st.one_of(f.map(repr), f.map(lambda x: f"{x:g}"), f.map(lambda x: f"{x:.3e}"), f.map(str))


VALUES = st.one_of(
    st.sampled_from(SPECIAL),
    _float_texts(),
    st.integers(min_value=-(10**40), max_value=10**40).map(str),
    st.integers(min_value=-5, max_value=5000).map(str),
    st.text(max_size=30),
    st.text(alphabet=",=:/.\\ \x00\n-x0123456789", max_size=40),
)

# paths, relative to the scratch directory (a `world` made for each example); absolute ones are used as they are
PATH_KINDS = [
    "dir", "file", "new", "new_dir/new", "file/below", "link_dir", "link_file", "dangling", "fifo", "..", ".",
    "", "/dev/null", "/", "a\x00b", "x" * 300, "x/" * 200 + "y", "with\nnewline", "-o", "new.csv", "dir/",
]  # fmt: skip
PATHS = st.one_of(st.sampled_from(PATH_KINDS), st.text(max_size=20))


def _world(root: Path) -> None:
    (root / "dir").mkdir()
    (root / "file").write_text("not a run\n")
    os.symlink(root / "dir", root / "link_dir")
    os.symlink(root / "file", root / "link_file")
    os.symlink(root / "nowhere", root / "dangling")
    os.mkfifo(root / "fifo")


def _snapshot(*roots: Path) -> set[str]:
    out = set()
    for root in roots:
        for top, dirs, names in os.walk(root, followlinks=False):
            for n in dirs + names:
                out.add(os.path.join(top, n))
    return out


# ---- running a command in-process --------------------------------------------------------------------------------


# ---- the commands' options ---------------------------------------------------------------------------------------


def _number_invalid(flag: str, value: str) -> bool:
    return NUMBERS[flag].value_error(value) is not None


def _path_invalid(check, value: str, flag: str) -> bool:
    try:
        check(value, flag)
    except OutputPathError:
        return True
    return False


def _floor_invalid(value: str) -> bool:
    try:
        accuracy_floors([value])
    except ValueError:
        return True
    return False


# command -> (main, fixed argv that fails after the options, {flag: (strategy, invalid(value) or None)})
def _commands(world: Path) -> dict:
    missing = str(world / "no-such-run")
    db = str(world / "no-history.sqlite")
    numbers = {r.flag: (VALUES, lambda v, f=r.flag: _number_invalid(f, v)) for r in REPORT}
    return {
        "report": (
            report_main,
            [missing, "-q"],
            {
                **numbers,
                "-o": (PATHS, lambda v: _path_invalid(output_dir, v, "-o")),
                "--history": (PATHS, lambda v: _path_invalid(input_file, v, "--history")),
                "--accuracy-floor": (
                    st.one_of(VALUES, st.sampled_from(["int8=0.5", "fp16=nan"])),
                    _floor_invalid,
                ),
            },
        ),
        "compare": (
            main_compare,
            ["no-such-run", "--db", db],
            {
                **{r.flag: (VALUES, lambda v, f=r.flag: _number_invalid(f, v)) for r in COMPARE},
                "--markdown": (PATHS, lambda v: _path_invalid(output_file, v, "--markdown")),
                "--json": (PATHS, lambda v: _path_invalid(output_file, v, "--json")),
                "--report-json": (PATHS, lambda v: _path_invalid(output_file, v, "--report-json")),
                "--baseline": (st.one_of(VALUES, st.sampled_from(["last", "window:0", "window:x"])), None),
                "--machine": (VALUES, None),
                "--results-dir": (PATHS, None),
            },
        ),
        "merge": (
            main_merge,
            [missing, missing + "2", "--db", db],
            {
                "-o": (PATHS, lambda v: _path_invalid(output_dir, v, "-o")),
                "--run-id": (VALUES, None),
                "--results-dir": (PATHS, None),
            },
        ),
        "export": (
            export_main,
            [missing],
            {
                "-o": (PATHS, lambda v: _path_invalid(output_file, v, "-o")),
                "--format": (st.one_of(VALUES, st.sampled_from(["csv", "bencher"])), None),
            },
        ),
        "durations": (  # an unknown profile: refused after the options, before the 16 s estimate
            durations_main,
            ["-o", str(world / "new.json"), "--profile", "no-such-profile"],
            {
                "-o": (PATHS, lambda v: _path_invalid(output_file, v, "-o")),
                "--scenarios": (VALUES, None),
                "--results-dir": (PATHS, None),
                "--db": (PATHS, None),
                "--cache-dir": (PATHS, None),
            },
        ),
        "import": (
            main_import,
            [missing],
            {
                "--db": (PATHS, lambda v: _path_invalid(database_file, v, "--db")),
                "--results-dir": (PATHS, None),
            },
        ),
    }


def _flags(cmd: str) -> list[str]:
    return sorted(_commands(Path("/nonexistent"))[cmd][2])


def _resolve(world: Path, value: str) -> str:
    """A path kind as a path in this example's world (absolute kinds and odd text as they are)."""
    if value in PATH_KINDS and value and not value.startswith("/") and value not in ("-o",):
        return str(world / value) if value not in ("..", ".") else value
    return value


@pytest.mark.parametrize("cmd", ["report", "compare", "merge", "export", "import", "durations"])
def test_every_subcommand_ends_in_one_line_and_writes_nothing(cmd, tmp_path_factory, monkeypatch):
    cwd = tmp_path_factory.mktemp(f"cwd-{cmd}")
    monkeypatch.chdir(cwd)
    monkeypatch.delenv("YOLO26_BENCH_HISTORY", raising=False)
    counter = iter(range(10**9))

    @FUZZ
    @seed(SEED)
    @given(data=st.data())
    def one(data):
        world = tmp_path_factory.mktemp(f"w-{cmd}-{next(counter)}", numbered=False)
        _world(world)
        main, fixed, opts = _commands(world)[cmd]
        chosen = data.draw(st.lists(st.sampled_from(sorted(opts)), min_size=1, max_size=3, unique=True))
        argv, invalid = list(fixed), []
        for flag in chosen:
            strategy, is_invalid = opts[flag]
            value = data.draw(strategy, label=flag)
            if strategy is PATHS:
                value = _resolve(world, value)
            argv.append(f"{flag}={value}" if data.draw(st.booleans(), label="joined") else flag)
            if not argv[-1].startswith(f"{flag}="):
                argv.append(value)
            if is_invalid is not None and is_invalid(value):
                invalid.append(flag)
        before = _snapshot(world, cwd)
        where = f"(fuzz seed {SEED}) {cmd} {argv!r}"
        line = refused(main, argv, where)
        if (
            invalid
        ):  # the first bad option argparse meets is named: one of those fuzzed (another may be bad too)
            assert any(f in line for f in chosen), f"{where}: the line names none of {chosen}: {line!r}"
        assert _snapshot(world, cwd) == before, f"{where}: wrote {_snapshot(world, cwd) ^ before}"

    one()


def test_unknown_commands_end_in_one_line():
    @FUZZ
    @seed(SEED)
    @given(name=st.one_of(VALUES, st.sampled_from(["reprot", "REPORT", "-x", "--", "run2"])))
    def one(name):
        if name in cli.COMMANDS or name in ("-h", "--help"):
            return
        status, err = call(cli.main, [name])
        assert status == 2 and len(error_lines(err)) == 1, f"(fuzz seed {SEED}) {name!r}: {err!r}"
        assert "did you mean" in err

    one()


# ---- the suite's option parser ---------------------------------------------------------------------------------

#: the suite's text options and the validator each goes through (harness.pytest_plugin.options), numbers aside
SUITE_TEXT = {
    "run_id": lambda opt: options.the_run_id(opt),
    "threads": lambda opt: options.thread_budget(opt),
    "malloc": lambda opt: options.malloc_policy(opt),
    "scenarios": lambda opt: options.scenario_mode(opt, "default"),
    "scenario_durations": lambda opt: options.scenario_durations(opt),
    "accuracy_floor": lambda opt: options.report_constraints(options.with_numbers(opt, {})),
    "shapes": lambda opt: options.selection(opt, ("onnxruntime", "openvino"), ("cpu",)),
    "batches": lambda opt: options.selection(opt, ("onnxruntime", "openvino"), ("cpu",)),
    "sizes": lambda opt: options.selection(opt, ("onnxruntime", "openvino"), ("cpu",)),
    "backends": lambda opt: options.selection(opt, ("onnxruntime", "openvino"), ("cpu",)),
    "time_budget": lambda opt: parse_budget(opt("time_budget")),  # issue 40: 400 digits were inf seconds
}


def test_the_suites_option_parser_ends_in_one_line_naming_the_option():
    names = [r.name for r in SUITE] + sorted(SUITE_TEXT)

    @FUZZ
    @seed(SEED)
    @given(name=st.sampled_from(names), value=VALUES)
    def one(name, value):
        given_ = {name: [value] if name == "accuracy_floor" else value}
        defaults = {"camera_fps": 30.0, "server_bound_ms": 100.0, "accuracy_floor": []}

        def opt(key):
            return given_.get(key, defaults.get(key))

        flag = "--" + name.replace("_", "-")
        where = f"(fuzz seed {SEED}) {flag} {value!r}"
        try:
            if name in SUITE_TEXT:
                SUITE_TEXT[name](opt)
            else:
                options.numbers(opt)
        except SelectionError as e:  # pytest's usage error: one `ERROR:` line, exit status 4
            text = str(e)
            assert "\n" not in text and "\r" not in text, f"{where}: {text!r}"
            assert flag in text or (name == "accuracy_floor" and "--accuracy-floor" in text), (
                f"{where}: {text!r}"
            )
            return
        except Exception as e:
            pytest.fail(f"{where}: {type(e).__name__}: {e}")
        if name not in SUITE_TEXT:  # accepted: then its declaration accepts it too
            assert NUMBERS[flag].value_error(value) is None, where

    one()
