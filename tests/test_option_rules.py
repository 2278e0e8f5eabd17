"""One rule for every numeric option and every output path (issue 39, items 2-4).

Each test names the defect it reproduces; each fails on the code before issue 39 and has its case where the value
or path is accepted (the verdict the other way). In-process calls of each command's `main` (fast); the console
script as a process is tests/test_console.py, the suite's own options tests/test_input_validation.py.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from harness.core.axes import SelectionError
from harness.core.cli_args import OutputPathError, database_file, input_file, output_dir, output_file
from harness.core.numeric_options import COMPARE, NUMBERS, REPORT, SUITE, OptionValueError
from harness.exports.cli import main as export_main
from harness.history.cli import main_compare, main_merge
from harness.history.synthetic import Noise, cell, make_env, make_record, noisy_samples, write_run
from harness.pytest_plugin import options
from harness.report.cli import build_parser as report_parser
from harness.report.cli import main as report_main

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "results" / "samples" / "2026-11-22-cpu-regression" / "20261122-quick-base2"


def _one_error(capsys, option: str) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and option in err and "Traceback" not in err, err
    return err


def _exit_status(call) -> int:
    try:
        return call()
    except SystemExit as e:  # argparse's error: status 2
        return int(e.code or 0)


# ---- 2. numbers: one declaration, one parser ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--camera-fps", "inf"),  # was: ZeroDivisionError traceback in report/shipping.py
        (
            "--server-bound-ms",
            "inf",
        ),  # was: "Out of range float values are not JSON compliant", no option named
        ("--memory-cap", "inf"),  # ... and an empty output directory left behind
        ("--camera-fps", "nan"),
        ("--memory-cap", "1e309"),
        ("--min-shape", "31"),  # was: accepted by report, refused by the suite
        ("--camera-fps", "-0"),
    ],
)
def test_report_refuses_a_bad_number_in_one_line_before_writing(tmp_path, capsys, flag, value):
    out = tmp_path / "reports"
    assert _exit_status(lambda: report_main([str(SAMPLE), "-o", str(out), "-q", f"{flag}={value}"])) == 2
    _one_error(capsys, flag)
    assert not out.exists(), "nothing written on bad input"


def test_report_takes_the_limits_themselves():
    """The other way: the bounds each declaration names are accepted by report's parser."""
    args = report_parser().parse_args(
        [
            str(SAMPLE),
            "--min-shape",
            "32",
            "--camera-fps",
            "10000",
            "--memory-cap",
            "0.001",
            "--server-bound-ms",
            "1",
        ]
    )
    assert (args.min_shape, args.camera_fps, args.memory_cap, args.server_bound_ms) == (
        32,
        10000.0,
        0.001,
        1.0,
    )


VALUES = [
    "31",
    "32",
    "4096",
    "4097",
    "0",
    "-1",
    "inf",
    "-inf",
    "nan",
    "1e400",
    "30",
    "0.5",
    "1.5",
    "abc",
    "",
    " 64 ",
]


@pytest.mark.parametrize("rule", REPORT, ids=[r.flag for r in REPORT])
def test_the_suite_and_report_agree_on_every_shared_option(rule):
    """`report --min-shape 31` was accepted while the suite refused 31: now both parse with the same declaration."""
    assert rule in SUITE
    parser = report_parser()
    for value in VALUES:
        try:
            options.numbers(lambda name, v=value: v if name == rule.name else None)
            suite_ok = True
        except SelectionError:
            suite_ok = False
        try:
            parser.parse_args([str(SAMPLE), f"{rule.flag}={value}"])
            report_ok = True
        except SystemExit:
            report_ok = False
        assert suite_ok == report_ok, f"{rule.flag} {value!r}: suite {suite_ok}, report {report_ok}"


