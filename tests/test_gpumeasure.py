"""The CUDA-cell measurement on a machine without a GPU: every GPU figure is null with the real reason."""

from harness.axes import Shape
from harness.cell import Cell
from harness.gpumeasure import DeviceMeasure
from harness.memory import Sampler, rss_probe
from harness.records import new_record


def test_without_a_gpu_every_device_figure_is_null_with_the_nvml_reason():
    cell = Cell("n", "detect", "e2e", "torch-eager", "cuda", Shape(320, 320))
    gpu = DeviceMeasure(cell)
    assert gpu.probes() == [] and gpu.reason  # real NVML on this machine: no driver
    rec = new_record("r", cell, "random-init:0")
    rec["memory"] = {"source": "psutil"}
    with Sampler([rss_probe(), *gpu.probes()]) as s:
        call = gpu.wrap(lambda: None, lambda: None, torch_stream=True)
        gpu.start_timed()
        call()
    gpu.fill(rec, s, rounds=1)
    nr = rec["null_reasons"]
    assert nr["memory.device_peak_used_mb"] == gpu.reason
    assert nr["memory.device_peak_process_mb"] == gpu.reason
    assert nr["memory.energy_per_inference_j"] == gpu.reason
    assert "CUDA" in nr["device_latency_ms"]
    assert rec["memory"].get("device_peak_used_mb") is None
