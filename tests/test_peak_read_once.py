"""A peak no cell of the run needs is read only at the run's start, never again beside a workload: its figure says
so, and says when the readings beside the workloads show the machine was under load at the start (such a figure is
low by as much: bf16 read 40x low beside a busy machine). Before, it stood unlabelled beside figures that were the
best of several readings."""

from __future__ import annotations

import json
from pathlib import Path

from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.execute.roofline import RunPeaks

CELL = Cell("n", "detect", "e2e", "onnxruntime", "cpu", Shape(160, 160))
OTHER_WORKLOAD = Cell("n", "detect", "e2e", "onnxruntime", "cpu", Shape(320, 320))


def _run(tmp_path: Path, start_fp32: float, again_fp32: float) -> RunPeaks:
    """A run whose start read fp32 `start_fp32`, bf16 and int8, and whose readings beside a workload (of fp32
    cells: fp32 alone, and the bandwidth) read fp32 `again_fp32`."""
    cpu = {
        "threads": 2, "compute": {"fp32": start_fp32, "bf16": 1e9, "int8": 50e9}, "bandwidth": 10e9,
        "how": {"fp32": "oneDNN", "bf16": "torch.matmul bfloat16", "int8": "MLAS", "bandwidth": "triad"},
        "candidates": {"fp32": {"onednn": start_fp32}, "bf16": {"torch": 1e9}, "int8": {"onnxruntime": 50e9}},
    }  # fmt: skip
    peaks = {"statistic": "start", "cpu": cpu, "cuda": None, "measured_in_s": 3.0}
    (tmp_path / "env.json").write_text(json.dumps({"schema_version": 2, "run_id": "r", "peaks": peaks}))

    def again(peaks, kind, precisions, threads):
        assert precisions == ("fp32",)  # an fp32 cell's workload reads fp32 alone
        return {
            "kind": kind,
            "compute": {"fp32": again_fp32},
            "bandwidth": 10e9,
            "how": {"fp32": "oneDNN again", "bandwidth": "triad again"},
            "seconds": 0.5,
        }

    return RunPeaks(tmp_path, threads=2, again=again)


def _cpu(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "env.json").read_text())["peaks"]["cpu"]


def test_a_peak_read_only_at_a_loaded_start_says_so(tmp_path):
    peaks = _run(tmp_path, start_fp32=26e9, again_fp32=125e9)
    peaks.get(CELL, "fp32")
    cpu = _cpu(tmp_path)
    for prec in ("bf16", "int8"):
        how = cpu["how"][prec]
        assert (
            f"read only at the run's start (no cell of this run needs {prec}, so it was not read again)"
            in how
        )
        assert (
            "under load at the start (fp32 26 then 125 G/s, 4.8x): this figure is likely low by as much"
            in how
        )
    assert "read only" not in cpu["how"]["fp32"]  # the best of two readings, said as before
    assert cpu["start_only"] == {"precisions": ["bf16", "int8"], "start_under_load": True}
    # a second workload: the words once, not once per reading
    peaks.get(OTHER_WORKLOAD, "fp32")
    assert _cpu(tmp_path)["how"]["bf16"].count("read only at the run's start") == 1


def test_a_peak_read_only_at_a_quiet_start_is_not_called_loaded(tmp_path):
    # the other way: the readings beside the workload match the start's
    peaks = _run(tmp_path, start_fp32=125e9, again_fp32=120e9)
    peaks.get(CELL, "fp32")
    cpu = _cpu(tmp_path)
    assert "read only at the run's start (no cell of this run needs bf16" in cpu["how"]["bf16"]
    assert "under load" not in cpu["how"]["bf16"]
    assert cpu["start_only"] == {"precisions": ["bf16", "int8"], "start_under_load": False}