@pytest.mark.parametrize("rule", COMPARE, ids=[r.flag for r in COMPARE])
def test_compare_refuses_non_finite_thresholds_in_one_line(tmp_path, capsys, rule):
    """compare took `--alpha nan`, `--threshold inf`, `--min-runs -3` and judged runs with them."""
    db = tmp_path / "h.sqlite"
    for bad in ("nan", "inf", "-1", "1e12"):
        assert _exit_status(lambda b=bad: main_compare([f"{rule.flag}={b}", "--db", str(db)])) == 2
        _one_error(capsys, rule.flag)
    assert not db.exists()
    assert rule.parse(str(rule.high)) == rule.high  # the other way: the bound itself


def test_every_declared_number_refuses_nan_inf_and_text_and_takes_its_bounds():
    for rule in NUMBERS.values():
        for bad in ("nan", "inf", "-inf", "x", "1e400", str(rule.high * 10 + 1)):
            with pytest.raises(OptionValueError, match=f"^{rule.flag}: "):
                rule.parse(bad)
        assert rule.parse(str(int(rule.high)) if rule.integer else str(rule.high)) == rule.high
        if not rule.strict:
            assert rule.parse(str(int(rule.low))) == rule.low


# ---- 3. output paths -------------------------------------------------------------------------------------------


def test_export_to_an_existing_directory_is_one_line(tmp_path, capsys):
    """Was: an IsADirectoryError traceback."""
    assert _exit_status(lambda: export_main(["--format", "csv", str(SAMPLE), "-o", str(tmp_path)])) == 2
    _one_error(capsys, "-o")


def test_export_into_a_missing_directory_is_one_line(tmp_path, capsys):
    """Was: a FileNotFoundError traceback."""
    out = tmp_path / "missing" / "dir" / "out.csv"
    assert _exit_status(lambda: export_main(["--format", "csv", str(SAMPLE), "-o", str(out)])) == 2
    assert "does not exist" in _one_error(capsys, "-o")
    assert not (tmp_path / "missing").exists()
    # the other way: a file in an existing directory is written
    assert export_main(["--format", "csv", str(SAMPLE), "-o", str(tmp_path / "out.csv")]) == 0
    assert (tmp_path / "out.csv").read_text().startswith("cell_id") or (
        tmp_path / "out.csv"
    ).stat().st_size > 0


def _run(root: Path, host: str, run_id: str) -> Path:
    rng = random.Random(host)
    env = make_env(run_id, "2026-11-01T02:00:00Z", hostname=host)
    recs = [make_record(run_id, cell("onnxruntime"), samples_ms=noisy_samples(rng, 2.0, 30, Noise()))]
    return write_run(root / host, env, recs)


def test_merge_replace_onto_a_symlink_is_refused_and_the_link_kept(tmp_path, capsys, caplog):
    """Was: `merge A B -o LINK --replace` replaced the link with a directory, named the run after the link's target
    and left `.LINK.old-*` behind."""
    a, b = _run(tmp_path / "a", "box-a", "r1"), _run(tmp_path / "b", "box-b", "r1")
    target = _run(tmp_path / "t", "box-t", "precious")
    link = tmp_path / "link"
    link.symlink_to(target)
    before = sorted(p.name for p in tmp_path.iterdir())
    status = _exit_status(
        lambda: main_merge([str(a), str(b), "-o", str(link), "--replace", "--db", str(tmp_path / "h.sqlite")])
    )
    assert status == 2
    assert "symbolic link" in _one_error(capsys, "-o")
    assert link.is_symlink() and sorted(p.name for p in tmp_path.iterdir()) == before
    # the other way: the directory itself is replaced
    out = tmp_path / "merged"
    assert main_merge([str(a), str(b), "-o", str(out), "--db", str(tmp_path / "h.sqlite")]) == 0


def test_compare_outputs_are_checked_before_the_database_is_touched(tmp_path, capsys):
    db = tmp_path / "h.sqlite"
    for flag in ("--markdown", "--json", "--report-json"):
        bad = str(tmp_path / "no" / "such" / "file")
        assert _exit_status(lambda f=flag, p=bad: main_compare([str(SAMPLE), f, p, "--db", str(db)])) == 2
        _one_error(capsys, flag)
    assert not db.exists()


