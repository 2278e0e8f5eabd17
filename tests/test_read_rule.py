"""One reading rule for every file a command reads (harness.core.results_dir), paths from a run's files contained,
and text from them escaped on the page and the terminal (the issue's items 3, 5 and 6).

Each named defect has its test here (each failed on the code before the change): a records line of 100,000 nested
lists, a non-UTF-8 byte in one record, a NUL in one record's `log`, a merged run's `machines[].source` pointing
out, NUL and bidirectional overrides reaching index.html and summary.md, a cell id forging a second terminal line,
and a 0-byte cells.jsonl. The fuzzed counterpart is tests/test_fuzz_records.py.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from harness.core import results_dir
from harness.core.record_codec import record_to_json
from harness.core.results_dir import (
    MAX_DEPTH,
    NoRecords,
    RecordWriter,
    RunFileError,
    read_env,
    read_json_file,
    read_records,
)
from harness.core.safe_text import page_text, unsafe_on_page
from harness.history.synthetic import cell, make_record
from harness.report import render as render_mod
from harness.report.cli import main as report_main
from tests.read_rule_helpers import (
    CPU_RUN,
    SMALL,
    call,
    export,
    import_,
    line_of,
    make_run,
    page_files,
    raw_unsafe,
    record_lines,
    report,
    small_records,
)

NASTY = "a\x00b\x1b[31mred\x1b[0m\u202eevil\u2066x\u2069\x85\x7f\r\x0b"


def lines_with(bad: bytes, at: int = 1) -> list[bytes]:
    """The SMALL records with `bad` inserted as line `at + 1`."""
    lines = [record_lines()[i] for i in SMALL]
    return [*lines[:at], bad, *lines[at:]]


def assert_named(ran, run: Path, line: int) -> None:
    where = f"{run / 'cells.jsonl'}:{line}:"
    assert any(where in ln and "line skipped" in ln for ln in ran.error_lines), ran.err[-2000:]


def assert_no_traceback(*ran) -> None:
    for r in ran:
        assert "Traceback" not in r.err, r.err[-2000:]


# ---- 3: the reading rule: a bad line is skipped and named ------------------------------------------------------
def test_deeply_nested_line_is_skipped_and_named(tmp_path):
    run = make_run(tmp_path, lines_with(b"[" * 100_000 + b"]" * 100_000 + b"\n"))
    rep, exp, imp = report(run, tmp_path / "reports"), export(run), import_(run, tmp_path / "h.sqlite")
    assert (rep.status, exp.status, imp.status) == (0, 0, 0), (rep.err, exp.err, imp.err)
    for ran in (rep, exp, imp):
        assert_named(ran, run, 2)
        assert f"nested deeper than {MAX_DEPTH} levels" in ran.err
    assert_no_traceback(rep, exp, imp)
    assert len(read_records(run)) == len(SMALL)  # the rest is read (check reads through here too)
    assert exp.out.count("\n") == len(SMALL) + 1  # a header and one row per record


def test_a_nesting_just_over_the_limit_is_skipped_and_one_at_it_is_read(tmp_path):
    def nested(depth: int) -> dict:
        rec = small_records()[0]
        value: object = 1
        for _ in range(depth - 2):  # the record and null_reasons are two levels
            value = [value]
        rec["null_reasons"] = {"x": value}
        return rec

    at, over = line_of(nested(MAX_DEPTH)), line_of(nested(MAX_DEPTH + 1))
    (tmp_path / "cells.jsonl").write_bytes(at + over)
    skipped: list = []
    assert read_records(tmp_path, skipped=skipped) == []
    # the first is read, then skipped for its type (null_reasons holds a list); the second is too deep to read
    assert [(s.line, "null_reasons" in s.why, "nested deeper" in s.why) for s in skipped] == [
        (1, True, False),
        (2, False, True),
    ]
    (tmp_path / "cells.jsonl").write_bytes(over)
    assert read_records(tmp_path) == []


def test_non_utf8_byte_skips_one_line_named(tmp_path):
    lines = [record_lines()[i] for i in SMALL]
    lines[1] = lines[1].replace(b'"skipped"', b'"skip\xffped"', 1)
    run = make_run(tmp_path, lines)
    rep, exp, imp = report(run, tmp_path / "reports"), export(run), import_(run, tmp_path / "h.sqlite")
    assert (rep.status, exp.status, imp.status) == (0, 0, 0), (rep.err, exp.err, imp.err)
    for ran in (rep, exp, imp):
        assert_named(ran, run, 2)
        assert "not UTF-8 (byte 0xff at offset" in ran.err
    assert_no_traceback(rep, exp, imp)
    assert len(read_records(run)) == len(SMALL) - 1
    assert "imported" in imp.out and f"{len(SMALL) - 1} cells" in imp.out


@pytest.mark.parametrize(
    "bad, why",
    [
        (b'{"a": "\\ud800"}\n', "a lone surrogate"),
        (b'{"a": ' + b"9" * 5000 + b"}\n", "not JSON (Exceeds the limit"),
        (b"[1, 2]\n", "a JSON list, not an object"),
        (b'"text"\n', "a JSON str, not an object"),
        (b'{"a": "b\x00c"}\n', "not JSON (Invalid control character"),
        (b"\xef\xbb\xbf{}\n", "not JSON (Unexpected UTF-8 BOM"),
        (b'{"torn": \n', "not JSON (Expecting value"),
    ],
)
def test_every_kind_of_bad_line_is_skipped_and_named(tmp_path, caplog, bad, why):
    (tmp_path / "cells.jsonl").write_bytes(line_of(small_records()[0]) + bad + line_of(small_records()[1]))
    assert len(read_records(tmp_path)) == 2
    named = [m for m in caplog.messages if "cells.jsonl:2: " in m and m.endswith("; line skipped")]
    assert len(named) == 1 and why in named[0], caplog.messages


def test_a_line_over_the_limit_is_skipped_without_being_held(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(results_dir, "MAX_LINE_BYTES", 64 * 1024)
    huge = small_records()[0]
    huge["reason"] = "R" * 200_000
    (tmp_path / "cells.jsonl").write_bytes(line_of(huge) + line_of(small_records()[1]) + line_of(huge)[:-1])
    recs = read_records(tmp_path)
    assert [r.status for r in recs] == ["skipped"]
    assert any("cells.jsonl:1: longer than" in m for m in caplog.messages)
    assert any("cells.jsonl:3: longer than" in m for m in caplog.messages)  # the last one, without a newline


def test_a_records_file_over_its_limit_is_one_line_exit_2(tmp_path, monkeypatch):
    run = make_run(tmp_path)
    monkeypatch.setattr(results_dir, "MAX_RECORDS_BYTES", 1000)
    for ran in (report(run, tmp_path / "reports"), export(run), import_(run, tmp_path / "h.sqlite")):
        assert ran.status == 2 and len(ran.error_lines) == 1, ran.err
        assert (
            str(run / "cells.jsonl") in ran.err and "over the 1000 bytes a records file may hold" in ran.err
        )
    assert not (tmp_path / "reports").exists() and not (tmp_path / "h.sqlite").exists()


def test_env_json_breaking_the_rule_is_one_line_naming_it(tmp_path):
    env = (CPU_RUN / "env.json").read_bytes()
    cases = {
        "utf8": env.replace(b"ci-cpu-2", b"ci-\xff-2"),
        "deep": b'{"host": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        "shape": json.dumps(dict(json.loads(env), host=["not", "an", "object"])).encode(),
        "machines": json.dumps(dict(json.loads(env), machines=[{"machine": "m"}])).encode(),
        "array": b"[]",
    }
    for name, text in cases.items():
        run = make_run(tmp_path / name, env=text)
        for ran in (
            report(run, tmp_path / name / "reports"),
            export(run),
            import_(run, tmp_path / "h.sqlite"),
        ):
            assert ran.status == 2 and len(ran.error_lines) == 1, (name, ran.err)
            assert str(run / "env.json") in ran.err, (name, ran.err)
            assert_no_traceback(ran)
        assert not (tmp_path / name / "reports").exists()


def test_a_fifo_as_env_json_is_refused_not_waited_on(tmp_path):
    run = make_run(tmp_path)
    (run / "env.json").unlink()
    os.mkfifo(run / "env.json")
    with pytest.raises(RunFileError, match="not a regular file"):
        read_env(run)


def test_history_json_follows_the_rule(tmp_path):
    deep = tmp_path / "history.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(RunFileError, match="nested deeper"):
        read_json_file(deep)
    ran = call(
        report_main, [str(make_run(tmp_path)), "-o", str(tmp_path / "reports"), "--history", str(deep)]
    )
    assert ran.status == 2 and len(ran.error_lines) == 1 and "--history" in ran.err, ran.err
    assert_no_traceback(ran)


def test_the_writer_sets_a_deep_last_line_aside(tmp_path):
    path = tmp_path / "cells.jsonl"
    path.write_bytes(b"[" * 100_000 + b"]" * 100_000 + b"\n")
    notes: list[str] = []
    RecordWriter(tmp_path, notify=notes.append).write(make_record("r", cell("onnxruntime", "n", "cpu")))
    assert len(read_records(tmp_path)) == 1 and notes and "torn" in notes[0]
    assert (tmp_path / "cells.jsonl.torn").is_file()


# ---- 3: a NUL in a log; no empty report directory ----------------------------------------------------------
def test_nul_in_a_log_is_not_linked_and_the_report_is_written(tmp_path):
    recs = small_records()
    recs[0]["log"] = recs[0]["log"] + "\x00.txt"
    run = make_run(tmp_path, [line_of(r) for r in recs])
    ran = report(run, tmp_path / "reports")
    assert ran.status == 0, ran.err
    html = (tmp_path / "reports" / "latest" / "index.html").read_text(encoding="utf-8")
    assert "Paths from the records not linked" in html and "\\x00.txt" in html
    assert "NUL" in html  # the reason
    assert any("not linked" in ln and "\\x00" in ln for ln in ran.error_lines), ran.err
    assert "\x00" not in html


def test_a_report_that_fails_leaves_no_directory(tmp_path, monkeypatch):
    def broken(*_a, **_k):
        raise ValueError("cannot summarise")

    monkeypatch.setattr(render_mod, "summary_md", broken)
    ran = report(make_run(tmp_path), tmp_path / "reports")
    assert ran.status == 2 and ran.error_lines == ["report: cannot summarise"], ran.err
    assert not (tmp_path / "reports").exists() or not any((tmp_path / "reports").iterdir())


# ---- 3: a merged run's source is not trusted blindly ----------------------------------------------------------
def _merged(tmp_path: Path, source: str, log: str) -> Path:
    """A merged run (as `merge` writes it) of the SMALL records, its one machine naming `source`, the first
    record's log `log`."""
    recs = small_records()
    env = json.loads((CPU_RUN / "env.json").read_text())
    recs[0]["log"] = log
    for r in recs:
        r["machine"], r["source_run_id"] = "m1", env["run_id"]
    merged = tmp_path / "merged"
    merged.mkdir(parents=True)
    (merged / "cells.jsonl").write_bytes(b"".join(line_of(r) for r in recs))
    menv = {
        "schema_version": 2,
        "run_id": "merged",
        "started_at": env["started_at"],
        "host": {"hostname": "m1"},
        "machines": [{"machine": "m1", "run_id": env["run_id"], "source": source, "env": env}],
    }
    (merged / "env.json").write_text(json.dumps(menv))
    return merged


