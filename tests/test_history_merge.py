"""Merging several machines' runs, and the history data handed to the report stage."""

from __future__ import annotations

import json
import random
from pathlib import Path

from harness.core.record import RECORD_FIELDS
from harness.core.results_dir import read_record_dicts, read_records
from harness.history import report_data
from harness.history.cli import main_compare, main_merge
from harness.history.store import import_run_dir
from harness.history.synthetic import Noise, cell, make_env, make_record, noisy_samples, write_run

CELLS = [cell("tensorrt", "n"), cell("onnxruntime", "n"), cell("torch", "s")]
MACHINES = {"h100-box": ("NVIDIA H100 80GB HBM3", 1.0), "l4-box": ("NVIDIA L4", 2.5)}


def machine_run(root: Path, host: str, i: int, *, slow: float = 1.0, status: str = "ok") -> Path:
    gpu, scale = MACHINES[host]
    rng = random.Random(f"{host}-{i}")
    run_id = f"nightly-{i:03d}"
    env = make_env(run_id, f"2026-11-{i:02d}T02:00:00Z", hostname=host, gpu=gpu)
    recs = []
    for k, c in enumerate(CELLS):
        factor = slow if k == 0 else 1.0
        st = status if k == 1 else "ok"
        samples = (
            noisy_samples(rng, (1.5 + k) * scale * factor, 40, Noise(run_sigma=0.01)) if st == "ok" else None
        )
        recs.append(make_record(run_id, c, status=st, samples_ms=samples, device_mem_mib=600.0))
    return write_run(root / host, env, recs)


def test_report_data_is_none_without_history(tmp_path):
    db = tmp_path / "h.sqlite"
    assert report_data(db, "nightly-001") is None
    import_run_dir(db, machine_run(tmp_path, "h100-box", 1))
    assert report_data(db, "nightly-001") is None  # no earlier run of the series
    assert report_data(db, "no-such-run") is None


def test_report_data_trends_and_regressions(tmp_path):
    db = tmp_path / "h.sqlite"
    for i in range(1, 6):
        import_run_dir(db, machine_run(tmp_path, "h100-box", i))
    import_run_dir(db, machine_run(tmp_path, "h100-box", 6, slow=1.3, status="crashed"))
    data = report_data(db, "nightly-006")
    assert data is not None
    trend = data["trends"][CELLS[0].id]
    assert [p["run_id"] for p in trend] == [f"nightly-{i:03d}" for i in range(1, 7)]  # oldest first
    assert trend[-1]["p50"] > trend[0]["p50"] * 1.2
    assert data["trends"][CELLS[1].id][-1] == {
        "run_id": "nightly-006",
        "started_at": "2026-11-06T02:00:00+00:00",
        "p50": None,
        "status": "crashed",
        "machine": "h100-box",
    }
    kinds = {(r["cell_id"], r["kind"]) for r in data["regressions"]}
    assert kinds == {(CELLS[0].id, "latency"), (CELLS[1].id, "status")}
    for r in data["regressions"]:
        assert {"cell_id", "kind", "baseline", "current", "change_pct", "detail"} <= r.keys()
    json.dumps(data)  # plain data, ready for a template


