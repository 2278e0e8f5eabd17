"""How close to the machine each cell runs: the roofline arithmetic (harness.core.roofline), the measured peaks
(harness.measure.peaks), the `roofline` record section through the codec and the migration, the `roofline-bound`
relation of `yolo26-bench check`, and the report's view of records written before any of it (the committed
samples: work from the committed table, peaks null with the reason)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from harness.check import cli
from harness.check.relations import ROOFLINE_TOL, check_record
from harness.core import model_work, roofline
from harness.core.record import Roofline
from harness.core.record_codec import record_from_dict, record_to_dict
from harness.core.results_dir import read_records

SAMPLES = Path(__file__).resolve().parents[1] / "results" / "samples"
SAMPLE = SAMPLES / "2026-11-28-cpu-2core-default"

WORK = {"flops": 5.4e9, "weight_elements": 2.4e6, "input_elements": 1.2e6, "activation_elements": 20e6}
CPU_PEAKS = {
    "cpu": {
        "compute": {"fp32": 100e9, "int8": 60e9},
        "bandwidth": 10e9,
        "how": {"fp32": "torch.matmul", "int8": "torch._int_mm", "bandwidth": "triad"},
        "null_reasons": {"bf16": "not measured here"},
    },
    "cuda": None,
    "null_reasons": {"cuda": "no CUDA device"},
}


def _every_null_has_its_reason(values: dict, reasons: dict) -> None:
    assert {k for k, v in values.items() if v is None} == set(reasons)


def test_a_cell_reads_against_the_peak_of_its_precision_and_the_bound():
    values, reasons = roofline.figures(WORK, 54.0, "cpu", "fp32", "fp32", CPU_PEAKS)
    assert reasons == {}
    assert values["achieved_flops_s"] == pytest.approx(100e9)  # 5.4 GFLOP in 54 ms
    assert values["bytes"] == pytest.approx((2.4e6 + 1.2e6 + 20e6) * 4)
    assert values["intensity"] == pytest.approx(5.4e9 / values["bytes"])
    # intensity x bandwidth (~572 GFLOP/s) is above the compute peak: compute-bound, at 100% of it
    assert values["bound_by"] == "compute" and values["bound_flops_s"] == 100e9
    assert values["share_of_peak"] == pytest.approx(1.0) and values["share_of_bound"] == pytest.approx(1.0)
    # an int8 cell (OpenVINO's `mixed`) moves a byte per element and reads against the best of int8 and wider: here
    # the library's int8 product was slower than its fp32 one, so the fp32 figure is the tighter bound known
    values, _ = roofline.figures(WORK, 54.0, "cpu", "mixed", "int8", CPU_PEAKS)
    assert values["precision"] == "int8" and values["bytes"] == pytest.approx(23.6e6)
    assert values["peak_flops_s"] == 100e9 and values["peak_of"].startswith(
        "fp32 (the highest measured at int8"
    )
    # memory-bound where intensity x bandwidth is below the compute peak
    slow = {"cpu": {**CPU_PEAKS["cpu"], "bandwidth": 1e9}}
    values, _ = roofline.figures(WORK, 54.0, "cpu", "fp32", "fp32", slow)
    assert values["bound_by"] == "memory" and values["bound_flops_s"] == pytest.approx(
        values["intensity"] * 1e9
    )
    assert values["share_of_bound"] > values["share_of_peak"]


def test_tf32_bounds_an_fp32_gpu_cell_unless_its_record_says_both_switches_were_off():
    peaks = {"cuda": {"compute": {"fp32": 50e12, "tf32": 400e12, "fp16": 800e12}, "bandwidth": 3e12}}
    off = {"tf32_matmul": False, "tf32_cudnn": False}
    assert roofline.figures(WORK, 1.3, "cuda", "fp32", "fp32", peaks, off)[0]["peak_flops_s"] == 50e12
    assert (
        roofline.figures(WORK, 1.3, "cuda", "fp32", "fp32", peaks, {"fp32": 240})[0]["peak_flops_s"] == 400e12
    )
    values, _ = roofline.figures(WORK, 1.3, "cuda", "fp16", "fp16", peaks)
    assert values["peak_of"] == "fp16" and values["share_of_peak"] == pytest.approx(5.4e9 / 1.3e-3 / 800e12)


def test_a_null_peak_leaves_the_share_null_with_the_reason():
    # the run measured no peaks (a record written before): work and achieved rate stand, peak and shares do not
    values, reasons = roofline.figures(WORK, 54.0, "cpu", "fp32", "fp32", None)
    _every_null_has_its_reason(values, reasons)
    assert values["achieved_flops_s"] == pytest.approx(100e9)
    assert values["share_of_peak"] is None and reasons["share_of_peak"] == roofline.NO_PEAKS
    # no CUDA device: the CUDA peaks are null with that reason, and so is a CUDA cell's share
    values, reasons = roofline.figures(WORK, 1.3, "cuda", "fp16", "fp16", CPU_PEAKS)
    _every_null_has_its_reason(values, reasons)
    assert "no CUDA device" in reasons["share_of_peak"] and "no CUDA device" in reasons["share_of_bound"]
    # a precision whose peak (and every wider one) was not measured, a bandwidth not measured
    bare = {
        "cpu": {"compute": {}, "bandwidth": None, "null_reasons": {"fp32": "boom", "bandwidth": "no torch"}}
    }
    values, reasons = roofline.figures(WORK, 54.0, "cpu", "fp32", "fp32", bare)
    _every_null_has_its_reason(values, reasons)
    assert "fp32: boom" in reasons["share_of_peak"] and "no torch" in reasons["bandwidth_bytes_s"]
    # no work, no p50, an unknown device
    for args in ((None, 54.0, "cpu"), (WORK, None, "cpu"), (WORK, 54.0, "vulkan")):
        values, reasons = roofline.figures(*args, "fp32", "fp32", CPU_PEAKS)
        _every_null_has_its_reason(values, reasons)
        assert values["share_of_bound"] is None


def test_the_section_survives_the_codec_and_an_older_record_reads_without_it():
    rec = read_records(SAMPLE)[0]
    assert rec.roofline is None and "roofline" not in record_to_dict(rec)  # only ok cells carry the section
    section = Roofline(**roofline.figures(WORK, 54.0, "cpu", "fp32", "fp32", CPU_PEAKS)[0], work_source="w")
    again = record_from_dict(record_to_dict(dataclasses.replace(rec, roofline=section)), migrate=False)
    assert again.roofline == section


def _record_with(share_of_bound: float):
    """An ok committed CPU record with a roofline section whose achieved rate is `share_of_bound` of its bound."""
    rec = next(r for r in read_records(SAMPLE) if r.status == "ok" and r.backend == "openvino")
    flops = 5.4e9
    achieved = flops / (rec.latency_ms.p50 / 1000)
    values, _ = roofline.figures(
        {**WORK, "flops": flops}, rec.latency_ms.p50, "cpu", "fp32", "fp32",
        {"cpu": {"compute": {"fp32": achieved / share_of_bound}, "bandwidth": 1e12}},
    )  # fmt: skip
    return dataclasses.replace(rec, roofline=Roofline(**values))


def test_a_cell_above_its_machines_bound_fails_check(tmp_path, capsys):
    over, fine = _record_with(1.0 + 2 * ROOFLINE_TOL), _record_with(1.0 + ROOFLINE_TOL / 2)
    assert [f.relation for f in check_record(over)] == ["roofline-bound"]
    assert check_record(fine) == []
    run = tmp_path / "run"
    run.mkdir()
    (run / "cells.jsonl").write_text(json.dumps(record_to_dict(over)) + "\n")
    assert cli.main([str(run)]) == 1
    out = capsys.readouterr().out
    assert ": roofline-bound: achieved " in out and "beats the hardware" in out


def test_the_committed_table_scales_a_shape_it_lacks_by_the_input_area():
    work, how = model_work.lookup("n", "detect", "e2e", 640, 640, 2)
    at_640 = model_work.table()["entries"]["n/detect/e2e/640x640"]
    assert how == "" and work["flops"] == pytest.approx(2 * at_640["flops"])
    assert work["weight_elements"] == at_640["weight_elements"]  # weights move once, whatever the batch
    work, _ = model_work.lookup("n", "detect", "e2e", 736, 736, 1)
    assert "scaled by the input area from the count at 672x672" in work["how"]
    assert model_work.lookup("n", "detect", "e2e", None, None, 1)[0] is None


def test_the_measured_peaks_say_how_and_null_what_they_cannot_measure():
    from harness.measure import peaks

    torch = pytest.importorskip("torch")
    got = peaks.measure(1)
    cpu = got["cpu"]
    assert cpu["threads"] == 1 and cpu["compute"]["fp32"] > 1e8
    # the runtimes' own math libraries where installed (the cpu extra has them all); the best is the peak
    assert set(cpu["candidates"]["fp32"]) == {"torch", "onednn", "numpy", "onnxruntime"}
    for prec, rates in cpu["candidates"].items():
        assert cpu["compute"][prec] == max(rates.values()) > 0, prec
    assert cpu["bandwidth"] > 1e8 and "triad" in cpu["how"]["bandwidth"]
    for p in peaks.CPU_PRECISIONS:  # each figure, or its reason
        assert (p in cpu["compute"] and cpu["how"][p]) or cpu["null_reasons"][p]
    if not torch.cuda.is_available():
        assert got["cuda"] is None and got["null_reasons"]["cuda"] == "no CUDA device"
    assert got["measured_in_s"] < 30


def test_the_committed_samples_render_with_the_new_section(tmp_path):
    """An older run re-renders: each ok cell's work comes from the model (the committed table), its peaks are null
    with the reason, and decision.json's picks carry the same figures."""
    from harness.report.render import render_report

    run = tmp_path / SAMPLE.name
    shutil.copytree(SAMPLE, run, ignore=shutil.ignore_patterns("report", "loadgen", "logs"))
    index = render_report([run], tmp_path / "reports")
    html = index.read_text()
    assert '<section id="roofline">' in html and 'data-plot="roofline-0"' in html
    assert 'data-origin="derived"' in html and roofline.NO_PEAKS.split(" (")[0] in html
    decision = json.loads((index.parent / "decision.json").read_text())
    picked = [e["pick"] for e in decision["decisions"] if e.get("pick")]
    assert picked and all(p["roofline"]["origin"] == "derived" for p in picked if p.get("roofline"))
    one = next(p["roofline"] for p in picked if p.get("roofline"))
    assert one["flops"] > 0 and one["achieved_flops_s"] > 0 and one["share_of_peak"] is None
    assert one["null_reasons"]["share_of_peak"] == roofline.NO_PEAKS