def _log_hrefs(index: Path) -> list[Path]:
    html = index.read_text(encoding="utf-8")
    return [(index.parent / h).resolve() for h in re.findall(r'<a class="log" href="([^"]+)"', html)]


@pytest.mark.parametrize("source", ["/", "/etc", "HOME"])
def test_merged_source_outside_is_not_trusted(tmp_path, source):
    secret = tmp_path / "home" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("not for the report")
    source = str(secret.parent) if source == "HOME" else source
    log = "secret.txt" if source == str(secret.parent) else "etc/passwd" if source == "/" else "passwd"
    merged = _merged(tmp_path, source, log)
    ran = report(merged, tmp_path / "reports")
    assert ran.status == 0, ran.err
    links = _log_hrefs(tmp_path / "reports" / "latest" / "index.html")
    assert Path("/etc/passwd") not in links and secret.resolve() not in links, links
    assert any("is not used for its logs" in ln for ln in ran.error_lines), ran.err


def test_a_real_source_run_keeps_its_log_links(tmp_path):
    source = make_run(tmp_path, name="source")
    log = small_records()[0]["log"]
    merged = _merged(tmp_path, str(source), log)
    ran = report(merged, tmp_path / "reports")
    assert ran.status == 0, ran.err
    assert (source / log).resolve() in _log_hrefs(tmp_path / "reports" / "latest" / "index.html")
    # and a record log climbing out of that trusted source is still refused
    merged2 = _merged(tmp_path / "b", str(source), "../../../../../../etc/passwd")
    ran = report(merged2, tmp_path / "b" / "reports")
    assert Path("/etc/passwd") not in _log_hrefs(tmp_path / "b" / "reports" / "latest" / "index.html")
    assert any("points outside the run directory" in ln for ln in ran.error_lines), ran.err


