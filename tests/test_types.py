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


@pytest.mark.slow
def test_the_checked_modules_type_check(cache, monkeypatch):
    monkeypatch.chdir(ROOT)
    report, status = _mypy(*CHECKED, cache=cache)
    assert status == 0, report
    assert "Success: no issues found" in report


#: what a reader writes, and the error mypy must give for it (None: it type-checks)
SNIPPETS = {
    "reads_records": ("    return rec.latency_ms.p50 if rec.latency_ms else None\n", None),
    "misspells": (
        "    return rec.laytency_ms.p50 if rec.latency_ms else None\n",
        'misspells.py:5: error: "CellRecord" has no attribute "laytency_ms"',
    ),
    "indexes": (
        '    return rec["latency_ms"]["p50"]\n',
        'indexes.py:5: error: Value of type "CellRecord" is not indexable',
    ),
    "misspells_section": (
        "    return rec.latency_ms.p5O if rec.latency_ms else None\n",
        '"Latency" has no attribute "p5O"',
    ),
}


@pytest.mark.parametrize("name", list(SNIPPETS))
def test_a_misspelt_record_field_is_a_type_error(name, cache, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    body, error = SNIPPETS[name]
    module = tmp_path / f"{name}.py"
    module.write_text(
        "from harness.core.record import CellRecord\n\n\ndef p50(rec: CellRecord) -> float | None:\n" + body
    )
    report, status = _mypy(str(module), cache=cache)
    if error is None:  # the correct reader passes: the checks below fail for the mistake alone
        assert status == 0, report
    else:
        assert status == 1 and error in report, report
