"""The report's machine header shows the run's CPU thread budget and what the runtimes reported they used."""

from __future__ import annotations

import html

from harness.report import render_report
from tests.conftest import REPO


def _page(tmp_path, run_dir) -> str:
    return html.unescape(render_report([run_dir], tmp_path).read_text())


def test_v2_run_header_shows_the_budget_and_the_reported_threads(tmp_path):
    page = _page(tmp_path, REPO / "results" / "samples" / "2026-11-22-cpu-2core-v2")
    assert "CPU threads" in page
    assert "budget 2 (physical cores (default)); runtimes report 2" in page


def test_v1_run_header_says_the_budget_was_not_recorded(tmp_path):
    page = _page(tmp_path, REPO / "tests" / "data" / "v1_run")
    assert "CPU threads" in page
    assert "budget 2" not in page and "not recorded" in page