def test_a_source_of_another_run_id_is_not_trusted(tmp_path):
    other = make_run(tmp_path, name="other")
    env = json.loads((other / "env.json").read_text())
    (other / "env.json").write_text(json.dumps(dict(env, run_id="someone-else")))
    merged = _merged(tmp_path, str(other), small_records()[0]["log"])
    ran = report(merged, tmp_path / "reports")
    assert ran.status == 0 and not _log_hrefs(tmp_path / "reports" / "latest" / "index.html"), ran.err
    assert any("not run" in ln for ln in ran.error_lines), ran.err


# ---- 5: control and bidirectional characters on the page and the terminal --------------------------------------
def test_control_and_bidi_characters_are_escaped_on_the_page(tmp_path):
    recs = small_records()
    for r in recs:
        r["cell_id"] = r["cell_id"] + NASTY
        r["reason"] = f"because {NASTY}"
        if r.get("failure"):
            r["failure"]["message"] = f"boom {NASTY}"
    run = make_run(tmp_path, [line_of(r) for r in recs])
    env = json.loads((run / "env.json").read_text())
    env["host"]["hostname"] = f"host{NASTY}"
    env["run_id"] = f"run{NASTY}"
    (run / "env.json").write_text(json.dumps(env))
    ran = report(run, tmp_path / "reports")
    assert ran.status == 0, ran.err
    pages = page_files(tmp_path / "reports")
    assert len(pages) == 4 and raw_unsafe(tmp_path / "reports") == {}
    html = next(t for p, t in pages.items() if p.endswith("latest/index.html"))
    assert page_text(NASTY).replace("\r", "") in html.replace("\r", "")  # shown, escaped
    decision = (tmp_path / "reports" / "latest" / "decision.json").read_text(encoding="utf-8")
    assert not unsafe_on_page(decision)  # JSON-escaped


