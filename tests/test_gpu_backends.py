"""GPU backends on a CPU machine: every GPU cell is a skip with a specific reason; the CPU halves of torch-compile and
AOTInductor run for real on yolo26n at 320 through the core; the GPU-independent parts (engine header, I/O binding,
backbone-only split, timing interfaces) run for real here.
"""

from __future__ import annotations

import struct
import sys
import types

import numpy as np
import pytest

from harness import backends
from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.record import CellRecord, new_record
from harness.execute.runner import CellRunner, RunConfig
from tests.conftest import LEAN_RUN

S320 = Shape(320, 320)


def _blank() -> CellRecord:
    """A CUDA cell's fresh record, for a tracker to fill."""
    return new_record(
        "r", Cell("n", "detect", "e2e", "torch-eager", "cuda", Shape(320, 320)), "random-init:0"
    )


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


cpu_machine = pytest.mark.skipif(
    _cuda_available(), reason="asserts this CPU machine's reasons; a GPU is visible"
)

# (backend, device) -> a phrase the reason must contain: each names what is missing, not just "unavailable"
GPU_REASONS = {
    ("torch-eager", "cuda"): "no CUDA device visible to torch",
    ("torch-compile", "cuda"): "no CUDA device visible to torch",
    ("torch-compile-max-autotune", "cuda"): "no CUDA device visible to torch",
    ("aoti", "cuda"): "no CUDA device visible to torch",
    ("torch-eager-cudagraph", "cuda"): "no CUDA device visible to torch",
    ("aoti-cudagraph", "cuda"): "no CUDA device visible to torch",
    ("executorch-cuda", "cuda"): "compiles kernels for a CUDA device",
    ("tensorrt", "cuda"): "tensorrt is not importable",
    ("onnxruntime", "cuda"): "has no CUDAExecutionProvider",
    ("onnxruntime-trt", "cuda"): "has no TensorrtExecutionProvider",
    ("openvino", "gpu"): "OpenVINO sees no GPU device",
}


@cpu_machine
def test_every_gpu_cell_probe_gives_a_specific_reason():
    gpu_pairs = {(n, d) for n in backends.names() for d in backends.get(n).devices if d in ("cuda", "gpu")}
    assert gpu_pairs == set(GPU_REASONS), "a GPU backend without an expected reason here"
    for (name, device), phrase in GPU_REASONS.items():
        reason = backends.get(name).probe(device)
        assert reason and phrase in reason, f"{name} {device}: {reason!r}"


@cpu_machine
def test_a_gpu_cell_through_the_runner_is_a_skip_with_its_reason(tmp_path, cache_dir):
    r = CellRunner(
        RunConfig(run_id="gpu-skip", results_dir=tmp_path, cache_dir=cache_dir), progress=lambda m: None
    )
    rec = r.run_cell(Cell("n", "detect", "e2e", "tensorrt", "cuda", S320))
    assert rec.status == "skipped" and "tensorrt is not importable" in rec.reason
    rec = r.run_cell(Cell("n", "detect", "e2e", "executorch-cuda", "cuda", S320))
    assert rec.status == "skipped" and "sees none" in rec.reason


@cpu_machine
def test_gpu_check_script_exits_3_with_the_reason_here(tmp_path, capsys, monkeypatch):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.py"
    spec = importlib.util.spec_from_file_location("gpu_check", path)
    gpu_check = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "gpu_check", gpu_check)  # dataclasses look their module up
    spec.loader.exec_module(gpu_check)
    assert gpu_check.main(["--out", str(tmp_path)]) == 3
    out = capsys.readouterr().out
    assert "gpu_check: cannot run: no CUDA device visible to torch" in out


def test_backend_precision_and_device_axes():
    assert backends.get("torch-compile").precisions == {"cpu": ("fp32",), "cuda": ("fp32", "fp16")}
    assert backends.get("torch-compile-max-autotune").devices == ("cuda",)
    assert backends.get("torch-compile").exports is False
    assert backends.get("aoti").devices == ("cpu", "cuda") and backends.get("aoti").exports
    assert backends.get("tensorrt").precisions["cuda"] == ("fp32", "fp16", "int8")
    c = Cell("n", "detect", "e2e", "executorch-cuda", "cuda", S320, precision="fp16")
    assert "runs fp32, not fp16" in backends.get("executorch-cuda").unsupported(c)


