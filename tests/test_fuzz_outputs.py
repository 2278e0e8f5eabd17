"""Fuzzed (issue 40): every option of every `yolo26-bench` command that names a path the command writes, given
every kind of path: a directory, a symbolic link (to a file, to a directory, to a link, to nothing), a missing
directory, an existing file, a file's child, a trailing slash; absolute or relative, `-o X` or `-o=X`.

The options (harness.core.cli_args.output_file / output_dir, checked while the arguments are parsed, before any
work): report -o, compare --markdown/--json/--report-json, merge -o, export -o, durations -o; and the suite's
--expected-file under --update-expected and its --results-dir/--reports-dir/--cache-dir (SelectionError, exit
status 4 through pytest, harness.pytest_plugin.options).

What must hold for each generated command line (in-process):
- exit status 2 and exactly one error line, never a traceback;
- a path the option refuses (a link of any kind; a directory or a missing directory for a file; a file for a
  directory; a file's child) is named in that line by the option; a path it takes (an existing file where the
  command replaces its file whole: export, compare, durations; a missing directory where the command creates its
  directory: report, merge) goes on to the command's own refusal of its other input, which does not name it;
- nothing written: every file, directory and link under the scratch directory and the working directory is as
  it was (kind, size, content, link target), so a link's target is untouched.

Each command is given an input that fails after the options (a missing run, an unknown profile), so nothing runs
for long. The seed is printed; `FUZZ_SEED=N` replays it and `FUZZ_EXAMPLES=N` sets the examples per test (default
here 50: 9 tests, about 6 s on 2 cores).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from hypothesis import given, seed
from hypothesis import strategies as st

from harness.core.axes import SelectionError
from harness.exports.cli import main as export_main
from harness.history.cli import main_compare, main_merge
from harness.pytest_plugin import durations_file, options
from harness.report.cli import main as report_main
from tests.fuzz_kit import SEED, fuzz_settings, refused

FUZZ = fuzz_settings(50)

KEEP = "keep: a link's target\n"

#: path kind -> (valid for a file the command writes whole, valid for a directory it writes into)
KINDS = {
    "file": (True, False),
    "new": (True, True),
    "dir": (False, True),
    "dir/": (False, True),
    # missing/.../name: a file's directory missing (refused); a directory, created with its parents (taken)
    "missing": (False, True),
    "file/below": (False, False),
    "link_file": (False, False),
    "link_dir": (False, False),
    "link_link": (False, False),
    "dangling": (False, False),
    "link_dir/": (False, False),
}


def _world(root: Path) -> None:
    (root / "dir").mkdir()
    (root / "dir" / "inside").write_text(KEEP)
    (root / "file").write_text(KEEP)
    os.symlink(root / "file", root / "link_file")
    os.symlink(root / "dir", root / "link_dir")
    os.symlink(root / "link_file", root / "link_link")
    os.symlink(root / "nowhere", root / "dangling")


def _snapshot(*roots: Path) -> dict[str, tuple]:
    """Every entry under `roots`: its kind and, for a link its target, for a file its size and content's hash."""
    out: dict[str, tuple] = {}
    for root in roots:
        for top, dirs, names in os.walk(root, followlinks=False):
            for n in dirs + names:
                p = os.path.join(top, n)
                if os.path.islink(p):
                    out[p] = ("link", os.readlink(p))
                elif os.path.isfile(p):
                    data = Path(p).read_bytes()
                    out[p] = ("file", len(data), hashlib.sha256(data).hexdigest())
                else:
                    out[p] = ("dir",)
    return out


def _path(data, world: Path, cwd: Path, kind: str) -> str:
    if kind == "missing":
        depth = data.draw(st.integers(1, 3), label="depth")
        path = world.joinpath(*[f"missing{i}" for i in range(depth)], "out")
    elif kind == "new":
        name = data.draw(st.text(alphabet="abcxyz0-_.", min_size=1, max_size=12), label="name")
        path = world / ("n" + name)  # never `.` or `..`
    else:
        path = world / kind.rstrip("/")
    text = str(path) + ("/" if kind.endswith("/") else "")
    if data.draw(st.booleans(), label="relative"):
        text = os.path.relpath(text, cwd) + ("/" if kind.endswith("/") else "")
    return text


