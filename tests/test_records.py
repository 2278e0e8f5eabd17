import json

import numpy as np
import pytest

from harness import SCHEMA_VERSION
from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.record import new_record
from harness.core.record_codec import record_to_dict
from harness.core.results_dir import RecordWriter, read_records
from harness.measure.stats import latency_from_samples


def test_latency_percentiles_match_numpy():
    rng = np.random.default_rng(0)
    samples = list(rng.lognormal(3, 0.2, 101))
    lat = latency_from_samples(samples, "model")
    for q, v in ((50, lat.p50), (90, lat.p90), (99, lat.p99)):
        assert v == pytest.approx(np.percentile(samples, q))
    assert lat.min == min(samples) and lat.max == max(samples) and lat.rounds == 101
    assert lat.stdev == pytest.approx(np.std(samples, ddof=1))


def _rec(run_id="r1"):
    rec = new_record(
        run_id, Cell("n", "detect", "e2e", "onnxruntime", "cpu", Shape(320, 320)), "random-init:0"
    )
    rec.status = "ok"
    return rec


def test_writer_appends_one_line_per_record_and_reader_round_trips(tmp_path):
    w = RecordWriter(tmp_path)
    w.write(_rec())
    w.write(_rec())
    recs = read_records(tmp_path)
    assert len(recs) == 2 and recs[0].cell_id == "yolo26n-detect-e2e-onnxruntime-cpu-320x320-b1-fp32"
    assert recs[0].schema_version == SCHEMA_VERSION and recs[0].height == 320


def test_writer_refuses_a_mistyped_field_an_unknown_status_and_a_pending_one(tmp_path):
    w = RecordWriter(tmp_path)
    bad = _rec()
    bad.height = "320"  # type: ignore[assignment]
    with pytest.raises(ValueError, match="field height = '320' is not"):
        w.write(bad)
    bad = _rec()
    bad.status = "fine"
    with pytest.raises(ValueError, match="unknown status 'fine'"):
        w.write(bad)
    with pytest.raises(ValueError, match="unknown status 'pending'"):  # no stage decided: never written
        w.write(new_record("r1", Cell("n", "detect", "e2e", "onnxruntime", "cpu", Shape(320, 320)), "x"))
    assert not (tmp_path / "cells.jsonl").exists()
    w.write(_rec())
    assert len(read_records(tmp_path)) == 1


def test_reader_keeps_records_before_a_torn_last_line(tmp_path):
    w = RecordWriter(tmp_path)
    w.write(_rec())
    with open(tmp_path / "cells.jsonl", "a") as f:
        f.write('{"schema_version": 1, "cell_')  # a run killed mid-write
    assert len(read_records(tmp_path)) == 1


def test_reader_refuses_foreign_schema(tmp_path):
    rec = record_to_dict(_rec())
    rec["schema_version"] = 99
    (tmp_path / "cells.jsonl").write_text(json.dumps(rec) + "\n")
    with pytest.raises(
        ValueError, match=r"cells\.jsonl:1: record schema_version 99 is not one this harness reads"
    ):
        read_records(tmp_path)
