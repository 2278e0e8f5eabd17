"""One rule for a record that does not fit the schema, in report, check, export and import: the line is named (file,
line, field, value), skipped, counted (the report's notes, check's findings, export's and import's last line) and
the rest is used; a run whose every line is bad is refused in one line. And `check` names a cell recorded twice.

Each case edits a copy of a committed run (results/samples/2026-11-28-cpu-2core-default-v2, copied into tmp_path).
Before: a size of "zz" failed the report with `tuple.index(x): x not in tuple` (harness.decide.ladder) naming no file,
a status of "splendid" was accepted (a matrix badge, a claim's "disagrees"), a p50 of "fast" refused the whole run,
and check said nothing of a cell recorded twice with different figures.
"""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

import pytest

from harness.check.cli import main as check_main
from tests.conftest import REPO
from tests.read_rule_helpers import Ran, call, export, import_, report

SAMPLE = REPO / "results" / "samples" / "2026-11-28-cpu-2core-default-v2"
#: line numbers (1-based) of two ok records of the sample
OPENVINO_640 = 65  # yolo26n-detect-e2e-openvino-cpu-640x640-b1-fp32: on the size ladder
XNNPACK_320 = (
    19  # yolo26n-detect-e2e-executorch-xnnpack-cpu-320x320-b1-fp32: in the claim "XNNPACK is fully working"
)


