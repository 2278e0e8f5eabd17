"""The history database: idempotent import, refusal of foreign records, concurrent importers."""

from __future__ import annotations

import json
import multiprocessing
import random
import sqlite3
from pathlib import Path

import pytest

from harness import SCHEMA_VERSION
from harness.core.results_dir import ImportRefused
from harness.history.cli import main_import
from harness.history.fingerprint import fingerprint_from_env
from harness.history.rundir import normalize_time
from harness.history.store import connect, import_run_dir
from harness.history.synthetic import Noise, cell, make_env, make_record, noisy_samples, write_run

CELLS = [cell(b, s) for b in ("onnxruntime", "tensorrt", "torch") for s in ("n", "s", "m")]


def make_run(root: Path, i: int, seed: int = 0, cells=CELLS, hostname: str = "gpu-runner-1") -> Path:
    rng = random.Random(seed * 1000 + i)
    run_id = f"run-{i:03d}"
    env = make_env(run_id, f"2026-10-{i:02d}T03:00:00Z", hostname=hostname)
    recs = [
        make_record(run_id, c, samples_ms=noisy_samples(rng, 2.0 + k, 30, Noise()), device_mem_mib=800.0)
        for k, c in enumerate(cells)
    ]
    return write_run(root, env, recs)


def dump(db: Path) -> list[str]:
    conn = sqlite3.connect(db)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def counts(db: Path) -> tuple[int, int]:
    conn = sqlite3.connect(db)
    try:
        return (
            conn.execute("SELECT count(*) FROM runs").fetchone()[0],
            conn.execute("SELECT count(*) FROM cells").fetchone()[0],
        )
    finally:
        conn.close()


def test_import_is_idempotent_and_replaces_a_grown_run(tmp_path):
    db = tmp_path / "h.sqlite"
    run_dir = make_run(tmp_path / "results", 1, cells=CELLS[:4])
    assert [r.action for r in import_run_dir(db, run_dir)] == ["imported"]
    before = dump(db)
    assert [r.action for r in import_run_dir(db, run_dir)] == ["unchanged"]
    assert dump(db) == before
    # The run went on and wrote more cells: importing again replaces it whole.
    make_run(tmp_path / "results", 1, cells=CELLS)
    assert [r.action for r in import_run_dir(db, run_dir)] == ["replaced"]
    assert counts(db) == (1, len(CELLS))


def test_database_is_wal_with_the_samples_and_fingerprint(tmp_path):
    db = tmp_path / "h.sqlite"
    (result,) = import_run_dir(db, make_run(tmp_path, 1))
    conn = connect(db)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        fp = json.loads(conn.execute("SELECT fingerprint FROM series").fetchone()[0])
        assert fp["gpu_models"] == ["NVIDIA H100 80GB HBM3"] and fp["schema_version"] == SCHEMA_VERSION
        assert fp["libraries"]["torch"] == "2.13.0" and "openvino" not in fp["libraries"]
        samples = json.loads(conn.execute("SELECT samples FROM cells LIMIT 1").fetchone()[0])
        assert len(samples) == 30
    finally:
        conn.close()
    assert result.series_id == fingerprint_from_env(make_env("a", "b"), SCHEMA_VERSION).series_id


def test_fingerprint_separates_what_changes_performance():
    base = fingerprint_from_env(make_env("a", "t"), 1)
    assert fingerprint_from_env(make_env("b", "u", hostname="other-host"), 1) == base
    for changed in (
        make_env("a", "t", driver="560.1"),
        make_env("a", "t", cuda="12.8"),
        make_env("a", "t", gpu="NVIDIA L4"),
        make_env("a", "t", libraries={"onnxruntime": "1.32.0"}),
    ):
        assert fingerprint_from_env(changed, 1).series_id != base.series_id
    assert fingerprint_from_env(make_env("a", "t"), 2).series_id != base.series_id
    # Measurement tooling and clocks are not part of it.
    tooling = make_env("a", "t", libraries={"pytest-benchmark": "9.9", "nvidia-ml-py": "13.0"})
    tooling["gpu"][0]["sm_clock_mhz"] = 1755
    assert fingerprint_from_env(tooling, 1) == base
    cpu_a = fingerprint_from_env(make_env("a", "t", gpu=None, cuda=None), 1)
    cpu_env = make_env("a", "t", gpu=None, cuda=None)
    cpu_env["host"]["cpu_model"] = "Intel Xeon 8480"
    assert fingerprint_from_env(cpu_env, 1).series_id != cpu_a.series_id


def test_start_times_are_normalised_to_utc():
    assert normalize_time("2026-11-22T03:00:00+01:00") == "2026-11-22T02:00:00+00:00"
    assert normalize_time("2026-11-22T02:00:00Z") == "2026-11-22T02:00:00+00:00"
    assert normalize_time("2026-11-22T02:00:00") == "2026-11-22T02:00:00+00:00"
    assert normalize_time("last tuesday") == "last tuesday"