# (command, option) -> (main, argv failing after the options, writes a file (True) or into a directory (False))
def _outputs(world: Path) -> dict[tuple[str, str], tuple]:
    missing = str(world / "no-such-run")
    db = str(world / "no-history.sqlite")
    unknown = ["--profile", "no-such-profile"]
    return {
        ("report", "-o"): (report_main, [missing, "-q"], False),
        ("compare", "--markdown"): (main_compare, ["no-such-run", "--db", db], True),
        ("compare", "--json"): (main_compare, ["no-such-run", "--db", db], True),
        ("compare", "--report-json"): (main_compare, ["no-such-run", "--db", db], True),
        ("merge", "-o"): (main_merge, [missing, missing + "2", "--db", db], False),
        ("export", "-o"): (export_main, [missing], True),
        ("durations", "-o"): (durations_file.main, unknown, True),
    }


OUTPUTS = sorted(_outputs(Path("/nonexistent")))
#: what an output path's refusal says (harness.core.cli_args): a line without any of these is another error
REFUSALS = (
    "symbolic link",
    "exists and is not",
    "its directory",
    "is not a directory",
    "names no file",
    "cannot be checked",
)


@pytest.mark.parametrize(("cmd", "flag"), OUTPUTS)
def test_every_output_option_refuses_a_path_it_cannot_write_before_any_work(
    cmd, flag, tmp_path_factory, monkeypatch
):
    cwd = tmp_path_factory.mktemp(f"cwd-{cmd}")
    monkeypatch.chdir(cwd)
    monkeypatch.delenv("YOLO26_BENCH_HISTORY", raising=False)
    counter = iter(range(10**9))

    @FUZZ
    @seed(SEED)
    @given(data=st.data(), kind=st.sampled_from(sorted(KINDS)), joined=st.booleans())
    def one(data, kind, joined):
        world = tmp_path_factory.mktemp(f"o-{cmd}{flag}-{next(counter)}", numbered=False)
        _world(world)
        main, fixed, writes_file = _outputs(world)[(cmd, flag)]
        value = _path(data, world, cwd, kind)
        argv = [*fixed, f"{flag}={value}"] if joined else [*fixed, flag, value]
        valid = KINDS[kind][0 if writes_file else 1]
        before = _snapshot(world, cwd)
        where = f"(fuzz seed {SEED}) {cmd} {argv!r} ({kind})"
        line = refused(main, argv, where)
        said_no = flag in line and any(r in line for r in REFUSALS)
        assert said_no != valid, f"{where}: {'refused' if said_no else 'taken'}: {line!r}"
        assert _snapshot(world, cwd) == before, (
            f"{where}: changed {set(_snapshot(world, cwd).items()) ^ set(before.items())}"
        )
        assert (world / "file").read_text() == KEEP and (world / "dir" / "inside").read_text() == KEEP

    one()


# ---- the suite: --expected-file under --update-expected, and its store directories ---------------------------


@pytest.mark.parametrize("flag", ["--expected-file", "--results-dir"])
def test_the_suites_written_paths_are_one_error_line_naming_the_option(flag, tmp_path_factory, monkeypatch):
    """--expected-file (rewritten whole by --update-expected) as every `-o` file; --results-dir (as --reports-dir and
    --cache-dir: one function) a store the run adds to: a link to an existing directory is followed there, a link
    to nothing or to a file, a file, a file's child are refused."""
    cwd = tmp_path_factory.mktemp("cwd-suite")
    monkeypatch.chdir(cwd)
    counter = iter(range(10**9))
    store_valid = {"new", "dir", "dir/", "missing", "link_dir", "link_dir/"}

    @FUZZ
    @seed(SEED)
    @given(data=st.data(), kind=st.sampled_from(sorted(KINDS)))
    def one(data, kind):
        world = tmp_path_factory.mktemp(f"s{flag}-{next(counter)}", numbered=False)
        _world(world)
        value = _path(data, world, cwd, kind)
        given_ = {"expected_file": value, "update_expected": True}
        before = _snapshot(world, cwd)
        where = f"(fuzz seed {SEED}) {flag} {value!r} ({kind})"
        try:
            if flag == "--expected-file":
                valid = KINDS[kind][0]
                options.expected_file(given_.get)
            else:
                valid = kind in store_valid
                options.check_writable(Path(value), flag)
        except SelectionError as e:
            text = str(e)
            assert "\n" not in text and flag in text and not valid, f"{where}: {text!r}"
        except Exception as e:
            pytest.fail(f"{where}: {type(e).__name__}: {e}")
        else:
            assert valid, f"{where}: taken"
        assert _snapshot(world, cwd) == before, where

    one()