def _copy(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(SAMPLE, run, ignore=shutil.ignore_patterns("report"))
    return run


def _lines(run: Path) -> list[str]:
    return (run / "cells.jsonl").read_text(encoding="utf-8").splitlines()


def _write(run: Path, lines: list[str]) -> None:
    (run / "cells.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _edited(tmp_path: Path, line: int, path: str, value: object) -> tuple[Path, dict]:
    """The copy with record `line`'s field at the dotted `path` set to `value`; the record as it was."""
    run = _copy(tmp_path)
    lines = _lines(run)
    rec = json.loads(lines[line - 1])
    original = json.loads(lines[line - 1])
    holder = rec
    *parents, last = path.split(".")
    for key in parents:
        holder = holder[key]
    holder[last] = value
    lines[line - 1] = json.dumps(rec)
    _write(run, lines)
    return run, original


def _check(run: Path) -> Ran:
    return call(check_main, [str(run)])


EDITS = [
    pytest.param(OPENVINO_640, "size", "zz", "field size = 'zz' is not one of n, s, m, l, x", id="size-zz"),
    pytest.param(
        XNNPACK_320, "status", "splendid", "field status = 'splendid' is not one of ok,", id="splendid"
    ),
    pytest.param(
        XNNPACK_320, "latency_ms.p50", "fast", "latency_ms.p50: 'fast' is not float (str)", id="p50-fast"
    ),
]


@pytest.mark.parametrize(("line", "path", "value", "said"), EDITS)
def test_a_record_that_does_not_fit_is_named_skipped_and_counted_by_every_command(
    tmp_path, line, path, value, said
):
    run, original = _edited(tmp_path, line, path, value)
    where = f"{run / 'cells.jsonl'}:{line}: record {original['cell_id']}: {said}"
    total = len(_lines(run))
    rep, exp, imp, chk = (
        report(run, tmp_path / "reports"),
        export(run),
        import_(run, tmp_path / "h.sqlite"),
        _check(run),
    )
    assert (rep.status, exp.status, imp.status) == (0, 0, 0), (
        rep.err[-2000:],
        exp.err[-2000:],
        imp.err[-2000:],
    )
    assert chk.status == 1, chk.err[-2000:]  # a finding, not a broken file
    for ran in (rep, exp, imp, chk):
        assert "Traceback" not in ran.err
        named = [ln for ln in ran.error_lines if ln.endswith("line skipped")]
        assert len(named) == 1 and where in named[0], ran.err[-3000:]
    counted = f"1 record line skipped (cells.jsonl:{line}: record {original['cell_id']}: {said}"
    # the report: written from the rest, the skipped line on the run's warning (page and summary.md)
    index = next((tmp_path / "reports").glob("2*/index.html")).read_text(encoding="utf-8")
    warning = re.search(r'<div class="warn" id="integrity-warning-1">.*?</div>', index, re.S)
    assert warning and counted in html.unescape(warning.group(0)), index[:3000]
    summary = next((tmp_path / "reports").glob("2*/summary.md")).read_text(encoding="utf-8")
    assert counted in summary.replace("\\_", "_"), summary[:2000]  # Markdown escapes an underscore
    # export: one row per record it kept, and its count; import: the cells it kept, and its count
    assert len(exp.out.splitlines()) == 1 + total - 1
    assert f"export: {counted}" in exp.err
    assert f"{total - 1} cells" in imp.out and counted in imp.out
    # check: the line is a finding on stdout
    assert f"run: cells.jsonl:{line}: record-skipped: record {original['cell_id']}: {said}" in chk.out, (
        chk.out
    )
    assert "1 record line(s) skipped in" in chk.err


def test_an_unknown_status_is_no_badge_and_no_verdict(tmp_path):
    """Before, 'splendid' became the cell's matrix badge and a 'disagrees' of the claim "XNNPACK is fully working"."""
    run, _ = _edited(tmp_path, XNNPACK_320, "status", "splendid")
    assert report(run, tmp_path / "reports").status == 0
    index = next((tmp_path / "reports").glob("2*/index.html")).read_text(encoding="utf-8")
    claim = re.search(r'<tr data-claim="xnnpack-full".*?</tr>', index, re.S)
    assert claim and "splendid" not in claim.group(0), claim and claim.group(0)
    body = re.sub(r'<div class="warn" id="integrity-warning-1">.*?</div>', "", index, flags=re.S)
    assert "splendid" not in body  # said on the run's warning only


def test_a_run_whose_every_line_is_bad_is_refused_in_one_line(tmp_path):
    run = _copy(tmp_path)
    lines = _lines(run)
    bad = []
    for n, (path, value) in enumerate([("size", "zz"), ("status", "splendid"), ("latency_ms", "fast")]):
        rec = json.loads(lines[XNNPACK_320 - 1 + n])
        rec[path] = value
        bad.append(json.dumps(rec))
    _write(run, bad)
    rep, exp, imp, chk = (
        report(run, tmp_path / "reports"),
        export(run),
        import_(run, tmp_path / "h.sqlite"),
        _check(run),
    )
    for ran in (rep, exp, imp, chk):
        assert ran.status == 2, ran.err[-2000:]
        assert sum(ln.endswith("line skipped") for ln in ran.error_lines) == 3, ran.err[-3000:]
        errors = [ln for ln in ran.error_lines if not ln.endswith("line skipped")]
        assert len(errors) == 1 and "no records (3 lines, 3 of them skipped" in errors[0], ran.err[-3000:]
    assert not (tmp_path / "reports").exists() and not (tmp_path / "h.sqlite").exists()


def test_check_names_a_cell_recorded_twice_with_different_figures(tmp_path):
    run = _copy(tmp_path)
    assert _check(run).status == 0  # the other way: the committed run holds each cell once
    lines = _lines(run)
    again = json.loads(lines[XNNPACK_320 - 1])
    p50 = again["latency_ms"]["p50"]
    again["latency_ms"]["p50"] = p50 * 2
    _write(run, [*lines, json.dumps(again)])
    chk = _check(run)
    assert chk.status == 1, chk.err
    (found,) = [ln for ln in chk.out.splitlines() if "recorded-twice" in ln]
    assert found.startswith(
        f"run: {again['cell_id']}: recorded-twice: 2 records of this cell with different figures"
    )
    assert f"latency_ms.p50 {p50!r} vs {p50 * 2!r}" in found, found
    assert "1 cell(s) recorded twice in" in chk.err
    # recorded twice alike: still named, as identical
    _write(run, [*lines, lines[XNNPACK_320 - 1]])
    assert "2 identical records of this cell" in _check(run).out
