"""`yolo26-bench export`: Bencher Metric Format of a committed sample run, validated against Bencher's published
schema (tests/data/bencher/bmf.schema.json) and the documented shape, and malformed documents that must fail; the
CSV table read back by pandas."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pandas as pd
import pytest

from harness.core.results_dir import load_run, read_records
from harness.exports import bencher
from harness.exports.cli import main

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "results" / "samples" / "2026-11-22-cpu-2core-episodes"  # the default profile, warm run
SCHEMA = json.loads((Path(__file__).parent / "data" / "bencher" / "bmf.schema.json").read_text())


def conforms(doc) -> list[str]:
    """Both checks: Bencher's JSON schema, then the documented shape (names, keys, value within its interval)."""
    errors = [e.message for e in jsonschema.Draft7Validator(SCHEMA).iter_errors(doc)]
    return errors + bencher.shape_errors(doc)


@pytest.fixture(scope="module")
def bmf(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("bmf") / "bmf.json"
    assert main([str(SAMPLE), "--format", "bencher", "-o", str(out)]) == 0
    return json.loads(out.read_text())


def test_bencher_export_of_the_sample_validates(bmf):
    assert conforms(bmf) == []
    records = {r.cell_id: r for r in read_records(SAMPLE)}
    ok = {cid for cid, r in records.items() if r.status == "ok"}
    assert set(bmf) == ok  # one benchmark per measured cell; skipped cells carry no figure and are left out
    cid = "yolo26n-detect-e2e-onnxruntime-cpu-640x640-b1-fp32"
    rec = records[cid]
    lat = bmf[cid]["latency"]
    assert lat["value"] == pytest.approx(rec.latency_ms.p50 * 1e6)
    assert [lat["lower_value"], lat["upper_value"]] == pytest.approx([v * 1e6 for v in rec.latency_ms.p50_ci])
    assert bmf[cid]["throughput"]["value"] == pytest.approx(rec.throughput_ips)
    assert bmf[cid]["host-peak-rss-mib"]["value"] == pytest.approx(rec.memory.host_peak_rss_mib)


def test_nulls_are_left_out_not_invented(bmf):
    records = {r.cell_id: r for r in read_records(SAMPLE)}
    for cid, measures in bmf.items():
        rec = records[cid]
        assert ("latency-e2e-p99" in measures) == (rec.latency_e2e_ms.p99 is not None)
        assert ("map-ratio" in measures) == ((rec.accuracy or {}).get("ratio") is not None)
    # the sample has both kinds, so each branch above was taken
    assert any("latency-e2e-p99" not in m for m in bmf.values())
    assert any("map-ratio" in m for m in bmf.values()) and any("map-ratio" not in m for m in bmf.values())


@pytest.mark.parametrize(
    "doc",
    [
        [{"latency": {"value": 1.0}}],  # not an object of benchmarks
        {"cell": {"latency": {"lower_value": 1.0}}},  # no value
        {"cell": {"latency": {"value": "12.5"}}},  # a string, not a number
        {"cell": {"latency": {"value": None}}},  # a null passed through
        {"cell": {"latency": 12.5}},  # a bare number, not a metric object
        # a value outside its interval, below and above
        {"cell": {"latency": {"value": 5.0, "lower_value": 6.0, "upper_value": 7.0}}},
        {"cell": {"latency": {"value": 8.0, "upper_value": 7.0}}},
        {"cell": {"latency": {"value": 5.0, "p99": 9.0}}},  # a key BMF does not have
        {"cell": {"x" * 65: {"value": 1.0}}},  # a measure name over Bencher's 64 characters
        {"cell": {}},  # a benchmark with no measure
    ],
)
def test_malformed_documents_fail_the_check(doc):
    assert conforms(doc), f"accepted a malformed document: {doc}"


def test_published_schema_alone_catches_the_type_errors():
    """The published schema is the authority on types: these fail it even without the stricter shape check."""
    validator = jsonschema.Draft7Validator(SCHEMA)
    assert not list(validator.iter_errors({"cell": {"latency": {"value": 1.0, "lower_value": 0.5}}}))
    assert list(validator.iter_errors({"cell": {"latency": {"value": "1"}}}))
    assert list(validator.iter_errors({"cell": {"latency": {"upper_value": 2.0}}}))


def test_csv_has_one_row_per_cell_and_reads_in_pandas(tmp_path):
    out = tmp_path / "cells.csv"
    assert main([str(SAMPLE), "--format", "csv", "-o", str(out)]) == 0
    df = pd.read_csv(out)
    records = read_records(SAMPLE)
    assert len(df) == len({r.cell_id for r in records}) and df["cell_id"].is_unique
    row = df.set_index("cell_id").loc["yolo26n-detect-e2e-openvino-cpu-640x640-b1-fp32"]
    rec = next(r for r in records if r.cell_id == row.name)
    assert row["latency_p50_ms"] == pytest.approx(rec.latency_ms.p50)
    assert row["latency_p50_ci_low_ms"] == pytest.approx(rec.latency_ms.p50_ci[0])
    assert row["backend"] == "openvino" and row["status"] == "ok"
    skipped = df[df["status"] == "skipped"]
    assert len(skipped) and skipped["latency_p50_ms"].isna().all()  # a null is an empty field, not 0


def test_merged_runs_name_the_machine(tmp_path):
    """A merged run of two machines: the same cell id on each is two benchmarks, never one overwriting the other."""
    runs = load_run(SAMPLE)
    twin = [runs[0], type(runs[0])(SAMPLE, "other", {"host": {"cpu_model": "Other CPU"}}, runs[0].records)]
    doc = bencher.to_bmf(twin)
    assert conforms(doc) == []
    assert len(doc) == 2 * len(bencher.to_bmf(runs[:1]))


def test_bad_input_is_one_line_with_status_2(tmp_path, capsys):
    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("export: ") and "no cells.jsonl" in err and "\n" not in err
