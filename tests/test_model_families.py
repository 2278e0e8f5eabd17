"""The model family axis: a YOLO11 or YOLOv8 cell beside YOLO26's (ids, records, profiles, timing groups, head
selection, paired ratios), and a YOLO26-only run exactly as before families existed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.core.axes import SelectionError, Shape, parse_families
from harness.core.cell import Cell
from harness.core.pairing import drop_cross_session_pairs
from harness.core.record import new_record
from harness.core.record_codec import RecordError, record_from_dict, record_to_dict
from harness.core.results_dir import read_record_dicts
from harness.execute import workload
from harness.execute.state import Attempt, AttemptState
from harness.execute.usecase import pair_e2e, wall_blocks
from harness.measure.interleave import Interleaved, RoundsPolicy, Timing
from harness.plan.matrix import Selection, build
from harness.yolo import heads

SAMPLE = Path(__file__).resolve().parents[1] / "results" / "samples" / "2026-11-28-cpu-2core-default-v2"
S640 = Shape(640, 640)


def cell(
    backend: str, family: str = "yolo26", head: str | None = None, size: str = "n", precision="fp32"
) -> Cell:
    head = head or ("e2e" if family == "yolo26" else "raw")
    return Cell(size, "detect", head, backend, "cpu", S640, 1, precision, family)


# -- the cell and its record --------------------------------------------------------------------------------------
def test_a_yolo11_cell_reads_like_the_cell_and_a_yolo26_cell_is_unchanged():
    y = Cell("n", "detect", "e2e", "onnxruntime", "cpu", S640)
    assert y.id == "yolo26n-detect-e2e-onnxruntime-cpu-640x640-b1-fp32" and "family" not in y.to_dict()
    o = cell("onnxruntime", "yolo11")
    assert o.id == "yolo11n-detect-raw-onnxruntime-cpu-640x640-b1-fp32" and o.model == "yolo11n"
    assert Cell.from_dict(o.to_dict()) == o and Cell.from_dict(y.to_dict()) == y
    assert (y.gflops, o.gflops, cell("x", "yolov8").gflops) == (5.4, 6.5, 8.7)
    with pytest.raises(SelectionError, match="one-to-many head only"):
        cell("onnxruntime", "yolo11", head="e2e")
    with pytest.raises(SelectionError, match="valid families"):
        cell("onnxruntime", "yolo99")


def test_family_is_written_only_on_another_familys_record_and_absent_reads_yolo26():
    o = new_record("r", cell("onnxruntime", "yolo11"), "random-init:0")
    o.status, o.reason = "skipped", "synthetic"
    line = record_to_dict(o)
    assert line["family"] == "yolo11" and record_from_dict(line).family == "yolo11"
    y = new_record("r", cell("onnxruntime"), "random-init:0")
    assert "family" not in record_to_dict(y)
    # a record written before families: YOLO26, and written back byte for byte as it was
    old = next(iter(read_record_dicts(SAMPLE)))
    assert "family" not in old and record_from_dict(old).family == "yolo26"
    assert json.dumps(record_to_dict(record_from_dict(old))) == json.dumps(old)
    with pytest.raises(RecordError, match="field family = 'yolo99'"):
        record_from_dict({**line, "family": "yolo99"})


# -- the plan -------------------------------------------------------------------------------------------------------
def test_the_families_profile_pairs_yolo26_and_yolo11_on_every_cpu_backend():
    planned = build("families", Selection())
    ids = {p.cell.id for p in planned}
    assert len(planned) == 16 and not any(p.excluded for p in planned)
    for size in "ns":
        for b in ("torch-eager", "onnxruntime", "openvino", "executorch-xnnpack"):
            assert f"yolo26{size}-detect-e2e-{b}-cpu-640x640-b1-fp32" in ids
            assert f"yolo11{size}-detect-raw-{b}-cpu-640x640-b1-fp32" in ids


def test_families_option_adds_a_family_beside_yolo26_and_the_default_holds_yolo26_alone():
    assert parse_families("yolo11") == ("yolo26", "yolo11")
    assert parse_families("all") == ("yolo26", "yolo11", "yolov8")
    with pytest.raises(SelectionError, match="--families: unknown 'yolo5'"):
        parse_families("yolo5")
    quick = build("quick", Selection(families=parse_families("yolov8")))
    assert {p.cell.family for p in quick} == {"yolo26", "yolov8"}
    assert {p.cell.head for p in quick if p.cell.family == "yolov8"} == {"raw"}  # the family's only head
    assert {p.cell.family for p in build("default", Selection())} == {"yolo26"}


# -- timing groups --------------------------------------------------------------------------------------------------
def test_a_yolo26_only_run_groups_as_before_and_another_family_joins_its_yolo26_cells():
    alone = [
        cell("onnxruntime"),
        cell("openvino"),
        cell("onnxruntime", head="raw"),
        cell("onnxruntime", size="s"),
    ]
    groups = workload.group(alone)
    assert [len(g) for g in groups] == [2, 1, 1]  # the heads and sizes apart, as they always were
    assert workload.group_label(groups[0]) == "yolo26n-detect-e2e-cpu-640x640-b1"
    mixed = [
        *alone,
        cell("onnxruntime", "yolo11"),
        cell("openvino", "yolo11"),
        cell("onnxruntime", "yolo11", size="s"),
    ]
    groups = workload.group(mixed)
    assert [len(g) for g in groups] == [5, 2]  # per size: both families, both heads of YOLO26
    assert workload.group_label(groups[0]) == "yolo26n+yolo11n-detect-e2e+raw-cpu-640x640-b1"
    assert workload.mates_of(mixed[4], mixed) == groups[0]
    labels = workload.group_labels(mixed)
    assert len(set(labels.values())) == 2 and labels[mixed[4].id] == labels[mixed[0].id]


def _state(c: Cell, tmp_path: Path, timed: Interleaved) -> AttemptState:
    s = AttemptState(Attempt(c, c.id), new_record("r", c, "random-init:0"), tmp_path / "log", tmp_path)
    s.timed = timed
    return s


def _timing(key: str, ms: float, trials: int = 10) -> Timing:
    t = Timing(key, 3)
    t.blocks = [[ms, ms * 1.01, ms * 0.99] for _ in range(trials)]
    t.samples = [x for b in t.blocks for x in b]
    return t


def test_each_family_is_referenced_to_its_own_torch_eager_and_paired_with_the_other(tmp_path):
    cells = [
        cell("torch-eager"),
        cell("onnxruntime"),
        cell("torch-eager", "yolo11"),
        cell("onnxruntime", "yolo11"),
    ]
    ms = [40.0, 10.0, 50.0, 13.0]
    timed = Interleaved(
        {c.id: _timing(c.id, m) for c, m in zip(cells, ms, strict=True)},
        [[]] * 10,
        "synthetic",
        1.0,
        RoundsPolicy(),
    )
    states = [_state(c, tmp_path, timed) for c in cells]
    workload.set_paired(states, states)
    y26, y11 = states[1].rec.paired, states[3].rec.paired
    assert y26["reference"] == cells[0].id and y26["ratio"] == pytest.approx(10.0 / 40.0)
    assert y11["reference"] == cells[2].id and y11["ratio"] == pytest.approx(13.0 / 50.0)
    assert y11["others"][cells[1].id]["ratio"] == pytest.approx(13.0 / 10.0)
    assert y26["others"][cells[3].id]["ratio"] == pytest.approx(10.0 / 13.0)


def test_end_to_end_rounds_pair_by_their_whole_calls_and_a_cross_session_entry_goes(tmp_path):
    # the interleaved timing holds pair times (a whole call and a staged one); the ratio is of the whole calls
    a, b = cell("onnxruntime"), cell("onnxruntime", "yolo11")
    ta, tb = _timing(a.id, 50.0, 8), _timing(b.id, 70.0, 8)
    ta.blocks[2] = None  # a trial one of them sat out
    timed = Interleaved({a.id: ta, b.id: tb}, [[]] * 8, "synthetic", 1.0, RoundsPolicy())
    sa, sb = _state(a, tmp_path, timed), _state(b, tmp_path, timed)
    walls = {a.id: [20.0, 20.2, 19.8] * 7, b.id: [30.0, 30.3, 29.7] * 8}
    for s in (sa, sb):
        s.e2e = type("E2E", (), {"walls": walls[s.attempt.cell_id]})()
    assert wall_blocks(ta, walls[a.id]).blocks[2] is None and len(wall_blocks(ta, walls[a.id]).blocks[3]) == 3
    pair_e2e([sa, sb], timed)
    got = sa.e2e_paired[b.id]
    assert got["ratio"] == pytest.approx(20.0 / 30.0) and got["trials"] == 7
    assert sb.e2e_paired[a.id]["ratio"] == pytest.approx(30.0 / 20.0)
    # read back with the partner re-timed in another session: the entry goes, said why
    ra, rb = sa.rec, sb.rec
    ra.paired_e2e = {"others": sa.e2e_paired}
    ra.timing, rb.timing = {"session": "one"}, {"session": "another"}
    drop_cross_session_pairs([ra, rb])
    assert ra.paired_e2e is None and b.id in ra.null_reasons[f"paired_e2e.others.{b.id}"]


# -- head selection -------------------------------------------------------------------------------------------------
def test_heads_are_selected_through_the_api_of_the_installed_ultralytics():
    assert heads.select("e2e", version="8.4.190").export_args == {"nms": False}
    assert heads.select("raw", version="8.4.142").export_args == {"nms": None}
    # before 8.4.142 the head was the end2end argument's (nms then meant NMS inside the export)
    assert heads.select("e2e", version="8.4.141").export_args == {"end2end": True}
    assert heads.select("raw", version="8.4.30").export_args == {"end2end": False}
    yolo11 = heads.select("raw", "yolo11", version="8.4.190").record()
    assert yolo11["export_args"] == {"nms": None} and "one-to-many head only" in yolo11["rule"]
    assert heads.select("e2e").record()["ultralytics"] == heads.ultralytics_version()


def test_a_users_yolo11_weights_are_read_from_weights_dir_and_a_missing_one_is_named(tmp_path):
    from harness.yolo.models import ModelSource, WeightsError

    src = ModelSource("n", "detect", tmp_path, family="yolo11")
    assert src.stem == "yolo11n" and src.weights_file() == tmp_path / "yolo11n.pt"
    with pytest.raises(
        WeightsError, match=r"yolo11n\.pt not found \(expected yolo11n\.pt in --weights-dir\)"
    ):
        src.check()
    assert ModelSource("s", "seg", tmp_path, family="yolov8").stem == "yolov8s-seg"
    assert ModelSource("n", "detect", tmp_path).stem == "yolo26n"  # YOLO26's as before


def test_a_run_pairing_the_families_builds_yolo26_from_its_yaml_as_yolo11_not_the_standin():
    from harness.pytest_plugin.options import use_standin

    # the stand-in has the generated dataset's 5 classes; YOLO11 from its YAML has COCO's 80: same head width only
    # where YOLO26 is built the same way
    assert use_standin(False, build("families", Selection())) is False
    assert use_standin(False, build("quick", Selection())) is True  # a YOLO26 run as before
    assert use_standin(True, build("quick", Selection())) is False  # --no-standin
