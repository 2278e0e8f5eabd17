"""GPU memory measured in the probe's fresh process (harness.measure.gpu_memory_fresh), with a fake device: NVML's
per-process figure and torch's caching allocator over one state, the one thing a CPU machine cannot have. The
tracker, the sampler, the order check and the probe (harness.execute.worker._probe) are the real code.

The fake reproduces what the H100 records showed: in one process shared by two runners, the second runner's NVML
figure over its baseline is below torch's reserved memory (and the record gets null with the reason); measured in
a process of its own, the same runner's figures keep the order and split the context and the libraries apart.
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import numpy as np

from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.memory_order import memory_order_break
from harness.core.record import MIB, new_record
from harness.measure.gpu_memory import GpuMemoryTracker
from harness.measure.gpu_memory_fresh import DEVICE_WIDE_REASON, FreshGpuMemory
from tests.test_nvml import FakeNvml, device

PID = os.getpid()
CELL = Cell("n", "detect", "e2e", "torch-eager", "cuda", Shape(64, 64))
SEGMENT = 2 * MIB  # torch reserves in segments; 2 MiB is its small-segment size


class FakeGpu:
    """One process's device memory: the CUDA context, torch's caching allocator (which keeps what it reserved), and
    memory outside it (kernel modules and library handles loaded on first use). NVML lists the sum for this pid;
    `nvml_lags` makes the driver report only the context (a reading that breaks the order)."""

    def __init__(self) -> None:
        self.handle = device("00000000:3B:00.0", procs=[(PID, 0)], used=10 * 2**30)
        self.nvml = FakeNvml([self.handle])
        self.context = self.outside = 0
        self.allocated = self.reserved = self.max_allocated = self.max_reserved = 0
        self.nvml_lags = False
        self.libraries_loaded = False

    def _publish(self) -> None:
        shown = self.context if self.nvml_lags else self.context + self.reserved + self.outside
        self.handle["procs"] = [(PID, shown)]

    def touch(self) -> None:  # the trivial CUDA op: the context, and one small segment of torch's
        self.context = 500 * MIB
        self.alloc(512)

    def alloc(self, n: int) -> None:
        self.allocated += n
        if self.allocated > self.reserved:  # the cache cannot serve it: reserve more from the device
            self.reserved += -(-(self.allocated - self.reserved) // SEGMENT) * SEGMENT
        self.max_allocated = max(self.max_allocated, self.allocated)
        self.max_reserved = max(self.max_reserved, self.reserved)
        self._publish()

    def free(self, n: int) -> None:
        self.allocated -= n  # the caching allocator keeps the segment

    def load_libraries(self) -> None:  # cuDNN and cuBLAS on the first convolution
        if not self.libraries_loaded:
            self.libraries_loaded = True
            self.outside += 650 * MIB
            self._publish()

    # torch.cuda's allocator statistics
    def reset_peak_memory_stats(self) -> None:
        self.max_allocated, self.max_reserved = self.allocated, self.reserved

    def max_memory_allocated(self) -> int:
        return self.max_allocated

    def max_memory_reserved(self) -> int:
        return self.max_reserved

    def memory_reserved(self) -> int:
        return self.reserved

    def synchronize(self) -> None:
        pass


class FakeRunner:
    """A model of `weights` bytes whose call needs `activations` bytes for a moment."""

    def __init__(self, gpu: FakeGpu, weights: int, activations: int) -> None:
        self.gpu, self.activations = gpu, activations
        gpu.alloc(weights)

    def prepare(self, x):
        return x

    def run(self, prepared):
        self.gpu.load_libraries()
        self.gpu.alloc(self.activations)
        self.gpu.free(self.activations)
        return [np.zeros((1, 300, 6), np.float32)]

    def synchronize(self) -> None:
        pass

    def outputs(self, result):
        return result


def fresh(gpu: FakeGpu) -> FreshGpuMemory:
    return FreshGpuMemory(nvml=gpu.nvml, handle=gpu.handle, cuda=gpu, touch=gpu.touch, hz=500)


def measured_fresh(gpu: FakeGpu, weights: int, activations: int):
    t = fresh(gpu)
    t.start()
    runner = FakeRunner(gpu, weights, activations)
    for _ in range(3):
        runner.run(None)
    t.stop(2)
    rec = new_record("r", CELL, "w")
    t.fill(rec)
    return rec


def test_in_a_fresh_process_the_context_the_libraries_and_the_model_come_apart_and_keep_the_order():
    rec = measured_fresh(FakeGpu(), weights=10 * MIB, activations=130 * MIB)
    mem, nr = rec.memory, rec.null_reasons
    assert mem.device_context_mib == 500.0
    assert mem.torch_max_reserved_mib == 142.0 and mem.torch_max_allocated_mib == 140.0 + 512 / MIB
    assert mem.device_outside_torch_mib == 650.0
    assert mem.device_peak_process_mib == 142.0 + 650.0, (
        "over the context: the model's memory and the libraries"
    )
    assert memory_order_break(mem) is None
    assert mem.device_peak_used_mib is None and nr["memory.device_peak_used_mib"] == DEVICE_WIDE_REASON
    assert set(nr) == {"memory.device_peak_used_mib"}
    assert "fresh process" in mem.source and "context" in mem.source


def test_the_same_runner_after_another_in_one_process_breaks_the_order_and_carries_null():
    # the H100 records' defect: the second runner's NVML figure over its baseline is 0 (the allocator's cache
    # serves it), while torch's max reserved holds the first runner's memory too
    gpu = FakeGpu()
    gpu.touch()
    first = FakeRunner(gpu, weights=10 * MIB, activations=130 * MIB)
    first.run(None)
    t = GpuMemoryTracker(nvml=gpu.nvml, handle=gpu.handle, cuda=gpu, hz=500)
    t.start()
    second = FakeRunner(gpu, weights=10 * MIB, activations=100 * MIB)
    second.run(None)
    t.stop(0)
    rec = new_record("r", CELL, "w")
    t.fill(rec)
    mem, nr = rec.memory, rec.null_reasons
    assert mem.device_peak_process_mib is None
    assert "0.0 MiB is below torch's max reserved 142.0 MiB" in nr["memory.device_peak_process_mib"]
    assert mem.torch_max_reserved_mib == 142.0
    assert mem.device_context_mib is None and "fresh process" in nr["memory.device_context_mib"]
    # the same runner measured in a process of its own keeps every figure
    alone = measured_fresh(FakeGpu(), weights=10 * MIB, activations=100 * MIB).memory
    assert alone.device_peak_process_mib == 112.0 + 650.0 and alone.torch_max_reserved_mib == 112.0
    assert memory_order_break(alone) is None


def test_a_fresh_reading_that_breaks_the_order_anyway_is_null_with_the_reason():
    gpu = FakeGpu()
    gpu.nvml_lags = True  # the driver shows the context only: NVML's process figure misses torch's memory
    rec = measured_fresh(gpu, weights=10 * MIB, activations=130 * MIB)
    mem, nr = rec.memory, rec.null_reasons
    assert mem.device_peak_process_mib is None and mem.device_outside_torch_mib is None
    assert "below torch's max reserved 142.0 MiB" in nr["memory.device_peak_process_mib"]
    assert mem.torch_max_reserved_mib == 142.0
    assert mem.device_context_mib == 498.0, (
        "the context reading is kept: 500 MiB shown, less torch's 2 MiB segment"
    )


def test_a_process_nvml_does_not_list_gives_reasons_not_zeros():
    gpu = FakeGpu()
    t = FreshGpuMemory(nvml=gpu.nvml, handle=gpu.handle, cuda=gpu, touch=gpu.touch, pid=PID + 7, hz=500)
    t.start()
    FakeRunner(gpu, weights=10 * MIB, activations=30 * MIB).run(None)
    t.stop(1)
    rec = new_record("r", CELL, "w")
    t.fill(rec)
    mem, nr = rec.memory, rec.null_reasons
    assert mem.device_context_mib is None and mem.device_peak_process_mib is None
    assert "NVML reports host PIDs" in nr["memory.device_context_mib"]
    assert nr["memory.device_peak_process_mib"] == nr["memory.device_context_mib"]
    assert mem.torch_max_reserved_mib == 42.0, "torch's figures do not need NVML"
    assert not FreshGpuMemory.for_cell(Cell("n", "detect", "e2e", "torch-eager", "cpu", Shape(64, 64)))


def test_the_probe_process_fills_the_gpu_memory_of_a_cuda_cell(monkeypatch, tmp_path):
    from harness import backends
    from harness.execute import worker
    from harness.measure import gpu_memory_fresh

    gpu = FakeGpu()
    backend = SimpleNamespace(
        probe=lambda device: None,
        load=lambda artifact, cell, info: FakeRunner(gpu, weights=10 * MIB, activations=130 * MIB),
    )
    monkeypatch.setattr(backends, "get", lambda name: backend)
    monkeypatch.setattr(
        gpu_memory_fresh.FreshGpuMemory, "for_cell", classmethod(lambda cls, cell: fresh(gpu))
    )
    out = worker._probe(
        {"cell": CELL.to_dict(), "artifact": str(tmp_path / "w.pt"), "height": 64, "width": 64, "rounds": 2}
    )
    mem = out["memory"]
    assert mem["device_context_mib"] == 500.0 and mem["device_outside_torch_mib"] == 650.0
    assert mem["torch_max_reserved_mib"] == 142.0 and mem["device_peak_process_mib"] == 792.0
    assert mem["host_peak_rss_mib"] is not None, "the host figures are measured beside them"
    assert out["null_reasons"]["memory.device_peak_used_mib"] == DEVICE_WIDE_REASON
    assert out["output_shapes"] == [[1, 300, 6]]


def test_measured_apart_the_benchmark_process_keeps_the_probe_figures_and_takes_only_the_snapshot():
    gpu = FakeGpu()
    rec = measured_fresh(FakeGpu(), weights=10 * MIB, activations=130 * MIB)  # what the probe measured
    before, reasons = rec.memory.to_dict(), dict(rec.null_reasons)
    t = GpuMemoryTracker(nvml=gpu.nvml, handle=gpu.handle, cuda=gpu, hz=500)
    t.measured_apart()
    t.start()
    gpu.touch()
    FakeRunner(gpu, weights=10 * MIB, activations=300 * MIB).run(None)  # another state in this process
    t.stop(0)
    t.fill(rec)
    assert rec.memory.to_dict() == before and rec.null_reasons == reasons
    assert t.sampler is None, "nothing sampled in the benchmark process"
    assert rec.gpu_snapshot["sm_clock_mhz"] == 1980
    # the other way: not measured apart, the tracker writes its own (in-process) figures
    t = GpuMemoryTracker(nvml=gpu.nvml, handle=gpu.handle, cuda=gpu, hz=500)
    t.start()
    t.stop(0)
    t.fill(rec)
    assert rec.memory.to_dict() != before and rec.memory.device_context_mib is None


def _load_with(monkeypatch, memory_rounds: int) -> GpuMemoryTracker:
    """harness.execute.loading.load of a cuda cell with a fake device; its GPU memory tracker."""
    from harness.execute import loading

    gpu = FakeGpu()
    made = []

    def trackers_for(cell, skip=()):
        made.append(GpuMemoryTracker(nvml=gpu.nvml, handle=gpu.handle, cuda=gpu, hz=500))
        return list(made)

    monkeypatch.setattr(loading, "trackers_for", trackers_for)
    backend = SimpleNamespace(load=lambda artifact, cell, info: SimpleNamespace(compile_s=1.0))
    # the AttemptState fields the load stage reads (preload: what the probes found of a libstdc++ preload)
    s = SimpleNamespace(
        cell=CELL,
        backend=backend,
        artifact=None,
        export_info={},
        rec=new_record("r", CELL, "w"),
        preload=None,
    )
    assert loading.load(s, SimpleNamespace(last_runner=None), memory_rounds, progress=lambda m: None)
    made[0].stop(0)
    return made[0]


def test_the_load_stage_leaves_memory_to_the_probe_when_the_probe_measured_it(monkeypatch):
    assert _load_with(monkeypatch, memory_rounds=2).apart
    assert not _load_with(monkeypatch, memory_rounds=0).apart, "measured in the benchmark process otherwise"


def test_a_cuda_cells_memory_cache_entry_names_the_gpu_measurement(tmp_path):
    from harness.execute.memory_cache import GPU_MEASURES, MemoryCache

    cache, art = MemoryCache(tmp_path), tmp_path / "a.onnx"
    args = ("cell", art, "", "onnxruntime", 2, 2)
    assert cache.path(*args) == cache.path(*args, ""), "a CPU cell's entry keeps its key"
    assert cache.path(*args, GPU_MEASURES) != cache.path(*args), (
        "an entry measured without the GPU is not reused"
    )


def test_the_records_script_flags_the_h100_records_and_passes_a_fresh_process_run(tmp_path, capsys):
    import importlib.util
    from pathlib import Path

    from harness.core.record_codec import record_to_json

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_memory_records.py"
    spec = importlib.util.spec_from_file_location("gpu_memory_records", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    h100 = Path(__file__).parent / "data" / "gpu_h100" / "eager-cudagraph-fp32-fp16-cells.jsonl"
    assert script.main([str(h100)]) == 1
    assert capsys.readouterr().out.count("BREAKS: NVML's process peak") == 3
    rec = measured_fresh(FakeGpu(), weights=10 * MIB, activations=130 * MIB)
    rec.status = "ok"
    (tmp_path / "cells.jsonl").write_text(record_to_json(rec) + "\n")
    assert script.main([str(tmp_path / "cells.jsonl")]) == 0
    assert "ctx 500, proc 792, outside 650, alloc 140, resv 142  order ok" in capsys.readouterr().out


def test_the_report_shows_the_context_and_what_lies_outside_torch(tmp_path):
    import json
    import shutil
    from pathlib import Path

    from harness.core.record_codec import record_from_json, record_to_json
    from harness.report import render_report
    from tests.test_report_render import _num, _row, parse

    run = tmp_path / "gpu_run"
    shutil.copytree(Path(__file__).parent / "data" / "report" / "gpu_run", run)
    lines = (run / "cells.jsonl").read_text().splitlines()
    recs = [record_from_json(line) for line in lines]
    i = next(i for i, r in enumerate(recs) if r.device == "cuda" and r.status == "ok")
    fresh_mem = measured_fresh(FakeGpu(), weights=10 * MIB, activations=130 * MIB)
    recs[i].memory, recs[i].null_reasons = (
        fresh_mem.memory,
        {**recs[i].null_reasons, **fresh_mem.null_reasons},
    )
    lines[i] = record_to_json(recs[i])
    (run / "cells.jsonl").write_text("\n".join(lines) + "\n")
    doc = parse(render_report([run], tmp_path / "out"))
    row = _row(doc, "memory", recs[i].cell_id)
    assert _num(row["device_context"]) == 500 and _num(row["outside_torch"]) == 650
    assert _num(row["device_process"]) == 792 and _num(row["torch_reserved"]) == 142
    # the other way: a record written before these figures existed shows n/a, never a number
    other = next(r for j, r in enumerate(recs) if j != i and r.device == "cuda" and r.status == "ok")
    assert json.loads(lines[recs.index(other)])["memory"].get("device_context_mib") is None
    assert _row(doc, "memory", other.cell_id)["device_context"].text().startswith("n/a")