def test_a_cell_id_with_newline_or_ansi_stays_one_line_on_the_terminal(tmp_path):
    recs = small_records()
    forged = "x\nERROR forged line \x1b[2J\u202e"
    recs[1]["cell_id"] = forged
    recs[2]["cell_id"] = forged  # recorded twice: named by the report and the import
    run = make_run(tmp_path, [line_of(r) for r in recs])
    for ran in (report(run, tmp_path / "reports"), import_(run, tmp_path / "h.sqlite")):
        assert ran.status == 0, ran.err
        text = ran.out + ran.err
        assert "\x1b" not in text and "\u202e" not in text
        assert not any(ln.startswith("ERROR forged") for ln in text.splitlines()), text
        assert "recorded more than once" in text and "x\\nERROR forged line \\x1b[2J\\u202e" in text
    csv = export(run)
    assert csv.status == 0 and len(csv.out.splitlines()) == 1 + len(SMALL) - 1, csv.out  # one line per row
    assert "\x1b" not in csv.out and "x\\nERROR forged line \\x1b[2J\\u202e" in csv.out
    # a record that does not fit: the line naming it, skipped, is one line too
    recs[1]["bogus_field"] = 1
    bad = make_run(tmp_path / "bad", [line_of(r) for r in recs])
    for ran in (report(bad, tmp_path / "bad" / "reports"), export(bad), import_(bad, tmp_path / "h2.sqlite")):
        named = [ln for ln in ran.error_lines if ln.endswith("line skipped")]
        assert ran.status == 0 and len(named) == 1, ran.err
        assert "\x1b" not in ran.err and "bogus_field" in named[0] and "cells.jsonl:2" in named[0]


