"""The committed samples' reports (results/samples/*/report, rendered by this code): no front or pick shows a COCO
figure above the published one of its size at 640, and decision.json's latency-bound picks carry their accuracy
source and the size ladder. The check itself is shown failing on a figure above the published one."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness.accuracy.published import table
from harness.decide.accuracy import PUBLISHED_MAP_640

SAMPLES = Path(__file__).resolve().parent.parent / "results" / "samples"
REPORTS = sorted(p for p in SAMPLES.glob("*/report") if (p / "decision.json").is_file())
SOURCES = {"measured", "published, not measured here", "not known"}
ROW = re.compile(
    r'<tr data-cell-id="yolo26(?P<size>[nslmx])-detect-(?P<head>e2e|raw)-[^"]*">(?P<row>.*?)</tr>', re.S
)
COCO = re.compile(r"COCO mAP50-95 (?:≈ )?(\d+(?:\.\d+)?)")


def above_published(html: str) -> list[str]:
    """Every table row of a configuration whose COCO figure is above the published one of its size and head."""
    out = []
    for m in ROW.finditer(html):
        top = PUBLISHED_MAP_640[m["head"]][m["size"]]
        out += [
            f"yolo26{m['size']} {m['head']}: {v}" for v in COCO.findall(m["row"]) if float(v) > top + 1e-9
        ]
    return out


def test_the_check_finds_a_coco_figure_above_the_published_one():
    ok = '<tr data-cell-id="yolo26n-detect-e2e-openvino-cpu-640x640-b1-fp32"><td>COCO mAP50-95 40.1</td></tr>'
    bad = '<tr data-cell-id="yolo26n-detect-e2e-openvino-cpu-320x320-b1-fp32"><td>COCO mAP50-95 ≈ 44.1</td></tr>'
    assert above_published(ok) == [] and above_published(ok + bad) == ["yolo26n e2e: 44.1"]


@pytest.mark.parametrize("report", REPORTS, ids=[p.parent.name for p in REPORTS])
def test_no_sample_shows_a_coco_figure_above_the_published_one(report):
    page = report / "index.html"  # superseded samples keep decision.json and summaries, not the rendered page
    assert not page.is_file() or above_published(page.read_text()) == []
    for entry in json.loads((report / "decision.json").read_text())["decisions"]:
        for pick in [entry.get("pick"), *(entry.get("tied_with") or []), entry.get("fastest")]:
            if not pick or pick.get("accuracy_source") != "published, not measured here":
                continue
            assert published_pick_problem(pick) is None, (entry["use_case"], pick["configuration"])


def published_pick_problem(pick: dict) -> str | None:
    """Why a pick labelled "published, not measured here" is not its own task's published figure at the shape and
    precision it was published at (a classifier's ImageNet top-1 at 224, an OBB model's DOTA figure at 1024), or None."""
    cfg = pick["configuration"]
    published = table(cfg.get("task", "detect"))
    if published is None:
        return f"no published table for task {cfg.get('task')}"
    if pick["accuracy"] != published.figure(cfg["head"], cfg["size"]):
        return f"{pick['accuracy']} is not the published {published.figure(cfg['head'], cfg['size'])}"
    if cfg["shape"] != str(published.side) or cfg["precision"] != "fp32":
        return f"published at {published.side} fp32, shown at {cfg['shape']} {cfg['precision']}"
    return None


def test_the_pick_check_reads_each_task_s_own_table():
    cls = {"size": "n", "task": "cls", "head": "raw", "shape": "224", "precision": "fp32"}
    det = {"size": "n", "task": "detect", "head": "e2e", "shape": "640", "precision": "fp32"}
    assert published_pick_problem({"configuration": cls, "accuracy": 71.4}) is None
    assert published_pick_problem({"configuration": det, "accuracy": 40.1}) is None
    # the other way: a classifier shown with the detector's figure, a detector's figure at a shape never published
    assert published_pick_problem({"configuration": cls, "accuracy": 40.1}) is not None
    assert published_pick_problem({"configuration": {**det, "shape": "320"}, "accuracy": 40.1}) is not None


@pytest.mark.parametrize("report", REPORTS, ids=[p.parent.name for p in REPORTS])
def test_sample_picks_carry_their_accuracy_source_and_the_ladder(report):
    entries = json.loads((report / "decision.json").read_text())["decisions"]
    bound = [e for e in entries if e["use_case"] in ("camera", "server")]
    assert bound
    for e in bound:
        assert "ladder" in e and "largest_fitting" in e and "fastest" in e
        if e["pick"]:
            assert e["pick"]["accuracy_source"] in SOURCES
    for e in entries:
        if e["pick"] and e["use_case"] == "camera-capacity":
            assert e["pick"]["accuracy_source"] in SOURCES
