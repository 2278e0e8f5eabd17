"""The `yolo26-bench` console command, run as a real process through the launcher pip writes for
[project.scripts] (nothing installed: the launcher is generated here from pyproject.toml's entry)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from harness import cli

REPO = Path(__file__).resolve().parent.parent
SAMPLE = (
    REPO / "results" / "samples" / "2026-11-22-cpu-regression" / "20261122-quick-base2"
)  # a quick-profile run

# What pip writes into the environment's bin/ for a console script `name = "module:func"`.
LAUNCHER = """#!{python}
# -*- coding: utf-8 -*-
import re
import sys
from {module} import {func}
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit({func}())
"""


@pytest.fixture(scope="module")
def script(tmp_path_factory) -> Path:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"yolo26-bench": "harness.cli:main"}
    module, func = scripts["yolo26-bench"].split(":")
    path = tmp_path_factory.mktemp("bin") / "yolo26-bench"
    path.write_text(LAUNCHER.format(python=sys.executable, module=module, func=func))
    path.chmod(0o755)
    return path


def run(script: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([str(script), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.process
def test_help_lists_every_command(script, tmp_path):
    p = run(script, "--help", cwd=tmp_path)
    assert p.returncode == 0
    assert p.stdout.startswith("usage: yolo26-bench COMMAND")
    for name in ("run", "report", "import", "compare", "merge", "export"):
        assert f"\n  {name} " in p.stdout


@pytest.mark.parametrize("name", ["report", "import", "compare", "merge", "export", "check", "durations"])
@pytest.mark.process
def test_each_command_has_help(script, tmp_path, name):
    p = run(script, name, "--help", cwd=tmp_path)
    # issue 39: report, import, compare and merge once said `usage: python -m harness ...` under the script
    assert p.returncode == 0 and p.stdout.startswith(f"usage: yolo26-bench {name} "), (
        p.stdout[:200] + p.stderr
    )


@pytest.mark.parametrize(
    ("name", "args", "error"),
    [
        ("check", [], "the following arguments are required: RUN_DIR"),
        ("durations", ["--profile", "quick"], "the following arguments are required: -o/--output"),
    ],
)
@pytest.mark.process
def test_check_and_durations_usage_errors_are_one_line_under_either_name(script, tmp_path, name, args, error):
    """Issue 40: `check` and `durations` printed argparse's usage block (2 and 4 lines) and said `yolo26-bench`
    when run as `python -m harness`."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    as_module = subprocess.run(
        [sys.executable, "-m", "harness", name, *args], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    as_script = run(script, name, *args, cwd=tmp_path)
    for p, prog in ((as_script, "yolo26-bench"), (as_module, "python -m harness")):
        assert p.returncode == 2 and p.stdout == "", p.stderr
        assert p.stderr.splitlines() == [f"{prog} {name}: error: {error}"], p.stderr


@pytest.mark.process
def test_run_help_shows_the_plugins_options(script, tmp_path):
    p = run(script, "run", "--help", cwd=tmp_path)
    assert p.returncode == 0
    assert "pytest suites/ --benchmark-only" in p.stdout
    assert "--profile" in p.stdout and "--cache-dir" in p.stdout  # cut from the plugin's own `pytest --help`


@pytest.mark.process
def test_unknown_command_is_status_2(script, tmp_path):
    p = run(script, "frobnicate", cwd=tmp_path)
    assert p.returncode == 2 and "unknown command 'frobnicate'" in p.stderr


@pytest.mark.process
@pytest.mark.parametrize(("typed", "meant"), [("reprot", "report"), ("mrege", "merge"), ("exprot", "export")])
def test_unknown_command_is_one_line_with_the_nearest_name(script, tmp_path, typed, meant):
    """Issue 39: `yolo26-bench bogus` printed 12 lines (the whole usage)."""
    p = run(script, typed, cwd=tmp_path)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and f"did you mean {meant!r}" in p.stderr, p.stderr


@pytest.mark.process
@pytest.mark.parametrize(
    "args", [["--help"], ["report", "--help"], ["export", "--format", "csv", str(SAMPLE)]]
)
def test_a_closed_stdout_ends_quietly(script, tmp_path, args):
    """Issue 39: `yolo26-bench --help | head -1` printed a BrokenPipeError traceback (once in six tries: when head
    had exited before the write). Here the reader is gone before the command starts, every time."""
    read, write = os.pipe()
    os.close(read)
    try:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        p = subprocess.run(
            [str(script), *args],
            cwd=tmp_path,
            env=env,
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
        )
    finally:
        os.close(write)
    assert p.stderr == "", p.stderr
    # 141: what a shell reports for a writer ended by SIGPIPE; argparse's --help swallows the write error itself
    assert p.returncode in (0, 141) if "--help" in args else p.returncode == 141


