"""Decide, then measure the decision, on real suite runs of yolo26n (real exports, real runtimes, MLPerf LoadGen):
the scenario phase (harness.execute.scenario_phase) measures what the first screen's answers show.

Two backends at two shapes, with a frame time (--camera-fps 2) and a server bound (--server-bound-ms 1000) every
cell keeps on a loaded 2-core machine (at --camera-fps 5, yolo26n 640's single-stream p99 passed 200 ms beside a
suite run of the tasks profile, and the camera's pick fell to 320): the most accurate configuration
(640, published COCO) and the fastest (320) differ, so the scenarios run on both and every figure the camera,
cameras, server and offline answers show comes from a scenario or the camera search; and the other way, one
configuration, which every answer names: it is loaded once and each scenario runs once. Which backend wins is the
machine's, so only what is deterministic is asserted (the shapes, the sources, the counts)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.reliability_helpers import suite

SCENARIO_USE_CASES = ("camera", "camera-capacity", "server", "offline")
MEASURED = ("scenario", "search")


def run_suite(tmp_path: Path, cache_dir: Path, run_id: str, *args: str) -> tuple[Path, dict, dict]:
    """The suite run `run_id` (the run directory, env.json, decision.json's entries by use case)."""
    results = tmp_path / "results"
    p = suite(
        "--sizes", "n", "--devices", "cpu", "--precisions", "fp32", "--no-accuracy", "--no-history",
        "--scenario-budget", "900", "--results-dir", str(results), "--cache-dir", str(cache_dir), "--run-id",
        run_id, *args, timeout=1500,
    )  # fmt: skip
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-5000:]
    assert "scenario phase: the decision's answers measured by their scenarios" in out, out[-5000:]
    run = results / run_id
    env = json.loads((run / "env.json").read_text())
    decision = json.loads((results / "reports" / run_id / "decision.json").read_text())
    return run, env, {e["use_case"]: e for e in decision["decisions"]}


def shown(entry: dict) -> list[tuple[str, dict]]:
    """Every configuration an answer shows with its use case's figure."""
    out = [("pick", entry["pick"])] + [("tied", t) for t in entry.get("tied_with") or []]
    out += [(k, entry[k]) for k in ("fastest", "with_margin", "most_cameras") if entry.get(k)]
    return out


def measured_once(run: Path, env: dict) -> list[tuple[str, str]]:
    """(cell, scenario) of each measurement of the phase; each once, each with LoadGen's logs."""
    ran = [(m["cell_id"], name) for m in env["scenario_phase"]["measured"] for name in m["scenarios"]]
    assert len(ran) == len(set(ran)), ran
    for cell_id, name in ran:
        assert (run / "loadgen" / cell_id / name).is_dir(), (cell_id, name)
    return ran


@pytest.mark.slow
@pytest.mark.process
def test_the_scenarios_follow_the_decision_where_the_most_accurate_and_the_fastest_differ(
    tmp_path, cache_dir
):
    run, env, entries = run_suite(
        tmp_path, cache_dir, "differ", "--backends", "onnxruntime,openvino", "--shapes", "320,640",
        "--camera-fps", "2", "--server-bound-ms", "1000",
    )  # fmt: skip
    phase = env["scenario_phase"]
    assert phase["not_measured"] == [], phase["not_measured"]
    camera = entries["camera"]
    # the most accurate configuration keeping the 500 ms frame is a 640 (published COCO), the fastest a 320
    assert camera["pick"]["configuration"]["shape"] == "640", camera["pick"]
    assert camera["pick"]["accuracy_source"].startswith("published")
    assert camera["fastest"]["configuration"]["shape"] == "320", camera.get("fastest")
    for key in SCENARIO_USE_CASES:
        for role, fig in shown(entries[key]):
            assert fig["figure_source"] in MEASURED, (key, role, fig["figure"], fig.get("figure_note"))
    # the cameras: how many the most accurate configuration serves, searched, and the fastest per image searched
    cameras = entries["camera-capacity"]
    assert cameras["pick"]["configuration"]["shape"] == "640" and cameras["pick"]["figure_source"] == "search"
    ran = measured_once(run, env)
    assert "camera-capacity" in {n for c, n in ran if "320x320" in c}, ran
    # the decision's phase ran after the workloads: the cells' own records say where their scenarios went
    records = [json.loads(line) for line in (run / "cells.jsonl").read_text().splitlines()]
    named = {c for c, _ in ran}
    for r in records:
        if r["status"] == "ok" and r["cell_id"] not in named:
            assert "after the decision" in r["null_reasons"]["scenarios"]


@pytest.mark.slow
@pytest.mark.process
def test_one_configuration_every_answer_names_is_measured_once(tmp_path, cache_dir):
    run, env, entries = run_suite(
        tmp_path, cache_dir, "coincide", "--backends", "onnxruntime", "--shapes", "320", "--camera-fps", "15"
    )
    phase = env["scenario_phase"]
    cell = "yolo26n-detect-e2e-onnxruntime-cpu-320x320-b1-fp32"
    # every answer names it; one load measures what each reads, once, and the decision after asks for nothing
    assert [m["cell_id"] for m in phase["measured"]] == [cell], phase
    ran = {n for _, n in measured_once(run, env)}
    assert phase["decisions"] == 2 and phase["not_measured"] == []
    assert {
        "server",
        "offline",
    } <= ran  # every answer with a rate names it (a missed bound: measured to tell)
    for key in SCENARIO_USE_CASES:
        pick = entries[key]["pick"]
        if pick is not None:  # a frame time missed under load: then no pick, and nothing of it to measure
            assert pick["configuration"]["cell_id"] == cell and pick["figure_source"] in MEASURED, (key, pick)
