"""The report's coverage section (harness.report.coverage): what a planned night measured, and how old the rest
is. Runs and history here are synthetic."""

from __future__ import annotations

from harness.decide.index import index_runs
from harness.decide.load import load_runs
from harness.history import synthetic
from harness.report.coverage import night_coverage
from harness.report.render import render_report

ORT = synthetic.cell("onnxruntime", device="cpu")
OV = synthetic.cell("openvino", device="cpu")
OLD, NEVER = (
    "yolo26s-detect-e2e-onnxruntime-cpu-640x640-b1-fp32",
    "yolo26m-detect-e2e-onnxruntime-cpu-640x640-b1-fp32",
)
NOW = "2026-12-20T01:23:00+00:00"


def planned_run(tmp_path, plan: dict | None):
    env = synthetic.make_env("night-20", NOW)
    if plan is not None:
        env["plan"] = plan
    records = [synthetic.make_record("night-20", ORT, samples_ms=[5.0] * 20),
               synthetic.make_record("night-20", OV, status="skipped")]  # fmt: skip
    return synthetic.write_run(tmp_path / "results", env, records)


PLAN = {
    "budget": "6h",
    "profile_cells": 4,
    "period": "the profile is covered every 2 nights at 6 h 00 min",
    "selected_ids": [ORT.id, OV.id],
    "left_out": {"rotation: not in tonight's slice": [OLD, NEVER]},
}


def test_coverage_counts_tonight_and_ages_the_rest(tmp_path):
    run = planned_run(tmp_path, PLAN)
    indexes = index_runs(load_runs([run]))
    (cv,) = night_coverage(indexes, {"last_measured": {OLD: "2026-12-08T01:23:00+00:00"}})
    assert (cv.measured, cv.skips, cv.left_out, cv.profile_cells) == (1, 1, 2, 4)
    assert cv.by_date == [("never", 1), ("2026-12-08", 1)]
    assert cv.oldest_age == "never measured: 1 cells"
    (cv,) = night_coverage(
        indexes, {"last_measured": {OLD: "2026-12-08T01:23:00+00:00", NEVER: "2026-12-18T01:23:00+00:00"}}
    )
    assert cv.oldest_age == "12 days (2026-12-08)"
    # the other way: without a history the dates are unknown, and said so
    (cv,) = night_coverage(indexes, None)
    assert cv.oldest_age.startswith("not known") and cv.history_note


def test_a_run_without_a_plan_has_no_coverage_section(tmp_path):
    assert night_coverage(index_runs(load_runs([planned_run(tmp_path, None)])), None) == []


def test_the_report_says_what_the_night_covered(tmp_path):
    run = planned_run(tmp_path, PLAN)
    render_report([run], tmp_path / "reports", {"last_measured": {OLD: "2026-12-08T01:23:00+00:00"}})
    html = next((tmp_path / "reports").glob("*/index.html")).read_text()
    assert "What the night covered" in html
    assert "1 of the profile&#39;s 4 cells measured tonight" in html or "1 of the profile's 4 cells" in html


def test_history_gives_each_cell_the_last_night_that_measured_it(tmp_path):
    from harness.history import report_data
    from harness.history.store import import_run_dir

    db = tmp_path / "history.sqlite"
    for run_id, at, cells in (
        ("night-1", "2026-12-01T01:23:00+00:00", {ORT: "ok", OV: "ok"}),
        ("night-2", "2026-12-02T01:23:00+00:00", {ORT: "ok", OV: "skipped"}),
    ):
        records = [
            synthetic.make_record(run_id, c, status=st, samples_ms=[5.0] * 20) for c, st in cells.items()
        ]
        import_run_dir(db, synthetic.write_run(tmp_path / "results", synthetic.make_env(run_id, at), records))
    last = report_data(db, "night-2")["last_measured"]
    assert last[ORT.id].startswith("2026-12-02")
    assert last[OV.id].startswith("2026-12-01")  # the other way: a skip on night 2 is not a measurement
