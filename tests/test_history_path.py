"""One history database per results directory: the suite's end-of-run import and `python -m harness
import|compare --results-dir DIR` resolve the same file (harness.history.store.default_db_path)."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.__main__ import main as harness_main
from harness.history.store import DB_ENV_VAR, default_db_path
from harness.pytest_plugin.finish import _history_db, _render_report

V1_RUN = Path(__file__).parent / "data" / "v1_run"
RUN_ID = "20261122-cpu-default"


class Terminal:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def write_line(self, line: str) -> None:
        self.lines.append(line)


def _session(results_dir: Path) -> SimpleNamespace:
    """The parts of a BenchSession that the end of the run reads; the run directory holds a finished run."""
    run_dir = results_dir / RUN_ID
    shutil.copytree(V1_RUN, run_dir)
    options = {"no_history": False, "no_report": True}
    return SimpleNamespace(
        results_dir=results_dir,
        run_id=RUN_ID,
        run_config=SimpleNamespace(run_dir=run_dir),
        config=SimpleNamespace(getoption=options.__getitem__),
    )


@pytest.fixture
def no_env(monkeypatch, tmp_path):
    monkeypatch.delenv(DB_ENV_VAR, raising=False)
    monkeypatch.chdir(
        tmp_path
    )  # so that a stray default (results/history.sqlite) would land here, not in the repo


def test_the_resolver_prefers_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv(DB_ENV_VAR, raising=False)
    monkeypatch.delenv(
        "YOLO26_BENCH_RESULTS_DIR", raising=False
    )  # the session's own default (tests/conftest.py)
    assert default_db_path() == Path("results/history.sqlite")
    assert default_db_path(tmp_path / "x") == tmp_path / "x" / "history.sqlite"
    monkeypatch.setenv(DB_ENV_VAR, str(tmp_path / "elsewhere.sqlite"))
    assert default_db_path(tmp_path / "x") == tmp_path / "elsewhere.sqlite"


def test_compare_with_results_dir_finds_the_run_the_suite_imported(no_env, tmp_path, capsys):
    results = tmp_path / "X"
    session = _session(results)
    tr = Terminal()
    _render_report(session, tr)  # what pytest_terminal_summary runs at the end of a suite
    assert _history_db(session) == results / "history.sqlite"
    assert tr.lines == [f"history: imported into {results / 'history.sqlite'}"]
    assert (results / "history.sqlite").is_file()

    assert harness_main(["compare", RUN_ID, "--results-dir", str(results)]) == 0
    out = capsys.readouterr().out
    assert RUN_ID in out
    # Without --results-dir the default is results/history.sqlite, which the suite never wrote to.
    assert harness_main(["compare", RUN_ID]) == 2
    assert not Path("results/history.sqlite").exists()


def test_import_with_results_dir_writes_the_suite_database(no_env, tmp_path):
    results = tmp_path / "X"
    _session(results)
    assert harness_main(["import", str(results / RUN_ID), "--results-dir", str(results)]) == 0
    assert (results / "history.sqlite").is_file()
    assert harness_main(["compare", RUN_ID, "--results-dir", str(results)]) == 0


def test_the_environment_variable_moves_both_sides(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "shared.sqlite"
    monkeypatch.setenv(DB_ENV_VAR, str(db))
    results = tmp_path / "X"
    _render_report(_session(results), Terminal())
    assert db.is_file() and not (results / "history.sqlite").exists()
    assert harness_main(["compare", RUN_ID, "--results-dir", str(results)]) == 0


def test_usage_lists_only_commands_that_exist(capsys):
    assert harness_main(["--help"]) == 0
    text = capsys.readouterr().out
    assert "cells" not in text
    for cmd in ("report", "import", "compare", "merge"):
        assert f"  {cmd} " in text
