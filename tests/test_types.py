"""The type checker (mypy, configured in pyproject.toml) passes on the whole of harness/, where every record is a
CellRecord read and written by attribute, and catches a misspelt field, a record read like a dict, and a misspelt
section key."""

from __future__ import annotations

from pathlib import Path

import pytest

api = pytest.importorskip("mypy.api", reason="mypy is in the test extra: pip install -e .[test]")

ROOT = Path(__file__).resolve().parents[1]
#: what it checks: every module of the harness
CHECKED = ["harness"]


def _mypy(*targets: str, cache: Path) -> tuple[str, int]:
    out, err, status = api.run(
        ["--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(cache), *targets]
    )
    return out + err, status


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("mypy-cache")


def test_the_checked_modules_type_check(cache, monkeypatch):
    monkeypatch.chdir(ROOT)
    report, status = _mypy(*CHECKED, cache=cache)
    assert status == 0, report
    assert "Success: no issues found" in report


def test_a_misspelt_record_field_is_a_type_error(cache, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    good = tmp_path / "reads_records.py"
    good.write_text(
        "from harness.core.record import CellRecord\n\n\n"
        "def p50(rec: CellRecord) -> float | None:\n"
        "    return rec.latency_ms.p50 if rec.latency_ms else None\n"
    )
    report, status = _mypy(str(good), cache=cache)
    assert status == 0, report
    bad = tmp_path / "misspells.py"
    bad.write_text(
        "from harness.core.record import CellRecord\n\n\n"
        "def p50(rec: CellRecord) -> float | None:\n"
        "    return rec.laytency_ms.p50 if rec.latency_ms else None\n"
    )
    report, status = _mypy(str(bad), cache=cache)
    assert status == 1
    assert 'misspells.py:5: error: "CellRecord" has no attribute "laytency_ms"' in report
    indexed = tmp_path / "indexes.py"
    indexed.write_text(
        "from harness.core.record import CellRecord\n\n\n"
        "def status(rec: CellRecord) -> str:\n"
        '    return rec["status"]\n'
    )
    report, status = _mypy(str(indexed), cache=cache)
    assert status == 1
    assert 'indexes.py:5: error: Value of type "CellRecord" is not indexable' in report
    section = tmp_path / "misspells_section.py"
    section.write_text(
        "from harness.core.record import CellRecord\n\n\n"
        "def p50(rec: CellRecord) -> float | None:\n"
        "    return rec.latency_ms.p5O if rec.latency_ms else None\n"
    )
    report, status = _mypy(str(section), cache=cache)
    assert status == 1
    assert '"Latency" has no attribute "p5O"' in report
