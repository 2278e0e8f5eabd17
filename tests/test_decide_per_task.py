"""Every use case answered per task (harness.decide.tasks), on hand-made records (synthetic: no figure here was
measured): a fast classifier never answers for a detector, the e2e and raw heads of one task compete and the pick
says which head, and a run of one task decides as it always did."""

from __future__ import annotations

from pathlib import Path

from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.record import CellRecord, Memory, new_record
from harness.core.results_dir import Run
from harness.decide.decision import decide
from harness.decide.index import index_runs
from harness.decide.picks import Constraints
from harness.measure.stats import latency_from_samples
from harness.report.decision import decision_rows

SCENARIO_CASES = ("camera", "camera-capacity", "server", "offline")


def steady(center: float, n: int = 120) -> list[float]:
    return [round(center * (1 + 0.01 * (2 * k / (n - 1) - 1)), 5) for k in range(n)]


def cell(task: str, backend: str, e2e: float, side: int = 640, head: str = "e2e") -> CellRecord:
    c = Cell("n", task, head, backend, "cpu", Shape(side, side))
    r = new_record("synthetic", c, "random-init:0")
    r.status = "ok"
    r.samples_ms = [0.7 * x for x in steady(e2e)[:30]]
    r.latency_ms = latency_from_samples(r.samples_ms, "model")
    r.latency_e2e_ms = latency_from_samples(steady(e2e), "end-to-end")
    r.memory = Memory(host_peak_rss_mib=200.0 if task == "cls" else 300.0)
    return r


def decided(*records: CellRecord):
    idx = index_runs(
        [Run(Path("/synthetic"), "synthetic", {"host": {"cpu_model": "AMD EPYC"}}, list(records))]
    )
    return decide(idx, Constraints()), idx


def picked(entry: dict) -> list[str]:
    return [p["configuration"]["cell_id"] for p in [entry["pick"], *entry.get("tied_with", [])] if p]


def test_a_fast_classifier_never_answers_for_a_detector():
    cls_fast = cell("cls", "onnxruntime", 2.0, side=224)
    detect = cell("detect", "onnxruntime", 20.0)
    d, idx = decided(cls_fast, detect)
    by_task: dict[str, dict[str, dict]] = {}
    for e in d.entries:
        by_task.setdefault(e["task"], {})[e["use_case"]] = e
    assert set(by_task) == {"detect", "cls"}
    for key in ("camera", "server", "offline", "lowest-memory"):
        assert picked(by_task["detect"][key]) == [detect.cell_id], key
        assert picked(by_task["cls"][key]) == [cls_fast.cell_id], key
        assert by_task["detect"][key]["title"].endswith(" · detect")
    # the first screen: one row per use case and task, each naming its task, detect first
    rows = decision_rows(list(d.answers), idx)
    camera = [r.title for r in rows if r.key == "camera"]
    assert camera == ["Camera, 30 FPS · detect", "Camera, 30 FPS · cls"]
    assert any("yolo26n-cls 224 fp32" in a.figure for r in rows if r.key == "offline" for a in r.answers)


def test_a_run_of_one_task_decides_as_before_and_both_heads_compete():
    e2e, raw = cell("detect", "openvino", 20.0), cell("detect", "openvino", 12.0, head="raw")
    d, _ = decided(e2e, raw)
    entries = [e for e in d.entries if e["use_case"] in SCENARIO_CASES]
    assert {e["task"] for e in entries} == {"detect"}
    assert all(not e["title"].endswith(" · detect") for e in entries)  # one task: the page as it was
    offline = next(e for e in entries if e["use_case"] == "offline")
    assert picked(offline) == [raw.cell_id]  # the heads compete: the faster head wins
    answer = next(a for a in d.answers if a.key == "offline")
    assert "yolo26n raw 640 fp32" in answer.winner.figure  # and the pick says which head
    # the other way: one head only, the pick's words carry no head
    d, _ = decided(e2e)
    answer = next(a for a in d.answers if a.key == "offline")
    assert answer.winner.figure.startswith("yolo26n 640 fp32 · ")
