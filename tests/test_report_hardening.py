"""Report and history hardening: log links only inside the run directory, long text cut in the HTML, NaN and
infinity refused when a record is written and when a run is imported, merge validating every run before it writes,
and reports that follow --results-dir."""

from __future__ import annotations

import dataclasses
import json
import logging
import random
import shutil
import sqlite3
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from harness.core.record import CellRecord, check_finite, non_finite
from harness.core.record_codec import record_to_dict, record_to_json
from harness.core.results_dir import RecordWriter, read_records
from harness.history.cli import main_import, main_merge
from harness.history.store import import_run_dir
from harness.history.synthetic import Noise, cell, make_env, make_record, noisy_samples, write_run
from harness.pytest_plugin import options
from harness.pytest_plugin.finish import _render_report
from harness.report import render_report
from harness.report.render import TEXT_LIMIT

CPU_RUN = Path(__file__).parent / "data" / "report" / "cpu_run"
NOTE = "more characters: the full text is in the cell log"


class Links(HTMLParser):
    """Every <a class="log"> href of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "a" and "log" in (a.get("class") or "").split():
            self.hrefs.append(a["href"])


def log_links(index: Path) -> list[Path]:
    p = Links()
    p.feed(index.read_text(encoding="utf-8"))
    return [(index.parent / h).resolve() for h in p.hrefs]


def copy_run(tmp_path: Path, edit) -> Path:
    """CPU_RUN copied to tmp_path/results/run with every record passed through edit(index, rec)."""
    run = tmp_path / "results" / "run"
    shutil.copytree(CPU_RUN, run)
    recs = [edit(i, r) for i, r in enumerate(read_records(run))]
    (run / "cells.jsonl").write_text("".join(record_to_json(r) + "\n" for r in recs))
    return run


# -- links ---------------------------------------------------------------------------------------------------
def test_log_links_never_leave_the_run_directory(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the report")
    with_log = [r.cell_id for r in read_records(CPU_RUN) if r.log]
    hostile = {
        with_log[0]: "../../../../etc/passwd",  # the probe's value: a real file, outside
        with_log[1]: "../../secret.txt",  # tmp_path/secret.txt, relative to the run dir
        with_log[2]: str(secret),  # an absolute path
        with_log[3]: "logs/link.log",  # a symbolic link inside the run dir pointing outside it
    }

    def edit(_, rec: CellRecord) -> CellRecord:
        if rec.cell_id in hostile:
            rec.log = hostile[rec.cell_id]
        return rec

    run = copy_run(tmp_path, edit)
    (run / "logs" / "link.log").symlink_to(secret)
    links = log_links(render_report([run], tmp_path / "reports"))
    root = run.resolve()
    assert links and all(p.is_relative_to(root) and p.is_file() for p in links), links
    assert secret.resolve() not in links and Path("/etc/passwd") not in links
    # The other way: every record whose log is a real file inside the run dir is still linked.
    legit = {
        (run / r.log).resolve()
        for r in read_records(run)
        if r.log and r.cell_id not in hostile and (run / r.log).is_file()
    }
    assert legit and legit <= set(links)


# -- long text -----------------------------------------------------------------------------------------------
def test_long_text_is_cut_in_the_html_with_a_note(tmp_path):
    base = render_report([CPU_RUN], tmp_path / "base")
    huge, fits = "R" * 300_000, "F" * (TEXT_LIMIT - 100)
    recs = read_records(CPU_RUN)
    failed = next(r.cell_id for r in recs if r.failure)
    long_skip, short_skip = [r.cell_id for r in recs if r.status == "skipped"][:2]

    def edit(_, rec: CellRecord) -> CellRecord:
        if rec.cell_id == long_skip:  # a skip reason is shown whole in its matrix entry's title
            rec.reason = huge
        if rec.cell_id == short_skip:
            rec.reason = fits
        if rec.cell_id == failed:
            rec.reason = huge
            rec.failure["message"] = "M" * 300_000
        return rec

    html = render_report([copy_run(tmp_path, edit)], tmp_path / "reports").read_text(encoding="utf-8")
    assert "R" * TEXT_LIMIT in html and "R" * (TEXT_LIMIT + 1) not in html and NOTE in html
    assert "M" * 3000 in html and "M" * 3001 not in html  # the failure section's own cut (tables.clip)
    assert len(html) < len(base.read_text(encoding="utf-8")) + 100_000  # not 300 kB per place it appears
    assert fits in html  # the other way: text under the limit is shown whole


# -- non-finite figures at write time ------------------------------------------------------------------------
def ok_record(run_id: str = "r") -> CellRecord:
    return make_record(run_id, cell("onnxruntime", "n", "cpu"), samples_ms=[2.0, 2.1, 2.2, 2.3])


def test_nan_and_infinity_are_refused_when_a_record_is_written(tmp_path):
    clean, bad = ok_record(), ok_record()
    bad.cell_id += "-bad"
    bad.latency_ms = dataclasses.replace(bad.latency_ms, p50=float("nan"))
    bad.samples_ms[2] = float("inf")
    bad.throughput_ips = np.float32("nan")  # numpy scalars too (json would write them as the string "nan")
    writer = RecordWriter(tmp_path)
    writer.write(clean)
    writer.write(bad)
    ok, failed = read_records(tmp_path)
    assert (
        ok.status == "ok" and ok.latency_ms.p50 == pytest.approx(2.15) and not non_finite(record_to_dict(ok))
    )  # the other way
    assert failed.status == "run_failed" and failed.failure["class"] == "numerical_mismatch"
    for field in ("latency_ms.p50", "samples_ms", "throughput_ips"):
        assert field in failed.reason and "not finite" in failed.null_reasons[field]
    assert (
        failed.latency_ms.p50 is None and failed.samples_ms is None and not non_finite(record_to_dict(failed))
    )


def test_an_already_failed_cell_keeps_its_status_and_is_written(tmp_path):
    rec = ok_record()
    rec.status, rec.reason = "parity_failed", "output 0 shape (1, 300, 6) vs reference (1, 84, 8400)"
    rec.parity = {"max_abs": float("inf"), "rel_l2": float("inf"), "tolerance": 1e-3, "ok": False}
    assert check_finite(record_to_dict(rec)) == ["parity.max_abs", "parity.rel_l2"]
    RecordWriter(tmp_path).write(rec)  # json.dumps(allow_nan=False) used to raise here, losing the record
    (back,) = read_records(tmp_path)
    assert back.status == "parity_failed" and back.reason.startswith("output 0 shape")
    assert back.parity["max_abs"] is None and "not finite" in back.null_reasons["parity.rel_l2"]


# -- non-finite figures at import, and merge -----------------------------------------------------------------
def history_run(root: Path, host: str, i: int) -> Path:
    rng = random.Random(i)
    run_id = f"run-{i:03d}"
    env = make_env(run_id, f"2026-11-{i:02d}T02:00:00Z", hostname=host)
    c = [cell("onnxruntime", "n"), cell("torch", "s")]
    recs = [make_record(run_id, x, samples_ms=noisy_samples(rng, 2.0, 20, Noise())) for x in c]
    return write_run(root / host, env, recs)


def poison(run_dir: Path) -> str:
    """Put a NaN p50 into the second record, as an older harness or a hand edit could; returns its cell id."""
    lines = (run_dir / "cells.jsonl").read_text().splitlines()
    rec = json.loads(lines[1])
    rec["latency_ms"]["p50"] = float("nan")
    lines[1] = json.dumps(rec)  # writes the NaN literal json.loads accepts
    (run_dir / "cells.jsonl").write_text("\n".join(lines) + "\n")
    return rec["cell_id"]


def dump(db: Path) -> list[str]:
    conn = sqlite3.connect(db)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def test_import_refuses_a_run_holding_nan_with_one_error(tmp_path, caplog):
    db = tmp_path / "h.sqlite"
    bad = history_run(tmp_path, "box", 1)
    cell_id = poison(bad)
    with caplog.at_level(logging.ERROR):
        assert main_import([str(bad), "--db", str(db)]) == 2
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and cell_id in errors[0] and "latency_ms.p50 = nan" in errors[0], errors
    assert not db.exists()
    assert main_import([str(history_run(tmp_path, "box", 2)), "--db", str(db)]) == 0  # the other way


def test_merge_with_a_nan_run_leaves_the_database_and_output_unchanged(tmp_path):
    db = tmp_path / "h.sqlite"
    import_run_dir(db, history_run(tmp_path / "old", "a-box", 1))
    before = dump(db)
    good, bad = history_run(tmp_path, "a-box", 2), history_run(tmp_path, "b-box", 2)
    poison(bad)
    out = tmp_path / "merged"
    assert main_merge([str(good), str(bad), "-o", str(out), "--db", str(db)]) == 2
    assert dump(db) == before and not out.exists()
    assert main_merge([str(good), "-o", str(out), "--db", str(db)]) == 0  # the other way
    assert dump(db) != before and (out / "cells.jsonl").is_file()


def test_merge_into_an_unwritable_output_writes_nothing(tmp_path):
    db = tmp_path / "h.sqlite"
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    good = history_run(tmp_path, "a-box", 1)
    assert main_merge([str(good), "-o", str(blocker / "merged"), "--db", str(db)]) == 2
    assert not db.exists()


# -- reports follow --results-dir ----------------------------------------------------------------------------
def getter(**values):
    values.setdefault("reports_dir", None)
    return values.__getitem__


@pytest.mark.parametrize(
    ("results_dir", "reports_dir", "expected"),
    [
        ("results", None, "reports"),  # the README's main command: reports/latest/index.html
        ("elsewhere/res", None, "elsewhere/res/reports"),
        ("elsewhere/res", "out/rep", "out/rep"),
    ],
)
def test_the_reports_dir_rule(results_dir, reports_dir, expected):
    opt = getter(results_dir=results_dir, reports_dir=reports_dir)
    assert options.reports_dir(opt, Path(results_dir)) == Path(expected)


def test_the_suite_renders_its_report_under_its_results_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a report written to ./reports would land here
    results = tmp_path / "res"
    run_dir = results / "run"
    shutil.copytree(CPU_RUN, run_dir)
    opts = {"no_history": True, "no_report": False}
    session = SimpleNamespace(
        results_dir=results,
        reports_dir=options.reports_dir(getter(results_dir=str(results)), results),
        run_id="run",
        run_config=SimpleNamespace(run_dir=run_dir),
        config=SimpleNamespace(getoption=opts.__getitem__),
    )
    lines = []
    _render_report(session, SimpleNamespace(write_line=lines.append))
    assert (results / "reports" / "latest" / "index.html").is_file(), lines
    assert not (tmp_path / "reports").exists()
    # the run's decision options reach its report (decision.json says the frame rate it decided for)
    decided = json.loads((results / "reports" / "latest" / "decision.json").read_text())
    assert {e["constraints"]["camera_fps"] for e in decided["decisions"]} == {30.0}
    session.report_constraints = options.report_constraints(
        {"accuracy_floor": ["int8=0.97"], "memory_cap": None, "camera_fps": 60.0, "server_bound_ms": 50.0,
         "min_shape": 320, "headroom": 0.8}.__getitem__
    )  # fmt: skip
    _render_report(session, SimpleNamespace(write_line=lines.append))
    decided = json.loads((results / "reports" / "latest" / "decision.json").read_text())
    camera = next(e for e in decided["decisions"] if e["use_case"] == "camera")
    assert camera["constraints"]["camera_fps"] == 60.0 and camera["constraints"]["min_shape"] == 320
    assert camera["constraints"]["accuracy_floors"]["int8"] == 0.97
    assert "(--headroom 0.8)" in camera["constraints"]["in_words"]