def test_the_picks_words_say_far_or_near_by_the_share_of_the_bound():
    from harness.decide.roofline import FAR, NEAR, verdict

    assert verdict(FAR / 2).startswith("far from the machine's limit")
    assert verdict(FAR) == verdict((FAR + NEAR) / 2) == "a part of the machine's limit"
    assert verdict(NEAR).startswith("near the machine's limit")


# ---- issue 66: peaks on a shared machine: read again beside each workload, the best kept ---------------------------
def _start_peaks(fp32: float) -> dict:
    """env.json `peaks` as a run's start wrote them: CPU fp32 `fp32` FLOP/s (oneDNN the fastest), 10 GB/s."""
    cpu = {
        "threads": 2, "compute": {"fp32": fp32}, "bandwidth": 10e9, "how": {"fp32": "oneDNN", "bandwidth": "triad"},
        "candidates": {"fp32": {"onednn": fp32, "torch": fp32 / 2}},
    }  # fmt: skip
    return {"statistic": "start", "cpu": cpu, "cuda": None, "measured_in_s": 3.0}


def _peaks_run(tmp_path: Path, start_fp32: float, again_fp32: float):
    """A run directory whose env.json holds start peaks, and a RunPeaks reading them again as `again_fp32`."""
    from harness.execute.roofline import RunPeaks

    (tmp_path / "env.json").write_text(
        json.dumps({"schema_version": 2, "run_id": "r", "peaks": _start_peaks(start_fp32)})
    )
    calls = []

    def again(peaks, kind, precisions, threads):
        calls.append((kind, precisions))
        rates = {"fp32": again_fp32}
        return {"kind": kind, "compute": rates, "bandwidth": 9e9, "how": {"fp32": "oneDNN again", "bandwidth": "triad again"}, "seconds": 0.5}  # fmt: skip

    return RunPeaks(tmp_path, threads=2, again=again), calls


