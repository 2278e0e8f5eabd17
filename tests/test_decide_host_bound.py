"""A pick whose decisive figure is the host's says so (issue 37, item 3): on the real H100 records
(tests/data/gpu_h100, copied from the first GPU run) torch-eager's cells are host-bound (the CUDA-graph replay of
the same kernels keeps the device busy for 13-21% of eager's round), so the lowest-memory pick, torch-eager, carries
"host-bound: moves with the host CPU" on the first screen, its reason in the evidence and `host_bound` in
decision.json; the CUDA-graph picks, device-bound, carry none; a CPU pick has no verdict at all."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from harness.decide import host_bound
from harness.decide.decision import decide
from harness.decide.index import index_runs
from harness.decide.load import load_runs
from harness.report import render_report

DATA = Path(__file__).resolve().parent / "data" / "gpu_h100"
CPU_SAMPLE = Path(__file__).resolve().parent.parent / "results" / "samples" / "2026-11-25-cpu-2core-default"


def _run(tmp_path: Path) -> Path:
    run = tmp_path / "h100"
    run.mkdir()
    shutil.copy(DATA / "eager-cudagraph-fp32-fp16-cells.jsonl", run / "cells.jsonl")
    return run


def _answers(run: Path) -> dict:
    return {a.key: a for a in decide(index_runs(load_runs([run]))).answers}


def test_a_host_bound_pick_says_its_figure_moves_with_the_host_cpu(tmp_path):
    answers = _answers(_run(tmp_path))
    low = answers["lowest-memory"].winner
    assert low.backend == "torch-eager" and low.device == "cuda"
    assert low.host_bound.startswith("host-bound (device busy 13% of the round)")
    assert "will move with the host CPU" in low.host_bound


def test_a_device_bound_pick_says_nothing_of_the_host(tmp_path):
    answers = _answers(_run(tmp_path))
    graph = answers["gpu-latency"].winner
    assert graph.backend == "torch-eager-cudagraph" and graph.host_bound == ""
    assert all(p.host_bound == "" for p in answers["camera"].tied)  # CUDA-graph fp32 and fp16, device-bound


def test_the_first_screen_and_decision_json_carry_the_verdict(tmp_path):
    index = render_report([_run(tmp_path)], tmp_path / "out")
    page = index.read_text()
    start = page.index('id="decision"')
    first = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page[start : page.index("</section>", start)]))
    row = first[first.index("Lowest memory") : first.index("Mobile and embedded")]
    assert host_bound.SHORT in row
    gpu_row = first[first.index("Backend comparison, GPU: batch-1 latency") :]
    assert host_bound.SHORT not in gpu_row[: gpu_row.index("Backend comparison, GPU: throughput")]
    assert page.count('class="host-bound"') >= 1  # the evidence names the share the verdict rests on
    entries = {
        e["use_case"]: e for e in json.loads((index.parent / "decision.json").read_text())["decisions"]
    }
    assert entries["lowest-memory"]["pick"]["host_bound"]["host_bound"] is True
    assert entries["camera"]["pick"]["host_bound"]["host_bound"] is False


def test_a_cpu_pick_has_no_host_bound_verdict(tmp_path):
    index = render_report([CPU_SAMPLE], tmp_path)
    entries = json.loads((index.parent / "decision.json").read_text())["decisions"]
    picks = [e["pick"] for e in entries if e.get("pick")]
    assert picks and all(p["host_bound"] is None for p in picks)
    assert host_bound.SHORT not in index.read_text()