#: a run whose records break a relation (check's exit 1 when its output is written)
BROKEN = REPO / "results" / "samples" / "2026-11-25-h100" / "run"


@pytest.mark.process
@pytest.mark.parametrize(
    ("args", "prog", "status_when_written"),
    [
        (["export", "--format", "csv", str(SAMPLE)], "yolo26-bench export", 0),
        (["export", "--format", "bencher", str(SAMPLE)], "yolo26-bench export", 0),
        (["check", str(BROKEN)], "yolo26-bench check", 1),
        (["--help"], "yolo26-bench", 0),
        (["report", "--help"], "yolo26-bench report", 0),
        (["-m", "--help"], "python -m harness", 0),
    ],
)
def test_a_full_disk_under_stdout_is_one_line_and_status_2(script, tmp_path, args, prog, status_when_written):
    """Issue 66: `export ... > /dev/full` (a full disk under `> out.csv`) ended in a 21-line OSError traceback with
    status 1 (check's "a relation broke"), and `report --help > /dev/full` in status 0 with the help lost."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "harness", *args[1:]] if args[0] == "-m" else [str(script), *args]
    written = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert written.returncode == status_when_written and written.stdout, written.stderr
    with open("/dev/full", "w") as full:
        p = subprocess.run(command, cwd=tmp_path, env=env, stdout=full, stderr=subprocess.PIPE, text=True)
    assert p.returncode == 2, p.stderr
    assert p.stderr.splitlines() == [
        f"{prog}: error: cannot write to standard output: No space left on device"
    ]


@pytest.mark.process
def test_console_command_reports_and_exports_a_run(script, tmp_path):
    p = run(script, "report", str(SAMPLE), "-o", str(tmp_path / "reports"), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    index = Path(p.stdout.strip().splitlines()[-1])
    assert index == tmp_path / "reports" / SAMPLE.name / "index.html" and index.is_file()
    p = run(script, "export", "--format", "bencher", str(SAMPLE), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert "yolo26n-detect-e2e-onnxruntime-cpu-320x320-b1-fp32" in doc


@pytest.mark.process
def test_module_and_script_share_one_entry_point(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    p = subprocess.run(
        [sys.executable, "-m", "harness", "--help"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert p.returncode == 0 and p.stdout.startswith("usage: python -m harness COMMAND")
    assert p.stdout.replace("python -m harness", "yolo26-bench") == cli.usage("yolo26-bench") + "\n"


def test_run_passes_options_through_to_the_readmes_main_job():
    cmd = cli.pytest_command(["--profile", "quick", "-k", "onnxruntime"])
    assert cmd[1:] == [
        "-m",
        "pytest",
        "suites/",
        "--benchmark-only",
        "--profile",
        "quick",
        "-k",
        "onnxruntime",
    ]
    assert cli.repository(REPO) == REPO


def test_run_outside_a_checkout_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(cli, "__file__", str(tmp_path / "site-packages" / "harness" / "cli.py"))
    assert cli.repository(tmp_path) is None
    monkeypatch.chdir(tmp_path)
    assert cli.main_run(["--profile", "quick"]) == 2


@pytest.mark.slow
@pytest.mark.export
def test_console_run_prints_estimates_and_the_report_path(script, tmp_path, cache_dir):
    """`yolo26-bench run` is the README's main job: a real one-cell run, twice. The first prices from the plan and
    the export cache, the second from the stage times the first recorded; each ends with the report's path."""
    results = tmp_path / "results"
    options = ["--profile", "quick", "--backends", "onnxruntime", "--devices", "cpu", "--no-accuracy"]
    options += ["--scenarios", "none", "--no-e2e", "--rounds", "10", "--no-history", "-p", "no:randomly"]
    options += ["--cache-dir", str(cache_dir), "--results-dir", str(results)]
    outs = []
    for run_id in ("first", "second"):
        p = run(script, "run", *options, "--run-id", run_id, cwd=REPO)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
        outs.append(p.stdout)
        last = p.stdout.strip().splitlines()[-1]
        report = results / "reports" / run_id / "index.html"
        assert (
            last.startswith("yolo26-bench: took ") and last.endswith(f"report: {report}") and report.is_file()
        )
        assert (results / run_id / "timeline.json").is_file()
    assert (
        "estimate: about " in outs[0]
        and "recorded by run(s)" not in outs[0].split("estimate: about ")[1][:300]
    )
    start = next(line for line in outs[1].splitlines() if "estimate: about " in line)
    assert "recorded by run(s) first" in start
    assert "left after yolo26n-detect-e2e-cpu-320x320-b1 (1 of 1 workload(s) done" in outs[1]