def _file(d: Path, *below: str) -> Path:
    (d / "f").write_text("x")
    return Path(d, "f", *below)


def _link(d: Path, to: str | None) -> Path:
    os.symlink(d / to if to else d, d / "l")
    return d / "l"


@pytest.mark.parametrize(
    ("make", "kind", "why"),
    [
        (lambda d: d, "file", "not a regular file"),
        (lambda d: d / "missing" / "x", "file", "does not exist"),
        (lambda d: _file(d), "dir", "not a directory"),
        (lambda d: _file(d, "x"), "dir", "not a directory"),
        (lambda d: _file(d, "x"), "file", "not a directory"),
        (lambda d: _link(d, None), "dir", "symbolic link"),
        (lambda d: _link(d, "nowhere"), "file", "symbolic link"),
        (lambda d: Path(str(d) + "/a\0b"), "file", "NUL"),
        (lambda d: Path(".."), "dir", "names no file or directory"),
    ],
)
def test_output_path_checks(tmp_path, make, kind, why):
    path = make(tmp_path)
    check = output_file if kind == "file" else output_dir
    with pytest.raises(OutputPathError, match=why):
        check(str(path), "-o")
    # the other way: a new name in the same directory, and a directory created with its parents
    assert output_file(str(tmp_path / "new.csv")) == tmp_path / "new.csv"
    assert output_dir(str(tmp_path / "a" / "b")) == tmp_path / "a" / "b"


@pytest.mark.skipif(
    os.geteuid() == 0, reason="root writes into any directory: no unwritable directory to probe"
)
def test_an_unwritable_output_directory_is_refused(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o555)
    with pytest.raises(OutputPathError, match="not writable"):
        output_file(str(ro / "x.csv"))


# ---- what the fuzz test found (tests/test_fuzz_options.py), kept as cases ---------------------------------------


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("shapes", "inf", "--shapes: shape 'inf'"),  # named no option
        (
            "shapes",
            "9" * 5000,
            "--shapes: shape '999",
        ),  # int()'s ValueError: "Exceeds the limit (4300 digits)"
        ("batches", "9" * 5000, "--batches: '999"),
        ("batches", "\u00b2", "--batches: '\u00b2' is not a positive integer"),  # isdigit() but not int()
    ],
)
def test_shapes_and_batches_text_is_one_line_naming_the_option(name, value, message):
    given = {name: value, "force_shapes": True}
    with pytest.raises(SelectionError) as e:
        options.selection(lambda key: given.get(key), ("onnxruntime",), ("cpu",))
    assert str(e.value).startswith(message) and "\n" not in str(e.value)
    # the other way: a valid list passes
    ok = options.selection(
        lambda key: {name: "640,32" if name == "shapes" else "1,8"}.get(key), ("onnxruntime",), ("cpu",)
    )
    assert ok is not None


def test_an_over_long_output_name_is_one_line(tmp_path, capsys):
    """Was: an OSError (File name too long) traceback from the link check."""
    out = tmp_path / ("x" * 300)
    with pytest.raises(OutputPathError, match="cannot be checked"):
        output_file(str(out))
    assert _exit_status(lambda: export_main(["--format", "csv", str(SAMPLE), "-o", str(out)])) == 2
    _one_error(capsys, "-o")


def test_a_fifo_as_history_or_database_is_refused_before_it_is_read(tmp_path, capsys):
    """Was: `report --history FIFO` blocked on the read until a writer came."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OutputPathError, match="not a regular file"):
        input_file(str(fifo), "--history")
    assert report_parser().parse([str(SAMPLE), "--history", str(fifo)]) == 2
    _one_error(capsys, "--history")
    with pytest.raises(OutputPathError, match="not a regular file"):
        database_file(str(fifo))
    # the other way: a regular file is taken (what it holds is the reader's business)
    (tmp_path / "h.json").write_text("{}")
    assert input_file(str(tmp_path / "h.json"), "--history") == tmp_path / "h.json"


def test_report_checks_every_option_before_it_reads_the_history(tmp_path, capsys):
    """Found by the fuzz test (seed 20261126): a bad --accuracy-floor with an unreadable --history file ended in
    the history's error, which named the file but no option."""
    bad = tmp_path / "h.json"
    bad.write_text("not json")
    assert report_main([str(tmp_path / "none"), "--accuracy-floor", "inf", "--history", str(bad)]) == 2
    assert "--accuracy-floor" in _one_error(capsys, "--accuracy-floor")
    assert (
        report_main([str(tmp_path / "none"), "--history", str(bad)]) == 2
    )  # the other way: the history named
    assert "--history" in _one_error(capsys, "--history")


