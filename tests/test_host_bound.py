"""Host-bound CUDA cells (issue 36, item 6): the verdict on the real H100 records (tests/data/gpu_h100: eager and
torch.compile cells are host-bound, CUDA-graph cells are not), the tracker with a fake clock (no GPU here), the
record field, and the report marking host-bound comparisons machine-dependent."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from harness.core.record_codec import record_from_dict, record_to_dict
from harness.core.results_dir import read_records
from harness.measure.host_bound import HOST_BOUND_SHARE, HostBoundTracker, verdict
from harness.measure.timing import TimedCall

DATA = Path(__file__).parent / "data" / "gpu_h100"


def _verdicts(name: str) -> dict[str, dict]:
    recs = read_records(DATA / name)
    return {r.backend + "-" + r.precision_executed: v for r in recs if (v := verdict(r, recs)) is not None}


def test_on_the_h100_records_eager_cells_are_host_bound_and_cuda_graph_cells_are_not():
    seen = 0
    for path in sorted(DATA.glob("*.jsonl")):
        for key, v in _verdicts(path.name).items():
            seen += 1
            graph = key.startswith("torch-eager-cudagraph")
            assert v["host_bound"] is (not graph), (path.name, key, v)
            share = v["device_busy_share"]
            assert share > 0.9 if graph else share < 0.4  # far from the threshold either way
            assert v["threshold"] == HOST_BOUND_SHARE
    assert seen == 11
    kit = _verdicts("kit-cells-n.jsonl")
    assert "an estimate for torch-compile" in kit["torch-compile-fp32"]["basis"]
    assert "estimate" not in kit["torch-eager-fp32"]["basis"]


def test_without_a_cuda_graph_cell_in_the_run_an_old_record_has_no_verdict_and_says_why():
    recs = [r for r in read_records(DATA / "kit-cells-n.jsonl") if r.backend != "torch-eager-cudagraph"]
    v = verdict(next(r for r in recs if r.backend == "torch-eager"), recs)
    assert v["host_bound"] is None and "no CUDA-graph cell of the same workload" in v["reason"]
    # a CPU record or a failed cell gets none at all
    crashed = next(r for r in read_records(DATA / "kit-cells-n.jsonl") if r.status != "ok")
    assert verdict(crashed, recs) is None


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class Runner:
    def __init__(self, torch_stream: bool) -> None:
        self.torch_stream = torch_stream


def _tracker_record(enqueue_ms: float, wait_ms: float, torch_stream: bool = True, rounds: int = 30):
    from tests.test_nvml import _blank

    clock = FakeClock()
    t = HostBoundTracker(clock=clock)
    t.bind(Runner(torch_stream))

    def run() -> None:
        clock.t += enqueue_ms / 1000

    def wait() -> None:
        clock.t += wait_ms / 1000

    call = t.wrap(TimedCall(run, wait))
    for _ in range(3):  # warm-up: not recorded
        call()
    t.start_timed()
    for _ in range(rounds):
        call()
    t.stop(rounds)
    rec = _blank()
    t.fill(rec)
    return rec


def test_the_tracker_calls_a_launch_bound_round_host_bound_and_a_graph_replay_not():
    # an eager round: the host launches kernels for 9 ms, the device finishes 0.2 ms after the last one
    rec = _tracker_record(9.0, 0.2)
    hb = rec.host_bound
    assert hb["host_bound"] is True and hb["rounds"] == 30
    assert hb["enqueue_share"] == pytest.approx(9.0 / 9.2, abs=1e-3)
    assert hb["enqueue_ms_p50"] == pytest.approx(9.0) and hb["wall_ms_p50"] == pytest.approx(9.2)
    # the other way: a graph replay is enqueued in 0.05 ms, the host then waits 1.9 ms for the device
    rec = _tracker_record(0.05, 1.9)
    assert rec.host_bound["host_bound"] is False and rec.host_bound["enqueue_share"] < 0.05
    # just either side of the threshold
    assert _tracker_record(5.1, 4.9).host_bound["host_bound"] is True
    assert _tracker_record(4.9, 5.1).host_bound["host_bound"] is False


def test_a_runtime_on_its_own_stream_has_no_verdict_and_says_why():
    rec = _tracker_record(5.0, 0.1, torch_stream=False)
    assert rec.host_bound["host_bound"] is None
    assert "returns only when the device is done" in rec.null_reasons["host_bound.host_bound"]


def test_the_section_travels_in_the_record_and_a_new_record_is_its_own_verdict():
    rec = dataclasses.replace(_tracker_record(9.0, 0.2), status="ok")  # as written: a record has its verdict
    back = record_from_dict(record_to_dict(rec))
    assert back.host_bound == rec.host_bound
    assert "host_bound" not in record_to_dict(
        dataclasses.replace(rec, host_bound=None)
    )  # optional: not written
    # a record that carries the section is taken at its word, even beside a CUDA-graph cell
    recs = read_records(DATA / "kit-cells-n.jsonl")
    eager = next(r for r in recs if r.backend == "torch-eager")
    measured = dataclasses.replace(eager, host_bound={**rec.host_bound, "host_bound": False})
    assert verdict(measured, recs)["host_bound"] is False


def test_the_report_marks_host_bound_comparisons_machine_dependent(tmp_path):
    from harness.report.render import render_report

    run = tmp_path / "kit-n"
    run.mkdir()
    shutil.copy(DATA / "kit-cells-n.jsonl", run / "cells.jsonl")
    shutil.copy(DATA / "kit-env.json", run / "env.json")
    html = render_report([run], tmp_path / "reports").read_text()
    assert html.count('data-state="host-bound"') == 2 and html.count('data-state="device-bound"') == 1
    graph = "yolo26n-detect-e2e-torch-eager-cudagraph-cuda-640x640-b1-fp32"
    eager = "yolo26n-detect-e2e-torch-eager-cuda-640x640-b1-fp32"
    assert f'data-with="{graph}">with {graph}: machine-dependent' in html  # eager (host-bound) vs the graph
    assert (
        f'data-with="{eager}">with {eager}: machine-dependent' in html
    )  # the graph vs eager, the other side