def test_merge_two_machines_into_one_history_and_one_results_dir(tmp_path, capsys):
    db = tmp_path / "h.sqlite"
    for i in range(1, 4):
        for host in MACHINES:
            import_run_dir(db, machine_run(tmp_path / "results", host, i))
    h100 = machine_run(tmp_path / "results", "h100-box", 4, slow=1.5)
    l4 = machine_run(tmp_path / "results", "l4-box", 4)
    out = tmp_path / "merged" / "nightly-004-all"
    assert main_merge([str(h100), str(l4), "-o", str(out), "--db", str(db)]) == 0
    assert "h100-box, l4-box" in capsys.readouterr().out

    records = read_records(out)
    assert len(records) == 2 * len(CELLS)
    assert {r.machine for r in records} == set(MACHINES)
    assert all(set(RECORD_FIELDS) <= r.keys() for r in read_record_dicts(out))  # every field, as written
    assert {r.run_id for r in records} == {"nightly-004-all"}
    assert {r.source_run_id for r in records} == {"nightly-004"}
    env = json.loads((out / "env.json").read_text())
    assert [m["machine"] for m in env["machines"]] == ["h100-box", "l4-box"]
    assert env["machines"][1]["env"]["gpu"][0]["name"] == "NVIDIA L4"
    assert env["cuda"] == {"version": "12.4", "cudnn": "9.1.0"}  # shared by both
    assert len({m["series_id"] for m in env["machines"]}) == 2  # different GPUs, different series

    data = report_data(db, "nightly-004-all")
    assert set(data["trends"]) == {f"{c.id}@{m}" for c in CELLS for m in MACHINES}
    assert len(data["trends"][f"{CELLS[0].id}@l4-box"]) == 4
    assert [(r["cell_id"], r["machine"]) for r in data["regressions"]] == [(CELLS[0].id, "h100-box")]

    # The merged dir can be compared directly (its sources are already imported: idempotent).
    assert main_compare([str(out), "--db", str(db)]) == 1
    assert main_compare([str(out), "--db", str(db), "--machine", "l4-box"]) == 0
    # Merging again is idempotent.
    before = (out / "cells.jsonl").read_text()
    assert main_merge([str(h100), str(l4), "-o", str(out), "--db", str(db)]) == 0
    assert (out / "cells.jsonl").read_text() == before


def test_merge_refuses_before_writing_anything(tmp_path):
    db = tmp_path / "h.sqlite"
    good = machine_run(tmp_path, "h100-box", 1)
    bad = machine_run(tmp_path, "l4-box", 1)
    (bad / "env.json").unlink()
    out = tmp_path / "merged"
    assert main_merge([str(good), str(bad), "-o", str(out), "--db", str(db)]) == 2
    assert not db.exists() and not out.exists()


def test_same_hostname_twice_gets_distinct_machine_labels(tmp_path):
    db = tmp_path / "h.sqlite"
    a = machine_run(tmp_path / "a", "h100-box", 1)
    b = machine_run(tmp_path / "b", "h100-box", 2)
    out = tmp_path / "m"
    assert main_merge([str(a), str(b), "-o", str(out), "--db", str(db)]) == 0
    machines = {r.machine for r in read_records(out)}
    assert machines == {"h100-box-nightly-001", "h100-box-nightly-002"}
    assert main_merge([str(a), str(a), "-o", str(out), "--db", str(db)]) == 2


def test_written_record_env_pairs_are_plain_results_dirs(tmp_path):
    """The synthetic writer goes through the harness's own RecordWriter, so fixtures match real runs."""
    run_dir = write_run(tmp_path, make_env("r", "t"), [make_record("r", CELLS[0], status="skipped")])
    assert read_records(run_dir)[0].status == "skipped"


def test_report_renders_the_history_that_compare_writes(tmp_path):
    """Contract with the report stage: `compare --report-json` output feeds `render_report(..., history)`."""
    db = tmp_path / "h.sqlite"
    for i in range(1, 4):
        for host in MACHINES:
            import_run_dir(db, machine_run(tmp_path / "results", host, i))
    h100 = machine_run(tmp_path / "results", "h100-box", 4, slow=1.5)
    l4 = machine_run(tmp_path / "results", "l4-box", 4)
    out = tmp_path / "merged" / "nightly-004-all"
    assert main_merge([str(h100), str(l4), "-o", str(out), "--db", str(db)]) == 0
    history_json = tmp_path / "history.json"
    assert main_compare([str(out), "--db", str(db), "--report-json", str(history_json)]) == 1
    history = json.loads(history_json.read_text())
    assert history == report_data(db, "nightly-004-all")

    from harness.report import render_report

    html = Path(render_report([out], tmp_path / "reports", history)).read_text()
    assert html.count('class="spark"') == len(CELLS) * len(MACHINES)
    assert "Regressions" in html and CELLS[0].id in html


def test_report_json_is_null_without_history(tmp_path):
    db = tmp_path / "h.sqlite"
    run_dir = machine_run(tmp_path, "h100-box", 1)
    history_json = tmp_path / "history.json"
    assert main_compare([str(run_dir), "--db", str(db), "--report-json", str(history_json)]) == 0
    assert json.loads(history_json.read_text()) is None