def _write_foreign(run_dir: Path) -> None:
    lines = (run_dir / "cells.jsonl").read_text().splitlines()
    rec = json.loads(lines[-1])
    rec["schema_version"] = 99
    lines[-1] = json.dumps(rec)
    (run_dir / "cells.jsonl").write_text("\n".join(lines) + "\n")


def test_foreign_schema_record_is_refused_and_nothing_changes(tmp_path, caplog):
    db = tmp_path / "h.sqlite"
    import_run_dir(db, make_run(tmp_path, 1))
    before = dump(db)
    foreign = make_run(tmp_path, 2)
    _write_foreign(foreign)
    with pytest.raises(
        ImportRefused, match=r"cells\.jsonl:\d+: record schema_version 99 is not one this harness reads"
    ):
        import_run_dir(db, foreign)
    assert dump(db) == before
    assert main_import([str(foreign), "--db", str(db)]) == 2
    assert "schema_version 99" in caplog.text
    assert dump(db) == before
    # A foreign env.json is refused the same way.
    env_foreign = make_run(tmp_path, 3)
    env = json.loads((env_foreign / "env.json").read_text())
    (env_foreign / "env.json").write_text(json.dumps(dict(env, schema_version=7)))
    with pytest.raises(ImportRefused, match=r"env\.json schema_version 7"):
        import_run_dir(db, env_foreign)
    assert dump(db) == before
    # Without a database, a refused import does not create one.
    fresh = tmp_path / "fresh.sqlite"
    with pytest.raises(ImportRefused):
        import_run_dir(fresh, foreign)
    assert not fresh.exists()


def test_incomplete_results_dirs_are_refused(tmp_path):
    db = tmp_path / "h.sqlite"
    no_env = make_run(tmp_path, 1)
    (no_env / "env.json").unlink()
    with pytest.raises(ImportRefused, match=r"no env\.json"):
        import_run_dir(db, no_env)
    with pytest.raises(ImportRefused, match=r"no cells\.jsonl"):
        import_run_dir(db, tmp_path / "empty")
    mixed = make_run(tmp_path, 2)
    env = json.loads((mixed / "env.json").read_text())
    (mixed / "env.json").write_text(json.dumps(dict(env, run_id="other")))
    with pytest.raises(ImportRefused, match="records belong to"):
        import_run_dir(db, mixed)
    assert not db.exists()


def _importer(db: str, run_dirs: list[str], barrier) -> None:
    barrier.wait()
    for d in run_dirs:
        import_run_dir(db, d)


def test_two_concurrent_importers_leave_a_consistent_database(tmp_path):
    db = tmp_path / "h.sqlite"
    results = tmp_path / "results"
    dirs = [str(make_run(results, i, seed=i)) for i in range(1, 9)]
    # Both import runs 3-6; each also has runs of its own, in opposite orders to interleave the writes.
    a, b = dirs[:6], list(reversed(dirs[2:]))
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_importer, args=(str(db), part, barrier)) for part in (a, b)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        per_run = dict(conn.execute("SELECT run_id, count(*) FROM cells GROUP BY run_id").fetchall())
    finally:
        conn.close()
    assert per_run == {f"run-{i:03d}": len(CELLS) for i in range(1, 9)}
    assert counts(db) == (8, 8 * len(CELLS))
    # And a third import of everything changes nothing.
    before = dump(db)
    assert main_import([*dirs, "--db", str(db)]) == 0
    assert dump(db) == before


def test_a_damaged_database_is_called_damaged_not_a_directory_or_disk_problem(tmp_path):
    """Issue 66: a history database whose pages were damaged got the hint for a missing directory or a full disk
    ("check that DIR exists, is a directory and is writable, and that its disk has space")."""
    from harness.core.results_dir import HistoryError
    from harness.history.store import open_db

    db = tmp_path / "h.sqlite"
    connect(db).close()
    with open(db, "r+b") as f:  # the schema's pages overwritten, the header left whole
        f.seek(100)
        f.write(b"\xff" * 8000)
    with pytest.raises(HistoryError) as e:  # import and compare open it so
        open_db(db)
    assert "malformed" in str(e.value) and "the file is damaged" in str(e.value), str(e.value)
    assert "disk has space" not in str(e.value) and "directory" not in str(e.value).split(";", 1)[1]
    with pytest.raises(HistoryError, match="malformed") as e:  # the report's --history reader
        open_db(db, readonly=True).execute("SELECT COUNT(*) FROM runs").fetchone()
    assert "disk has space" not in str(e.value)
    # the other way: a database whose directory cannot be made still gets that hint
    (tmp_path / "file").write_text("x")
    with pytest.raises(HistoryError, match="disk has space"):
        open_db(tmp_path / "file" / "h.sqlite")
