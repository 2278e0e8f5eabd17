"""The migration answer ("Moving from YOLO11", harness.decide.migration) on hand-made records (synthetic: every
figure injected, far above any noise): YOLO26 faster end to end reads "move", slower reads "stay", intervals that
hold 1 read tied, backends that disagree read "it depends"; the answer shows only where a run holds YOLO11, and the
other use cases never pick a YOLO11 cell however fast it is."""

from __future__ import annotations

import pytest

from harness.decide.decision import decide
from harness.decide.picks import Constraints
from harness.report.decision import decision_rows
from tests.family_records import indexes, pair, record

KEY = "from-yolo11"


def migration(*records):
    idx = indexes(*records)
    d = decide(idx, Constraints())
    entries = [e for e in d.entries if e["use_case"] == KEY]
    answers = [a for a in d.answers if a.key == KEY]
    return d, idx, entries, answers


def test_yolo26_faster_end_to_end_on_every_backend_reads_move():
    recs = [*pair("onnxruntime", 20.0, 26.0, 22.0, 31.0), *pair("openvino", 18.0, 25.0, 20.0, 30.0)]
    _, idx, (entry,), (answer,) = migration(*recs)
    assert entry["verdict"] == "move" and entry["counts"] == {"faster": 2, "slower": 0, "tied": 0}
    assert answer.winner.backend == "YOLO26" and answer.runner_up.backend == "YOLO11"
    assert "faster end to end on 2 of 2 pairs" in answer.winner.figure
    one = entry["pairs"][0]
    assert one["relation"] == "faster"
    assert one["e2e"]["ratio"] == pytest.approx(22.0 / 31.0) and one["e2e"]["paired"]
    assert one["model_only"]["ratio"] == pytest.approx(20.0 / 26.0)
    # the published COCO figures at 640, fp32: YOLO26n's e2e head 40.1 against YOLO11n's 39.5
    assert one["accuracy"]["difference"] == pytest.approx(0.6)
    assert "COCO mAP50-95 40.1 vs 39.5: +0.6 (published" in answer.rows[0]
    # on the first screen, first, with one line per pair under the pick
    rows = decision_rows(list(decide(idx, Constraints()).answers), idx)
    assert rows[0].key == KEY and rows[0].title == "Moving from YOLO11"
    assert rows[0].answers[0].state == "pick" and len(rows[0].answers[0].lines) == 2


def test_yolo26_slower_end_to_end_reads_stay_even_where_model_only_says_faster():
    # model-only YOLO26 is faster (as published), but end to end it is slower on this backend: the e2e decides
    recs = pair("onnxruntime", 20.0, 26.0, 40.0, 30.0)
    _, _, (entry,), (answer,) = migration(*recs)
    assert entry["verdict"] == "stay"
    assert entry["pairs"][0]["relation"] == "slower"
    assert entry["pairs"][0]["model_only"]["ratio"] < 1  # beside it, the other way
    assert answer.winner.backend == "YOLO11"
    assert "YOLO26 slower end to end on 1 of 1 pairs" in answer.winner.figure


def test_intervals_that_hold_one_are_tied_and_disagreeing_backends_depend():
    tied = pair("onnxruntime", 20.0, 20.2, 30.0, 30.3, half_width=0.05)
    _, _, (entry,), (answer,) = migration(*tied)
    assert entry["verdict"] == "tied" and {p.backend for p in answer.tied} == {"YOLO26", "YOLO11"}
    # faster on one backend, tied on the other, slower on none: YOLO26, the tie said
    some = [
        *pair("onnxruntime", 20.0, 26.0, 22.0, 31.0),
        *pair("openvino", 20.0, 20.2, 30.0, 30.3, half_width=0.05),
    ]
    _, _, (entry,), (answer,) = migration(*some)
    assert entry["verdict"] == "move" and answer.winner.backend == "YOLO26"
    assert "faster end to end on 1 of 2 pairs" in answer.winner.figure and "tied on 1" in answer.winner.figure
    mixed = [*pair("onnxruntime", 20.0, 26.0, 22.0, 31.0), *pair("openvino", 20.0, 18.0, 30.0, 24.0)]
    _, _, (entry,), (answer,) = migration(*mixed)
    assert entry["verdict"] == "depends" and answer.winner is None and not answer.tied
    assert "1 faster, 1 slower" in answer.none_reason and len(answer.rows) == 2


def test_pairs_timed_apart_decide_nothing_and_a_lone_family_has_no_pair():
    y, o = pair("onnxruntime", 20.0, 26.0, 22.0, 31.0)
    o.timing = {"mode": "interleaved", "session": "another run"}  # a --resume re-timed it elsewhere
    _, _, (entry,), (answer,) = migration(y, o)
    assert entry["verdict"] is None and entry["pairs"][0]["relation"] == "not known"
    assert entry["pairs"][0]["e2e"]["paired"] is False  # the separate p50s, said so, no interval
    assert "no pair has an end-to-end ratio" in answer.none_reason
    lone = record("yolo11", "onnxruntime", 26.0, 31.0)
    _, _, (entry,), _ = migration(lone, record("yolo26", "openvino", 20.0, 22.0))
    assert entry["verdict"] is None and "beside a YOLO26 cell" in entry["reason"]


def test_no_other_family_no_migration_row_and_yolo11_never_answers_for_yolo26():
    y = record("yolo26", "onnxruntime", 20.0, 22.0)
    d, idx, entries, _ = migration(y)
    assert not entries
    assert all(r.key != KEY for r in decision_rows(list(d.answers), idx))
    # a YOLO11 cell four times as fast: the camera, server and offline picks are still YOLO26's
    fast = record("yolo11", "openvino", 5.0, 6.0)
    d, _, entries, _ = migration(y, fast)
    assert entries  # the migration answer sees it
    for e in d.entries:
        if e["use_case"] in ("camera", "server", "offline", "lowest-memory"):
            named = [p["configuration"]["cell_id"] for p in [e["pick"], *e.get("tied_with", [])] if p]
            assert named == [y.cell_id], e["use_case"]