def test_tensorrt_int8_without_local_calibration_images_is_unsupported_with_that_reason(
    monkeypatch, tmp_path
):
    from harness.backends import tensorrt as trt_backend

    cell = Cell("n", "detect", "e2e", "tensorrt", "cuda", S320, precision="int8")
    monkeypatch.setenv(trt_backend.INT8_DATA_ENV, str(tmp_path / "missing.yaml"))
    assert "is not a file" in backends.get("tensorrt").unsupported(cell)
    monkeypatch.delenv(trt_backend.INT8_DATA_ENV)
    from ultralytics.utils import SETTINGS

    monkeypatch.setitem(SETTINGS, "datasets_dir", str(tmp_path))
    assert "int8 needs calibration images" in backends.get("tensorrt").unsupported(cell)
    (tmp_path / "coco8" / "images" / "val").mkdir(parents=True)
    (tmp_path / "coco8" / "images" / "val" / "a.jpg").write_bytes(b"\xff\xd8")
    assert trt_backend.int8_calibration_data() == ("coco8.yaml", None)


def test_ultralytics_engine_header_is_parsed(tmp_path):
    from harness.backends.tensorrt import read_engine_file

    meta = {"args": {"quantize": 16, "dynamic": False}, "imgsz": [320, 320]}
    blob = b"\x00ENGINE" * 10
    text = __import__("json").dumps(meta).encode()
    f = tmp_path / "m.engine"
    f.write_bytes(struct.pack("<i", len(text)) + text + blob)
    assert read_engine_file(f) == (meta, blob)
    f.write_bytes(blob)  # no header: the whole file is the engine
    assert read_engine_file(f) == ({}, blob)


def test_executorch_cuda_decides_export_only_at_probe_time(monkeypatch):
    """Stubs only what a CPU machine cannot have (a CUDA device, triton); the runtime registry is the real one."""
    import torch

    from harness.backends.executorch_cuda import runtime_backends

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    stub = types.ModuleType("executorch.backends.cuda.cuda_partitioner")
    stub.CudaPartitioner = object
    monkeypatch.setitem(sys.modules, "executorch.backends.cuda.cuda_partitioner", stub)
    b = backends.get("executorch-cuda")
    assert b.probe("cuda") is None
    assert "CudaBackend" not in runtime_backends()  # the PyPI wheel's runtime
    reason = b.export_only_reason(None)
    assert "no CudaBackend" in reason and "XnnpackBackend" in reason
    assert type(b).export_only is False, "decided per host, not for the class"
    # a fresh instance (the harness probes on one and runs the cell on another) reaches the same decision
    assert backends.get("executorch-cuda").export_only_reason(None) == reason


# -- backbone-only (the seeds' hybrid), real model on the CPU ------------------------------------------------------
@pytest.fixture(scope="module")
def yolo26n_checkpoint(cache_dir):
    from harness.yolo.models import ModelSource, materialize

    return materialize(ModelSource("n", "detect"), cache_dir).checkpoint


@pytest.mark.slow
def test_backbone_only_plus_host_topk_equals_the_full_e2e_model(yolo26n_checkpoint):
    import torch

    from harness.backends.executorch_cuda import (
        HostTopKRunner,
        backbone_only,
        host_postprocess,
        postprocess_spec,
    )
    from harness.backends.torch_eager import TorchRunner, flatten_outputs
    from harness.yolo.inputs import letterboxed
    from harness.yolo.models import prepared_model

    model = prepared_model(yolo26n_checkpoint, "e2e", (320, 320))
    x = letterboxed(320, 320, 1)
    full = flatten_outputs(model(torch.from_numpy(x.copy())))
    bb = backbone_only(model)
    raw = bb(torch.from_numpy(x.copy()))
    raw = [raw] if isinstance(raw, torch.Tensor) else list(raw)
    assert raw[0].shape == (1, 84, 2100)  # the raw head's layout: 4 box + 80 class channels x anchors at 320
    out = flatten_outputs(host_postprocess(raw, postprocess_spec(model)))
    assert [o.shape for o in out] == [f.shape for f in full] == [(1, 300, 6)]
    np.testing.assert_array_equal(out[0], full[0])
    assert flatten_outputs(model(torch.from_numpy(x.copy())))[0].shape == (1, 300, 6), (
        "the model is left as it was"
    )

    # the hybrid runner: the timed call ends with the host top-k; its outputs are the raw ones the harness compares
    runner = HostTopKRunner(
        TorchRunner(bb, "cpu", torch.float32), postprocess_spec(model), device_outputs=False
    )
    assert runner.timing_scope == "model+host_topk"
    result = runner.run(runner.prepare(x))
    np.testing.assert_array_equal(runner.outputs(result)[0], raw[0].numpy())
    np.testing.assert_array_equal(flatten_outputs(result[1])[0], full[0])
    cuda_scope = HostTopKRunner(TorchRunner(bb, "cpu", torch.float32), {}, device_outputs=True).timing_scope
    assert cuda_scope == "model+d2h+host_topk"


