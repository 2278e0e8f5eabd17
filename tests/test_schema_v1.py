"""Records and env.json of schema version 1 (tests/data/v1_run, copied from the committed 2-core CPU sample) are
read as version 2: migrated keys and values, then rendered by the report and imported into the history."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from harness import SCHEMA_VERSION
from harness.core import migrate
from harness.core.migrate import migrate_env, migrate_record
from harness.core.record import RECORD_FIELDS, CellRecord
from harness.core.record_codec import record_to_dict, section_items
from harness.core.results_dir import ImportRefused, RecordWriter, load_run, read_env, read_records, write_env
from harness.history.cli import main_import
from harness.history.fingerprint import fingerprint_from_env
from harness.history.store import connect, import_run_dir
from harness.report import render_report

V1_RUN = Path(__file__).parent / "data" / "v1_run"
RUN_ID = "20261122-cpu-default"


def _raw() -> dict[str, dict]:
    """The v1 records as they are on disk, by cell id."""
    lines = (V1_RUN / "cells.jsonl").read_text().splitlines()
    return {r["cell_id"]: r for r in map(json.loads, lines)}


def _one(recs: dict[str, CellRecord], backend: str, status: str) -> CellRecord:
    return next(r for r in recs.values() if r.backend == backend and r.status == status)


def test_the_fixture_is_schema_1_and_varied():
    raw = _raw()
    assert {r["schema_version"] for r in raw.values()} == {1}
    assert {r["status"] for r in raw.values()} == {"ok", "export_failed", "skipped", "exported"}
    assert json.loads((V1_RUN / "env.json").read_text())["schema_version"] == 1


def test_read_records_migrates_v1_keys_and_keeps_values():
    raw, recs = _raw(), {r.cell_id: r for r in read_records(V1_RUN)}
    assert recs.keys() == raw.keys()
    for cid, rec in recs.items():
        old = raw[cid]
        written = record_to_dict(rec)  # the record as JSON, to hold against the v1 JSON on disk
        assert rec.schema_version == SCHEMA_VERSION
        assert set(RECORD_FIELDS) <= set(written)
        # threads were not recorded by v1: null, with the reason
        assert rec.threads is None and rec.null_reasons["threads"] == migrate.V1_NOT_RECORDED
        assert (
            rec.threads_requested is None and rec.null_reasons["threads_requested"] == migrate.V1_NOT_RECORDED
        )
        # every v1 field other than the ones v2 reworked keeps its value
        for f in set(old) - {"schema_version", "memory", "null_reasons", "precision_executed"}:
            assert written[f] == old[f], f
        assert not any(k.endswith("_mb") or "energy_per" in k for k in rec.null_reasons)

    ok = _one(recs, "onnxruntime", "ok")
    old = raw[ok.cell_id]
    # memory: keys renamed, values unchanged (v1 "MB" were already MiB); energy split out into its own section
    assert ok.memory.host_peak_rss_mib == old["memory"]["host_peak_rss_mb"]
    assert ok.memory.host_peak_delta_mib == old["memory"]["host_peak_delta_mb"]
    assert ok.memory.source == old["memory"]["source"]
    memory_keys = [k for k, _ in section_items(ok.memory)]
    assert not any(k.endswith("_mb") for k in memory_keys) and "energy_per_inference_j" not in memory_keys
    assert ok.energy.per_inference_j is None
    assert ok.null_reasons["energy.per_inference_j"] == old["null_reasons"]["memory.energy_per_inference_j"]
    assert ok.null_reasons["memory.device_peak_used_mib"] == old["null_reasons"]["memory.device_peak_used_mb"]
    # precision: v1 copied the request for every backend but OpenVINO, so it is dropped with the reason
    assert old["precision_executed"] == "fp32"
    assert ok.precision_executed is None
    assert ok.null_reasons["precision_executed"] == migrate.V1_PRECISION_COPIED
    assert ok.precision_source == migrate.V1_PRECISION_COPIED
    assert ok.export_origin == "exported in this attempt"  # cache_hit false

    ov = _one(recs, "openvino", "ok")
    assert ov.precision_executed == "fp32" and ov.precision_source == migrate.V1_OPENVINO_PRECISION
    assert "precision_executed" not in ov.null_reasons
    assert ov.export_origin == migrate.V1_CACHE_HIT  # cache_hit true

    eager = _one(recs, "torch-eager", "ok")
    assert eager.export_origin is None and eager.null_reasons["export_origin"]

    skipped = _one(recs, "aoti", "skipped")
    assert skipped.memory is None and skipped.energy is None
    assert skipped.null_reasons["energy"] == skipped.null_reasons["memory"]
    failed = _one(recs, "executorch-coreml", "export_failed")
    assert failed.failure == raw[failed.cell_id]["failure"]
    exported = _one(recs, "executorch-vulkan", "exported")
    assert exported.export_origin == migrate.V1_CACHE_HIT and exported.ops


def test_migration_leaves_v2_alone_and_its_input_untouched():
    old = next(iter(_raw().values()))
    before = json.dumps(old)
    new = migrate_record(old)
    assert json.dumps(old) == before  # the input dict is not changed
    assert migrate_record(new) is new
    assert list(new)[: len(RECORD_FIELDS)] == list(RECORD_FIELDS)  # the runner's field order


def test_env_migration_adds_threads_and_the_version():
    env = read_env(V1_RUN)
    assert env["schema_version"] == SCHEMA_VERSION
    assert env["threads"] == {"budget": None, "physical_cores": 2, "source": migrate.V1_NOT_RECORDED}
    assert migrate_env(env) is env
    merged = {"schema_version": 2, "machines": [{"machine": "a", "env": {"schema_version": 1, "host": {}}}]}
    assert migrate_env(merged)["machines"][0]["env"]["schema_version"] == SCHEMA_VERSION


@pytest.mark.parametrize("version", [99, None, "2"])
def test_unknown_record_version_is_one_clear_error_naming_file_and_line(tmp_path, version):
    lines = (V1_RUN / "cells.jsonl").read_text().splitlines()
    rec = json.loads(lines[2])
    rec["schema_version"] = version
    lines[2] = json.dumps(rec)
    (tmp_path / "cells.jsonl").write_text("\n".join(lines) + "\n")
    shutil.copy(V1_RUN / "env.json", tmp_path / "env.json")
    with pytest.raises(ValueError) as e:
        read_records(tmp_path)
    msg = str(e.value)
    assert msg.startswith(f"{tmp_path / 'cells.jsonl'}:3: ")
    assert f"schema_version {version!r}" in msg if version is not None else "no schema_version" in msg
    # the report refuses the directory with that message; the import refuses it and writes nothing
    with pytest.raises(ValueError, match=r"cells\.jsonl:3"):
        load_run(tmp_path)
    with pytest.raises(ImportRefused, match=r"cells\.jsonl:3"):
        import_run_dir(tmp_path / "h.sqlite", tmp_path)
    assert not (tmp_path / "h.sqlite").exists()


def test_unknown_env_version_is_refused(tmp_path):
    shutil.copy(V1_RUN / "cells.jsonl", tmp_path / "cells.jsonl")
    env = json.loads((V1_RUN / "env.json").read_text())
    (tmp_path / "env.json").write_text(json.dumps(dict(env, schema_version=99)))
    with pytest.raises(ValueError, match=r"env\.json: env\.json schema_version 99"):
        read_env(tmp_path)


def test_write_env_is_atomic_and_round_trips(tmp_path, monkeypatch):
    env = read_env(V1_RUN)
    path = write_env(tmp_path, env)
    assert read_env(tmp_path) == env and path == tmp_path / "env.json"

    def broken(*_a, **_k):
        raise OSError("disk full")

    monkeypatch.setattr("harness.core.results_dir.os.replace", broken)
    with pytest.raises(OSError):
        write_env(tmp_path, {"run_id": "other"})
    assert read_env(tmp_path) == env  # the old file is intact
    assert [p.name for p in tmp_path.iterdir()] == ["env.json"]  # no temp file left behind


def test_the_report_renders_a_v1_run(tmp_path):
    index = render_report([V1_RUN], tmp_path / "reports")
    html = index.read_text()
    recs = read_records(V1_RUN)
    for rec in recs:
        assert rec.cell_id in html
    assert "host peak RSS MiB" in html and "RSS MB" not in html
    summary = json.loads((index.parent / "summary.json").read_text())
    verdicts = next(iter(summary["verdicts"].values()))
    assert (verdicts["total"], verdicts["ok"], verdicts["failed"]) == (6, 3, 1)
    assert verdicts["skipped"] == 1 and verdicts["exported_only"] == 1


def test_import_of_a_v1_run_stores_v2_records_in_the_v2_series(tmp_path):
    db = tmp_path / "h.sqlite"
    assert main_import([str(V1_RUN), "--db", str(db)]) == 0
    (result,) = import_run_dir(db, V1_RUN)
    assert result.action == "unchanged"  # migration is deterministic: same digest on every import
    # the fingerprint is the one a v2 run of the same machine gets: migration does not split the series
    assert result.series_id == fingerprint_from_env(read_env(V1_RUN), SCHEMA_VERSION).series_id
    conn = connect(db)
    try:
        rows = conn.execute("SELECT status, mem_mb, mem_source, record FROM cells").fetchall()
        fp = json.loads(conn.execute("SELECT fingerprint FROM series").fetchone()[0])
    finally:
        conn.close()
    assert fp["schema_version"] == SCHEMA_VERSION
    assert len(rows) == 6
    for status, mem, mem_source, record in rows:
        rec = json.loads(record)
        assert rec["schema_version"] == SCHEMA_VERSION and "energy" in rec
        if status == "ok":
            assert mem_source == "host_peak_delta_mib" and mem == rec["memory"]["host_peak_delta_mib"]


def test_a_v2_run_of_the_same_machine_joins_the_series_of_a_migrated_v1_run(tmp_path):
    v2_dir = tmp_path / "v2"
    v2_dir.mkdir()
    env = dict(read_env(V1_RUN), run_id="v2-run", started_at="2026-11-23T04:00:00+00:00")
    env["threads"] = {"budget": 2, "physical_cores": 2, "source": "physical cores (default)"}
    write_env(v2_dir, env)
    writer = RecordWriter(v2_dir)
    for r in read_records(V1_RUN):
        r.run_id = "v2-run"
        writer.write(r)
    db = tmp_path / "h.sqlite"
    (a,) = import_run_dir(db, V1_RUN)
    (b,) = import_run_dir(db, v2_dir)
    assert a.series_id == b.series_id


def test_a_history_database_of_schema_1_is_upgraded_in_place(tmp_path):
    """A db_schema-1 database (v1 records, schema-1 fingerprints, *_mb memory sources) as the previous harness
    wrote it: opening it migrates every run into the series a fresh import would give it."""
    db = tmp_path / "h.sqlite"
    (fresh,) = import_run_dir(tmp_path / "fresh.sqlite", V1_RUN)
    raw = _raw()
    env = json.loads((V1_RUN / "env.json").read_text())
    old_fp = fingerprint_from_env(env, 1)
    conn = connect(db)  # an empty current database, then made to look like an old one
    try:
        conn.execute("UPDATE meta SET value = '1' WHERE key = 'db_schema'")
        conn.execute(
            "INSERT INTO series VALUES (?, ?, ?)",
            (old_fp.series_id, json.dumps(old_fp.to_dict(), sort_keys=True), old_fp.label),
        )
        conn.execute(
            "INSERT INTO runs VALUES (?, 'vm', ?, '2026-11-22T04:46:27+00:00', NULL, ?, 'old', 'x', 'now')",
            (RUN_ID, old_fp.series_id, json.dumps(env)),
        )
        for rec in raw.values():
            mem = (rec.get("memory") or {}).get("host_peak_delta_mb") if rec["status"] == "ok" else None
            conn.execute(
                "INSERT INTO cells VALUES (?, 'vm', ?, ?, NULL, NULL, NULL, ?, ?, ?)",
                (
                    RUN_ID,
                    rec["cell_id"],
                    rec["status"],
                    mem,
                    "host_peak_delta_mb" if mem else None,
                    json.dumps(rec),
                ),
            )
    finally:
        conn.close()
    connect(db).close()  # the upgrade
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("SELECT value FROM meta WHERE key = 'db_schema'").fetchone()[0] == "2"
        assert [r[0] for r in conn.execute("SELECT series_id FROM series")] == [fresh.series_id]
        assert conn.execute("SELECT series_id FROM runs").fetchone()[0] == fresh.series_id
        sources = {r[0] for r in conn.execute("SELECT mem_source FROM cells WHERE status = 'ok'")}
        assert sources == {"host_peak_delta_mib"}
        for (record,) in conn.execute("SELECT record FROM cells"):
            assert json.loads(record)["schema_version"] == SCHEMA_VERSION
    finally:
        conn.close()