def _cpu_cell(backend: str, height: int = 160):
    from harness.core.axes import Shape
    from harness.core.cell import Cell

    return Cell("n", "detect", "e2e", backend, "cpu", Shape(height, height))


def test_peaks_read_low_at_the_start_give_way_to_a_reading_beside_the_workload(tmp_path):
    """Issue 66: the peaks were measured once, at the run's start: on a loaded 2-core machine 26 GFLOP/s fp32 against
    125 idle, and every share of peak of the run followed. Read again beside each workload, the best is the peak."""
    peaks, calls = _peaks_run(tmp_path, start_fp32=26e9, again_fp32=125e9)
    got, _, source = peaks.get(_cpu_cell("onnxruntime"), "fp32")
    assert got["cpu"]["compute"]["fp32"] == 125e9 and got["cpu"]["bandwidth"] == 10e9  # each figure its best
    assert (
        "read beside the workload of" in got["cpu"]["how"]["fp32"]
        and got["cpu"]["how"]["bandwidth"] == "triad"
    )
    assert "the best of 2 readings, at the run's start and beside 1 workload(s)" in source
    values, _ = roofline.figures(
        WORK, 1000 * 5.4e9 / 100e9, "cpu", "fp32", "fp32", got
    )  # a cell at 100 GFLOP/s
    assert values["share_of_peak"] == pytest.approx(0.8)  # not 3.8 x a peak read on a loaded machine
    # once per workload: its other backend does not read them again; another workload does
    peaks.get(_cpu_cell("openvino"), "fp32")
    assert calls == [("cpu", ("fp32",))]
    peaks.get(_cpu_cell("onnxruntime", 320), "fp32")
    assert len(calls) == 2
    env = json.loads((tmp_path / "env.json").read_text())  # the best so far, and every reading, in env.json
    assert env["peaks"]["cpu"]["compute"]["fp32"] == 125e9
    assert [r["at"] for r in env["peaks"]["readings"]] == [
        "the run's start",
        f"beside the workload of {_cpu_cell('onnxruntime').id}",
        f"beside the workload of {_cpu_cell('onnxruntime', 320).id}",
    ]
    assert "best of the machine's readings" in env["peaks"]["statistic"]