@pytest.mark.slow
def test_backbone_only_refuses_the_raw_head(yolo26n_checkpoint):
    from harness.backends.executorch_cuda import backbone_only
    from harness.yolo.models import prepared_model

    with pytest.raises(ValueError, match="applies to head=e2e"):
        backbone_only(prepared_model(yolo26n_checkpoint, "raw", (320, 320)))


# -- ONNX Runtime I/O binding, on the CPU device (the same code path the CUDA EP takes) ---------------------------
def test_io_binding_runner_pins_outputs_and_matches_session_run(tmp_path):
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from harness.backends._shared.ort_iobinding import OrtIOBindingRunner

    w = np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["images", "w"], ["c"], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c"], ["output0"]),
            helper.make_node("Sigmoid", ["c"], ["output1"]),
        ],
        "g",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 8, 8])],
        [
            helper.make_tensor_value_info("output0", TensorProto.FLOAT, [1, 4, 8, 8]),
            helper.make_tensor_value_info("output1", TensorProto.FLOAT, [1, 4, 8, 8]),
        ],
        [helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.ravel())],
    )
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(1).random((1, 3, 8, 8), dtype=np.float32)
    ref = session.run(None, {"images": x})

    r = OrtIOBindingRunner(session, ("fp32", "test: given", None), device_id=0, device_type="cpu")
    assert r.timing_scope == "model"
    prepared = r.prepare(x)
    first = r.outputs(r.run(prepared))
    pinned = [v.data_ptr() for v in r.binding.get_outputs()]
    again = r.run(prepared)
    r.synchronize()
    assert [v.data_ptr() for v in r.binding.get_outputs()] == pinned, "later runs write into the same buffers"
    for a, b in zip(first + r.outputs(again), ref + ref, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    r.close()


# -- GPU timing: the CUDA-event tracker (its events are faked: a CPU machine has none) and the CUDA-graph variant ---
class FakeCuda:
    """torch.cuda's events over a clock the test advances: each record() logs "event" and reads the clock."""

    def __init__(self) -> None:
        self.clock = 0.0
        self.log: list[str] = []

    def Event(self, enable_timing=False):
        assert enable_timing
        return FakeEvent(self)

    def synchronize(self):
        self.log.append("sync")


class FakeEvent:
    def __init__(self, cuda: FakeCuda) -> None:
        self.cuda, self.t = cuda, None

    def record(self):
        self.t = self.cuda.clock
        self.cuda.log.append("event")

    def elapsed_time(self, end):
        return end.t - self.t


def _round(cuda: FakeCuda):
    """A TimedCall whose run takes 2 ms on the device and whose wait adds 1 ms."""
    from harness.measure.timing import TimedCall

    def run():
        cuda.log.append("run")
        cuda.clock += 2.0

    def wait():
        cuda.log.append("wait")
        cuda.clock += 1.0

    return TimedCall(run, wait)


@pytest.mark.parametrize(
    "torch_stream, order, device_ms",
    [
        (True, ["event", "run", "event", "wait"], 2.0),  # the end event is enqueued before the host waits
        (False, ["event", "run", "wait", "event"], 3.0),  # own stream: seen through its synchronize only
    ],
)
def test_cuda_event_tracker_splits_the_round_before_the_wait_on_torch_stream(torch_stream, order, device_ms):
    from harness.measure.cuda_timing import SYNCED_SCOPE, TORCH_STREAM_SCOPE, CudaEventTracker
    from harness.measure.timing import TimedCall

    cuda = FakeCuda()
    t = CudaEventTracker(cuda=cuda)
    t.bind(types.SimpleNamespace(torch_stream=torch_stream))
    call = t.wrap(_round(cuda))
    assert isinstance(call, TimedCall), "later trackers still see the split"
    call()  # warm-up: no events
    assert cuda.log == ["run", "wait"]
    cuda.log.clear()
    t.start_timed()
    for _ in range(3):
        call()
    assert cuda.log == order * 3
    t.stop(3)
    call()  # after the timed rounds (not recorded)
    rec = _blank()
    t.fill(rec)
    lat = rec.device_latency_ms
    assert rec.device_samples_ms == [device_ms] * 3
    assert lat.p50 == device_ms and lat.rounds == 3
    assert lat.timing_scope == (TORCH_STREAM_SCOPE if torch_stream else SYNCED_SCOPE)
    assert rec.null_reasons == {}


def test_cuda_event_tracker_on_a_plain_call_spans_the_whole_call():
    from harness.measure.cuda_timing import SYNCED_SCOPE, CudaEventTracker

    cuda = FakeCuda()
    t = CudaEventTracker(cuda=cuda)
    t.bind(types.SimpleNamespace(torch_stream=True))
    split = _round(cuda)
    call = t.wrap(lambda: split())  # opaque: the tracker cannot see where the wait starts
    t.start_timed()
    call()
    t.stop(1)
    rec = _blank()
    t.fill(rec)
    assert cuda.log == ["event", "run", "wait", "event", "sync"]
    assert rec.device_samples_ms == [3.0] and rec.device_latency_ms.timing_scope == SYNCED_SCOPE


def test_cuda_event_tracker_null_reasons():
    from harness.measure.cuda_timing import CudaEventTracker

    cuda = FakeCuda()
    t = CudaEventTracker(cuda=cuda)
    call = t.wrap(_round(cuda))
    t.start_timed()
    call()
    t.stop(2)  # the timer ran the call once for two rounds: the events are not the rounds
    t.fill(rec := _blank())
    assert rec.device_latency_ms is None
    assert rec.null_reasons["device_latency_ms"] == "1 CUDA event pairs for 2 timed rounds: they do not match"
    t.start_timed()
    t.stop(0)
    t.fill(rec := _blank())
    assert rec.null_reasons["device_samples_ms"] == "no timed round completed"
    t = CudaEventTracker(cuda=cuda)
    t.fill(rec := _blank())  # load failed: the attempt fills without timed rounds
    assert rec.null_reasons["device_latency_ms"] == "the timed rounds did not finish"


@cpu_machine
def test_cuda_event_tracker_without_cuda_leaves_the_call_alone_and_says_why():
    from harness.measure.cuda_timing import CudaEventTracker
    from harness.measure.timing import TimedCall

    t = CudaEventTracker()
    call = TimedCall(lambda: None, lambda: None)
    assert t.cuda is None and t.wrap(call) is call
    t.start_timed()
    call()
    t.stop(1)
    t.fill(rec := _blank())
    assert rec.null_reasons["device_latency_ms"].startswith("no CUDA device visible to torch")


def test_cudagraph_variant_is_a_cuda_only_backend_of_its_own():
    from harness.backends.aoti import Aoti
    from harness.backends.cudagraph import cudagraph_backend
    from harness.backends.executorch_xnnpack import ExecuTorchXnnpack

    v = cudagraph_backend(Aoti)
    assert (
        v.name == "aoti-cudagraph" and v.devices == ("cuda",) and v.precisions == {"cuda": ("fp32", "fp16")}
    )
    assert v.run_single_threaded is True and Aoti.run_single_threaded is False
    with pytest.raises(ValueError, match="no cuda device"):
        cudagraph_backend(ExecuTorchXnnpack)


def test_cudagraph_runner_reports_what_the_inner_runner_read():
    """Construction touches no CUDA device, so the forwarding is checked on a CPU runner."""
    import torch

    from harness.backends.cudagraph import CudaGraphRunner
    from harness.backends.torch_eager import TorchRunner

    inner = TorchRunner(torch.nn.Conv2d(3, 4, 3), "cpu", torch.float32)
    inner.compile_s = 1.5
    g = CudaGraphRunner(inner, "cuda")
    assert (g.precision_executed, g.precision_source, g.precision_detail) == (
        inner.precision_executed,
        inner.precision_source,
        inner.precision_detail,
    )
    assert g.precision_executed == "fp32" and g.compile_s == 1.5 and g.timing_scope == inner.timing_scope
    assert g.cpu_threads() == inner.cpu_threads()
    assert g.torch_stream is True, (
        "replays run on torch's stream: the CUDA-event tracker splits before the wait"
    )


# -- real CPU runs through the core --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cpu_runner(tmp_path_factory, cache_dir) -> CellRunner:
    out = tmp_path_factory.mktemp("gpu-backends-results")
    return CellRunner(
        RunConfig(
            run_id="gpu-backends",
            results_dir=out,
            cache_dir=cache_dir,
            max_time_s=0.2,
            block_s=0.02,
            **LEAN_RUN,  # the tests read the export, load, timed rounds and parity
        ),
        progress=lambda m: None,
    )


def _no_probe(runner: CellRunner) -> CellRunner:
    """The same runner without the fresh-process probe (first run and memory): for torch.compile that process
    compiles the model a second time, and nothing here reads its memory."""
    from dataclasses import replace

    return CellRunner(
        replace(runner.config, run_id="torch-compile", isolate_first_run=False, memory_rounds=0),
        progress=lambda m: None,
    )


@pytest.fixture(scope="module")
def torch_compile_cpu(cpu_runner):
    """The module's one torch.compile (mode default): the record, and the runner `load` returned."""
    from harness.backends.torch_compile import TorchCompile

    loaded = []
    original = TorchCompile.load

    def spy(self, *args, **kwargs):
        runner = original(self, *args, **kwargs)
        loaded.append(runner)
        return runner

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(TorchCompile, "load", spy)
        rec = _no_probe(cpu_runner).run_cell(Cell("n", "detect", "e2e", "torch-compile", "cpu", S320))
    return rec, loaded


def _assert_ran_ok(rec):
    assert rec.status == "ok", rec.reason
    assert rec.parity["ok"] and rec.parity["failed"] == [], rec.parity
    assert rec.latency_ms.p50 > 0 and rec.latency_ms.rounds >= 5
    assert rec.precision_executed == "fp32"
    assert rec.latency_ms.timing_scope == "model"


@pytest.mark.slow
@pytest.mark.export
def test_torch_compile_cpu_runs_and_times_compilation_apart(torch_compile_cpu):
    rec, loaded = torch_compile_cpu
    _assert_ran_ok(rec)
    assert len(loaded) == 1
    compile_s = loaded[0].compile_s
    assert 0 < compile_s <= rec.load_s
    assert rec.first_run_ms < compile_s * 1000 / 10, "the first timed-region call must not be compiling"
    assert rec.compile_s == pytest.approx(compile_s)
    print(
        f"\ntorch-compile cpu yolo26n 320: compile {compile_s:.1f} s, load {rec.load_s:.1f} s, "
        f"p50 {rec.latency_ms.p50:.2f} ms, box IoU {rec.parity['metrics']['box_iou_mean']:.4f}"
    )


@pytest.mark.slow
@pytest.mark.export
def test_two_compiled_yolo26n_runners_alive_at_once(torch_compile_cpu, cpu_runner):
    """Two compiled yolo26n runners, loaded before either runs (as a timing phase does), each run twice in turn
    (issue 24, defect 1; tests/test_torch_compile.py holds the same on a tiny model). After the fixture's compile
    at 320, the 320 runner's load is Dynamo's reuse of that code and the 64 runner's is a real compile: compiling
    the second must leave the first's code in place (a timed call that needed a recompile raises)."""
    be = backends.get("torch-compile")
    if reason := be.probe("cpu"):
        pytest.skip(reason)
    runners = []
    for side in (320, 64):
        cell = Cell("n", "detect", "e2e", "torch-compile", "cpu", Shape(side, side))
        runners.append((be.load(cpu_runner.materialize(cell).checkpoint, cell, {}), side))
    try:
        assert runners[0][0].compile_s is None and runners[1][0].compile_s > 0  # reused, then compiled
        for runner, side in (*runners, *runners):
            x = np.random.rand(1, 3, side, side).astype(np.float32)
            out = runner.outputs(runner.run(runner.prepare(x)))
            assert out and np.isfinite(out[0]).all()
    finally:
        for runner, _ in runners:
            runner.close()


@pytest.mark.slow
@pytest.mark.export
def test_aoti_cpu_exports_in_isolation_and_runs(cpu_runner):
    # at 64: the AOTInductor export the kit's second call rehearses (tests/test_gpu_kit.py), made once per session
    rec = cpu_runner.run_cell(Cell("n", "detect", "e2e", "aoti", "cpu", Shape(64, 64)))
    _assert_ran_ok(rec)
    assert rec.export_s > 0 and rec.cache_hit in (False, True)
    assert rec.artifact.endswith(".pt2") and rec.artifact_bytes > 1_000_000
    print(
        f"\naoti cpu yolo26n 64: export {rec.export_s:.1f} s (cache hit {rec.cache_hit}), "
        f"load {rec.load_s:.2f} s, p50 {rec.latency_ms.p50:.2f} ms, "
        f"box IoU {rec.parity['metrics']['box_iou_mean']:.4f}"
    )
