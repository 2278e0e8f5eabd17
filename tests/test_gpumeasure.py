"""The GPU trackers on a machine without a GPU: every GPU figure of a cuda cell is null with the real reason (this
machine's NVML and torch, nothing faked), and the GPU trackers do not apply to CPU cells."""

from __future__ import annotations

import pytest

from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.record import Memory, new_record
from harness.measure.cuda_timing import CudaEventTracker, torch_cuda_reason
from harness.measure.energy import EnergyNotMeasured, EnergyTracker
from harness.measure.gpu_memory import GpuMemoryTracker
from harness.measure.nvml import nvml_reason
from harness.measure.timing import TimedCall
from harness.measure.trackers import trackers_for

S320 = Shape(320, 320)
CUDA_CELL = Cell("n", "detect", "e2e", "torch-eager", "cuda", S320, batch=2)
CPU_CELL = Cell("n", "detect", "e2e", "torch-eager", "cpu", S320)

no_gpu = pytest.mark.skipif(
    nvml_reason() is None or torch_cuda_reason()[1] is None, reason="this machine has a GPU"
)


def test_trackers_of_a_cuda_cell_in_registration_order():
    names = [type(t).__name__ for t in trackers_for(CUDA_CELL)]
    assert names == [
        "HostMemoryTracker",
        "GpuMemoryTracker",
        "EnergyTracker",
        "CudaEventTracker",
        "HostBoundTracker",
    ]


def test_gpu_trackers_do_not_apply_to_cpu_cells_and_energy_says_why():
    assert GpuMemoryTracker.for_cell(CPU_CELL) is None
    assert CudaEventTracker.for_cell(CPU_CELL) is None
    energy = EnergyTracker.for_cell(CPU_CELL)
    assert isinstance(energy, EnergyNotMeasured)
    assert [type(t) for t in trackers_for(CPU_CELL)][1:] == [EnergyNotMeasured]
    rec = new_record("r", CPU_CELL, "random-init:0")
    energy.fill(rec)
    assert rec.energy is not None and rec.energy.to_dict() == {
        "per_inference_j": None,
        "window_s": None,
        "inferences": None,
        "source": "",
        "net_per_inference_j": None,
        "idle_power_w": None,
        "diff_per_inference_j": None,  # the difference of two windows (harness.measure.energy.difference)
        "diff": None,
    }
    why = rec.null_reasons["energy.per_inference_j"]
    assert why.startswith("not measured: CPU cell; no energy counter is read for CPUs")
    assert rec.null_reasons["energy.window_s"] == rec.null_reasons["energy.inferences"] == why
    assert rec.null_reasons["energy.net_per_inference_j"] == why
    assert rec.null_reasons["energy.diff_per_inference_j"] == why
    intel = EnergyTracker.for_cell(Cell("n", "detect", "e2e", "openvino", "gpu", S320))
    assert "not measured: gpu cell" in intel.reason and "NVIDIA" in intel.reason


@no_gpu
def test_without_a_gpu_every_device_figure_of_a_cuda_cell_is_null_with_the_real_reason():
    nvml_why, torch_why = nvml_reason(), torch_cuda_reason()[1]
    mem, energy, events = trackers = [
        GpuMemoryTracker.for_cell(CUDA_CELL),
        EnergyTracker.for_cell(CUDA_CELL),
        CudaEventTracker.for_cell(CUDA_CELL),
    ]
    assert mem.reason == energy.reason == nvml_why and events.reason == torch_why
    rec = new_record("r", CUDA_CELL, "random-init:0")
    rec.memory = Memory(host_peak_rss_mib=100.0, source="host tracker")
    for t in trackers:
        t.start()
    events.bind(type("R", (), {"torch_stream": True})())
    seen = []
    call = TimedCall(lambda: seen.append("run"), lambda: seen.append("wait"))
    for t in trackers:
        call = t.wrap(call)
    for t in trackers:
        t.start_timed()
    call()
    call()
    for t in trackers:
        t.stop(2)
        t.fill(rec)
    assert seen == ["run", "wait"] * 2, "the wrapped call still runs the round"
    nr = rec.null_reasons
    for key in ("device_peak_used_mib", "device_peak_process_mib"):
        assert getattr(rec.memory, key) is None and nr[f"memory.{key}"] == nvml_why
    for key in ("torch_max_allocated_mib", "torch_max_reserved_mib"):
        assert getattr(rec.memory, key) is None and nr[f"memory.{key}"] == torch_why
    assert rec.memory.host_peak_rss_mib == 100.0 and rec.memory.source == "host tracker"
    assert rec.energy.per_inference_j is None and nr["energy.per_inference_j"] == nvml_why
    assert rec.gpu_snapshot is None and nr["gpu_snapshot"] == nvml_why
    assert rec.device_latency_ms is None and nr["device_latency_ms"] == torch_why
    assert "CUDA" in nr["device_samples_ms"]
