"""`python -m harness report ...` through `harness.report.cli.main`."""

from __future__ import annotations

import json
from pathlib import Path

from harness.report.cli import main

DATA = Path(__file__).parent / "data" / "report"


def test_cli_renders_runs_and_history(tmp_path, capsys):
    history = tmp_path / "history.json"
    history.write_text(json.dumps({"trends": {}, "regressions": []}))
    rc = main(
        [str(DATA / "cpu_run"), str(DATA / "gpu_run"), "-o", str(tmp_path / "out"), "--history", str(history)]
    )
    assert rc == 0
    index = Path(capsys.readouterr().out.strip())
    assert index == tmp_path / "out" / "20261120T101500Z-cpu+20261120T113000Z-h100" / "index.html"
    assert index.is_file() and (tmp_path / "out" / "latest" / "index.html").is_file()
    assert 'id="regressions"' in index.read_text()


def test_cli_reports_a_bad_results_dir_with_status_2(tmp_path, capsys):
    assert main([str(tmp_path / "missing"), "-o", str(tmp_path / "out")]) == 2
    assert "no cells.jsonl" in capsys.readouterr().err
    bad = tmp_path / "history.json"
    bad.write_text("{not json")
    assert main([str(DATA / "cpu_run"), "-o", str(tmp_path / "out"), "--history", str(bad)]) == 2
    assert not (tmp_path / "out").exists()


def test_cli_accepts_a_parent_of_run_dirs(tmp_path, capsys):
    assert main([str(DATA), "-o", str(tmp_path / "out"), "-q"]) == 0
    assert capsys.readouterr().out == ""
    assert (tmp_path / "out" / "20261120T101500Z-cpu+20261120T113000Z-h100" / "index.html").is_file()