# ---- 6: an empty records file ---------------------------------------------------------------------------------
@pytest.mark.parametrize("content", [b"", b"\n\n  \n", b'{"torn": \n'])
def test_empty_records_file_is_no_records(tmp_path, content):
    run = make_run(tmp_path, [content])
    with pytest.raises(NoRecords, match="no records"):
        read_records(run, required=True)
    assert read_records(run) == []  # the resume's reader still takes an empty file as no cells recorded
    for ran in (report(run, tmp_path / "reports"), export(run), import_(run, tmp_path / "h.sqlite")):
        assert ran.status == 2, ran.err
        errors = [ln for ln in ran.error_lines if "line skipped" not in ln]
        assert len(errors) == 1 and "no records" in errors[0] and str(run / "cells.jsonl") in errors[0], (
            ran.err
        )
    assert not (tmp_path / "reports").exists() and not (tmp_path / "h.sqlite").exists()


@pytest.mark.parametrize("kind", ["link to /dev/zero", "fifo", "directory"])
def test_a_records_file_that_is_not_a_regular_file_is_named_so(tmp_path, kind):
    """Issue 66: check and report on a cells.jsonl linked to /dev/zero said "no cells.jsonl" (it is there, and not
    a regular file)."""
    from harness.check.cli import main as check_main

    run = make_run(tmp_path)
    (run / "cells.jsonl").unlink()
    if kind == "fifo":
        os.mkfifo(run / "cells.jsonl")
    elif kind == "directory":
        (run / "cells.jsonl").mkdir()
    else:
        (run / "cells.jsonl").symlink_to("/dev/zero")
    for name, ran in (
        ("check", call(check_main, [str(run)])),
        ("report", report(run, tmp_path / "reports")),
        ("export", export(run)),
        ("import", import_(run, tmp_path / "h.sqlite")),
    ):
        assert ran.status == 2 and len(ran.error_lines) == 1, (name, ran.err)
        assert f"{run / 'cells.jsonl'}: not a regular file" in ran.error_lines[0], (name, ran.err)
    # the other way: a run with no cells.jsonl at all is still "no cells.jsonl"
    (run / "cells.jsonl").unlink() if kind != "directory" else (run / "cells.jsonl").rmdir()
    assert "no cells.jsonl" in call(check_main, [str(run)]).err


def test_a_written_record_reads_back_under_the_rule(tmp_path):
    # the other way: what the harness writes is within every limit (a 300 kB reason included)
    rec = make_record("r", cell("onnxruntime", "n", "cpu"))
    rec.reason = "R" * 300_000
    RecordWriter(tmp_path).write(rec)
    assert read_records(tmp_path, required=True)[0].reason == rec.reason
    assert record_to_json(read_records(tmp_path)[0]) == record_to_json(rec)


def test_a_merge_keeps_the_log_links_of_its_sources(tmp_path):
    from harness.history.cli import main_merge

    runs = []
    for host in ("alpha", "beta"):
        env = json.loads((CPU_RUN / "env.json").read_text())
        env["host"]["hostname"] = host
        runs.append(make_run(tmp_path, env=json.dumps(env).encode(), name=f"run-{host}"))
    merged = tmp_path / "merged"
    ran = call(main_merge, [*map(str, runs), "-o", str(merged), "--db", str(tmp_path / "h.sqlite")])
    assert ran.status == 0, ran.err
    ran = report(merged, tmp_path / "reports")
    assert ran.status == 0 and "is not used for its logs" not in ran.err, ran.err
    links = _log_hrefs(tmp_path / "reports" / "latest" / "index.html")
    assert {p.parent.parent for p in links} == {r.resolve() for r in runs}, links
