"""Typed records (harness.core.record.CellRecord, harness.core.record_codec): every committed sample run reads
through the types and writes back exactly what its JSON lines hold, and a misspelt, mistyped or dropped field is
refused with an error naming it."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from harness.core.record import OPTIONAL_FIELDS, RECORD_FIELDS, CellRecord, Latency
from harness.core.record_codec import (
    RecordError,
    record_from_dict,
    record_from_json,
    record_to_dict,
    record_to_json,
)
from harness.core.results_dir import CELLS_FILE, RecordWriter, read_record_dicts, read_records

SAMPLES = Path(__file__).resolve().parents[1] / "results" / "samples"
SAMPLE_RUNS = sorted(p.parent for p in SAMPLES.glob(f"*/{CELLS_FILE}"))
#: the sample written by today's default run (every record current-schema, as the runner writes it)
DEFAULT_RUN = SAMPLES / "2026-11-25-cpu-2core-default"


def _lines(run_dir: Path) -> list[str]:
    return [line for line in (run_dir / CELLS_FILE).read_text(encoding="utf-8").splitlines() if line.strip()]


def _first_ok(run_dir: Path = DEFAULT_RUN) -> dict:
    return next(r for r in read_record_dicts(run_dir) if r["status"] == "ok" and r["latency_ms"])


def test_the_samples_are_there():
    # the round trip below is only as good as the runs it reads: v1 and v2 records, old and new section shapes
    assert len(SAMPLE_RUNS) >= 9
    assert DEFAULT_RUN in SAMPLE_RUNS


@pytest.mark.parametrize("run_dir", SAMPLE_RUNS, ids=lambda p: p.name)
def test_every_sample_record_round_trips_field_for_field(run_dir):
    expected = read_record_dicts(run_dir)
    typed = read_records(run_dir)
    assert len(typed) == len(expected) == len(_lines(run_dir))
    for want, rec in zip(expected, typed, strict=True):
        assert isinstance(rec, CellRecord)
        got = record_to_dict(rec)
        assert got == want
        # key order too, at every depth: json.dumps keeps it
        assert json.dumps(got) == json.dumps(want)
        assert record_to_dict(record_from_json(record_to_json(rec))) == want


def test_the_default_run_is_written_back_byte_for_byte(tmp_path):
    # what a default run writes: its records, read as the history reads them and written again by RecordWriter
    writer = RecordWriter(tmp_path)
    for rec in read_records(DEFAULT_RUN):
        writer.write(rec)
    assert (tmp_path / CELLS_FILE).read_bytes() == (DEFAULT_RUN / CELLS_FILE).read_bytes()
    assert [record_to_json(r) for r in read_records(DEFAULT_RUN)] == _lines(DEFAULT_RUN)


def test_sections_are_typed_and_read_as_attributes():
    rec = record_from_dict(_first_ok())
    assert isinstance(rec.latency_ms, Latency)
    assert rec.latency_ms.p50 == _first_ok()["latency_ms"]["p50"]
    assert (
        rec.memory is not None and rec.memory.host_peak_rss_mib == _first_ok()["memory"]["host_peak_rss_mib"]
    )


def test_an_older_latency_keeps_its_keys():
    # records of 2026-11-22-cpu-2core-v2 predate p50_ci/scatter/unstable: written back, no default appears
    old = next(r for r in read_record_dicts(SAMPLES / "2026-11-22-cpu-2core-v2") if r["latency_ms"])
    assert "p50_ci" not in old["latency_ms"]
    assert record_to_dict(record_from_dict(old))["latency_ms"] == old["latency_ms"]
    # while a Latency built now carries every key
    assert "p50_ci" in record_to_dict(record_from_dict(_first_ok()))["latency_ms"]


def test_the_record_fields_are_the_cell_record_fields_in_order():
    names = [f for f in CellRecord.__dataclass_fields__]
    assert tuple(names) == RECORD_FIELDS + OPTIONAL_FIELDS
    assert list(_first_ok()) == list(RECORD_FIELDS)


@pytest.mark.parametrize("field", ["synthetic", "machine"])
def test_an_optional_field_is_written_only_when_the_record_carries_it(field):
    value = True if field == "synthetic" else "gpu-box"
    with_it = {**_first_ok(), field: value}
    assert record_to_dict(record_from_dict(with_it)) == with_it
    assert field not in record_to_dict(record_from_dict(_first_ok()))
    explicit_null = {**_first_ok(), field: None}  # present though null: kept as it was
    assert record_to_dict(record_from_dict(explicit_null)) == explicit_null


# ---- the verdicts the other way -------------------------------------------------------------------------------


def test_a_misspelt_field_is_rejected_naming_it():
    rec = _first_ok()
    rec["laytency_ms"] = rec.pop("latency_ms")
    with pytest.raises(RecordError, match=r"unknown fields \['laytency_ms'\]"):
        record_from_dict(rec)


def test_a_misspelt_field_cannot_be_set_on_a_record_or_its_sections():
    # slots: a misspelt assignment fails where it is made, never a figure silently left out of the written line
    rec = record_from_dict(_first_ok())
    with pytest.raises(AttributeError, match="throughput_ipss"):
        rec.throughput_ipss = 12.0  # type: ignore[attr-defined]
    assert rec.memory is not None
    with pytest.raises(AttributeError, match="host_peak_rs_mib"):
        rec.memory.host_peak_rs_mib = 1.0  # type: ignore[attr-defined]
    rec.throughput_ips = 12.0  # the field itself is assignable
    assert record_to_dict(rec)["throughput_ips"] == 12.0


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("batch", "1", r"field batch = '1' is not int"),
        ("batch", True, r"field batch = True is not int"),  # a bool is not a number here
        ("dynamic", 0, r"field dynamic = 0 is not bool"),
        ("samples_ms", [1.0, "2"], r"field samples_ms"),
        ("null_reasons", {"latency_ms": 3}, r"field null_reasons"),
        ("timing", [1], r"field timing"),
    ],
)
def test_a_wrong_type_is_rejected(field, value, match, tmp_path):
    rec = {**_first_ok(), field: value}
    with pytest.raises(RecordError, match=match):
        record_from_dict(rec)
    typed = record_from_dict(_first_ok())
    setattr(typed, field, value)  # what a stage with a bug would do: the writer refuses it and writes nothing
    with pytest.raises(RecordError, match=match):
        RecordWriter(tmp_path).write(typed)
    assert not (tmp_path / CELLS_FILE).exists() or (tmp_path / CELLS_FILE).read_bytes() == b""
    assert (
        RecordWriter(tmp_path).write(record_from_dict(_first_ok())).batch == 1
    )  # the writer writes a good one


def test_a_section_key_misspelt_or_mistyped_is_rejected():
    rec = _first_ok()
    bad = copy.deepcopy(rec)
    bad["latency_ms"]["p5O"] = bad["latency_ms"].pop("p50")
    with pytest.raises(RecordError, match=r"latency_ms: unknown keys \['p5O'\]"):
        record_from_dict(bad)
    bad = copy.deepcopy(rec)
    bad["memory"]["host_peak_rss_mib"] = "big"
    with pytest.raises(RecordError, match=r"memory\.host_peak_rss_mib: 'big' is not"):
        record_from_dict(bad)
    bad = copy.deepcopy(rec)
    bad["latency_ms"] = {
        "p90": 2.0,
        "p50": 1.0,
    }  # out of Latency's order: it could not be written back as read
    with pytest.raises(RecordError, match=r"latency_ms: keys \['p90', 'p50'\] are not in Latency's order"):
        record_from_dict(bad)


def test_a_partial_section_keeps_only_its_keys():
    rec = {**_first_ok(), "latency_ms": {"p50": 1.0, "timing_scope": "model"}}
    typed = record_from_dict(rec)
    assert typed.latency_ms is not None and typed.latency_ms.p50 == 1.0 and typed.latency_ms.rounds is None
    assert record_to_dict(typed)["latency_ms"] == {"p50": 1.0, "timing_scope": "model"}


def test_a_dropped_field_is_detected_when_written():
    rec = _first_ok()
    del rec["energy"]
    with pytest.raises(RecordError, match=r"missing fields \['energy'\]"):
        record_from_dict(rec, migrate=False)
    with pytest.raises(TypeError, match="energy"):  # a CellRecord is never without a field
        CellRecord(**rec)


def test_a_dropped_field_read_back_is_null_with_the_migrations_reason():
    # the reader's side: a v2 record written before a field existed gets it as null with the reason
    rec = _first_ok()
    del rec["energy"]
    typed = record_from_dict(rec)
    assert typed.energy is None
    assert "energy" in typed.null_reasons


def test_an_unknown_schema_version_is_refused():
    with pytest.raises(ValueError, match="schema_version 99"):
        record_from_dict({**_first_ok(), "schema_version": 99})


def test_a_line_that_is_not_json_is_a_record_error():
    with pytest.raises(RecordError, match="not JSON"):
        record_from_json('{"run_id": ')
    with pytest.raises(RecordError, match="JSON object"):
        record_from_json("[1, 2]")


def test_read_records_names_and_skips_the_line_of_a_bad_record(tmp_path):
    lines = _lines(DEFAULT_RUN)[:3]
    bad = json.loads(lines[1])
    bad["statuz"] = bad.pop("status")
    lines[1] = json.dumps(bad)
    (tmp_path / CELLS_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")
    skipped: list = []
    assert len(read_records(tmp_path, skipped=skipped)) == 2  # the rest is read
    (line,) = skipped
    assert line.line == 2 and "unknown fields ['statuz']" in line.why
    assert line.text().endswith("cells.jsonl:2: " + line.why + "; line skipped")
    assert len(read_record_dicts(tmp_path)) == 3  # the JSON reader does not validate fields