def test_a_control_character_in_a_path_stays_on_the_error_line(tmp_path, capsys):
    """Found by the fuzz test (seed 20261126): `-o $'\\x1e/0'` printed the directory raw, and a record separator
    is a line break to `splitlines`."""
    assert _exit_status(lambda: export_main([str(tmp_path / "none"), "-o", "\x1e/0"])) == 2
    err = _one_error(capsys, "-o")
    assert len(err.splitlines()) == 1 and "\\x1e" in err


@pytest.mark.parametrize("flag", ["--camera-fps", "--min-shape", "-o"])
def test_an_option_given_dashes_as_its_value_is_refused(tmp_path, capsys, flag):
    """Found by the fuzz test (seed 20261127): `--camera-fps=--` was taken as the default (argparse drops a `--`
    value before Python 3.12)."""
    assert report_main([str(tmp_path / "none"), f"{flag}=--"]) == 2
    assert "not '--'" in _one_error(capsys, flag)
    # the other way: a real value passes the parser
    assert report_parser().parse([str(SAMPLE), f"{flag}=64" if flag != "-o" else f"{flag}={tmp_path}/r"]) != 2


# ---- issue 40: --time-budget has a range too -----------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "9" * 400,  # was: float('9' * 400) = inf seconds, then `INTERNALERROR> OverflowError` in the plan
        "9" * 400 + "h",
        "1" + "0" * 300,  # finite, but 3e292 years
        "721h",  # one hour past 30 days
        "31d",
        "29d24h1s",
        "9" * 5000,  # too long to be a duration, never echoed whole
    ],
)
def test_a_huge_time_budget_is_one_line_naming_the_option(text):
    from harness.plan.budget import parse_budget

    with pytest.raises(SelectionError) as e:
        parse_budget(text)
    message = str(e.value)
    assert message.startswith("--time-budget: ") and "\n" not in message and len(message) < 200, message
    assert "out of range (must be > 0 and <= 30 d" in message or "too long" in message


def test_the_time_budgets_limit_itself_is_taken():
    from harness.plan.budget import MAX_BUDGET_S, parse_budget

    assert MAX_BUDGET_S == 30 * 86400
    for text in ("30d", "720h", "43200m", "2592000", "29d23h59m60s"):
        assert parse_budget(text) == MAX_BUDGET_S, text
    assert parse_budget("0.5s") == 0.5


@pytest.mark.process
def test_the_suite_refuses_a_huge_time_budget_in_one_error_line(tmp_path):
    """The whole suite, collecting only: pytest's usage error (exit status 4) and one `ERROR:` line, where it was
    an INTERNALERROR traceback ending in OverflowError (40 lines)."""
    import subprocess
    import sys

    p = subprocess.run(
        [sys.executable, "-m", "pytest", "suites/", "--benchmark-only", "--profile", "quick", "--collect-only",
         "-q", "-p", "no:randomly", "--results-dir", str(tmp_path / "results"), "--time-budget", "9" * 400],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    errors = [line for line in (p.stdout + p.stderr).splitlines() if line.startswith("ERROR:")]
    assert p.returncode == 4 and "INTERNALERROR" not in p.stdout + p.stderr, (
        p.stdout[-2000:] + p.stderr[-2000:]
    )
    assert len(errors) == 1 and "--time-budget: '99999" in errors[0] and "out of range" in errors[0], errors