def test_a_reading_beside_a_workload_below_the_start_keeps_the_start(tmp_path):
    # the other way: the machine loaded beside the workload, quiet at the start: the start's figures stand
    peaks, _ = _peaks_run(tmp_path, start_fp32=125e9, again_fp32=26e9)
    got, _, _ = peaks.get(_cpu_cell("onnxruntime"), "fp32")
    assert got["cpu"]["compute"]["fp32"] == 125e9 and got["cpu"]["how"]["fp32"] == "oneDNN"
    assert [r["compute"]["fp32"] for r in got["readings"]] == [125e9, 26e9]  # both said, the best used


def test_a_reading_beside_a_workload_times_the_starts_fastest_library_cheaply():
    """The real reading (no fake): the library that won at the start, at the run's threads, and the triad."""
    pytest.importorskip("torch")
    from harness.measure import peak_readings

    start = _start_peaks(1.0)
    reading = peak_readings.read_again(
        start, "cpu", ("fp32", "int8"), 1
    )  # int8 was not measured at the start
    assert reading["compute"]["fp32"] > 1e8 and set(reading["compute"]) == {"fp32"}
    assert "oneDNN" in reading["how"]["fp32"] and reading["bandwidth"] > 1e8
    assert reading["seconds"] < 10 and "null_reasons" not in reading
