"""The TensorRT runner's contexts, TF32 and versions on a CPU, with a fake of the tensorrt module (no TensorRT
runs on a CPU); its buffers are real CPU tensors that the fake engine reads and writes by address (issue 24,
defects 3 and 5).

- each stream has an execution context of its own with its own buffers, enqueued on its own CUDA stream; `prepare`
  binds nothing (it rebound the one context from several threads at once: a race);
- fp32 engines are built with the TF32 builder flag cleared, and the export records it;
- `library_version` knows the CUDA-specific TensorRT wheels; a TensorRT major that onnxruntime-gpu's EP cannot
  load is a probe reason naming both versions.
"""

from __future__ import annotations

import ctypes
import sys
import types

import numpy as np
import pytest

from tests.fake_cuda import FakeTorchCuda, run_threads

torch = pytest.importorskip("torch")

IN_SHAPE, OUT_SHAPE = (1, 3, 4, 4), (1, 3)


def _view(ptr: int, shape: tuple) -> np.ndarray:
    n = int(np.prod(shape))
    return np.ctypeslib.as_array((ctypes.c_float * n).from_address(ptr)).reshape(shape)


class FakeContext:
    def __init__(self, engine) -> None:
        self.engine = engine
        self.addresses: dict[str, int] = {}
        self.binds = 0
        self.handles: list[int] = []

    def set_tensor_address(self, name, ptr) -> None:
        self.addresses[name] = ptr
        self.binds += 1

    def set_input_shape(self, name, shape) -> bool:
        return True

    def get_tensor_shape(self, name):
        return OUT_SHAPE if name == "output0" else IN_SHAPE

    def execute_async_v3(self, handle) -> bool:
        self.handles.append(handle)
        x = _view(self.addresses["images"], IN_SHAPE)
        _view(self.addresses["output0"], OUT_SHAPE)[:] = x.max(axis=(2, 3))
        return True


class FakeEngine:
    num_io_tensors = 2

    def __init__(self) -> None:
        self.contexts: list[FakeContext] = []

    def get_tensor_name(self, i):
        return ("images", "output0")[i]

    def get_tensor_mode(self, name):
        return "in" if name == "images" else "out"

    def get_tensor_dtype(self, name):
        return "float"

    def get_tensor_shape(self, name):
        return IN_SHAPE

    def create_execution_context(self) -> FakeContext:
        c = FakeContext(self)
        self.contexts.append(c)
        return c

    def create_engine_inspector(self):
        raise RuntimeError("no inspector in the fake")


class FakeConfig:
    def __init__(self) -> None:
        self.flags = {"TF32"}  # TensorRT's default: TF32 allowed
        self.profiling_verbosity = None

    def clear_flag(self, flag) -> None:
        self.flags.discard(flag)

    def get_flag(self, flag) -> bool:
        return flag in self.flags


class FakeBuilder:
    def __init__(self, logger=None) -> None:
        self.configs: list[FakeConfig] = []

    def create_builder_config(self) -> FakeConfig:
        self.configs.append(FakeConfig())
        return self.configs[-1]


@pytest.fixture
def fake_trt(monkeypatch):
    trt = types.ModuleType("tensorrt")
    trt.__version__ = "10.13.3.9"
    trt.TensorIOMode = types.SimpleNamespace(INPUT="in", OUTPUT="out")
    trt.nptype = lambda dtype: np.float32
    trt.LayerInformationFormat = types.SimpleNamespace(JSON="json")
    trt.BuilderFlag = types.SimpleNamespace(TF32="TF32")
    trt.ProfilingVerbosity = types.SimpleNamespace(DETAILED="detailed")
    trt.Builder = FakeBuilder
    monkeypatch.setitem(sys.modules, "tensorrt", trt)
    return trt


def _runner(fake_trt):
    from harness.backends.tensorrt import TensorRTRunner

    engine, cuda = FakeEngine(), FakeTorchCuda()
    return TensorRTRunner(engine, engine.create_execution_context(), "cpu", cuda=cuda), engine, cuda


def test_single_stream_runs_on_the_current_stream_and_prepare_binds_once(fake_trt):
    r, engine, cuda = _runner(fake_trt)
    rng = np.random.default_rng(0)
    for _ in range(5):
        x = rng.random(IN_SHAPE, dtype=np.float32)
        np.testing.assert_allclose(r.outputs(r.run(r.prepare(x)))[0], x.max(axis=(2, 3)), rtol=1e-6)
    main = engine.contexts[0]
    assert main.binds == 2  # input and output addresses, set once for the shape
    assert main.handles == [cuda.default.cuda_stream] * 5


def test_each_stream_has_its_own_context_buffers_and_cuda_stream(fake_trt):
    r, engine, cuda = _runner(fake_trt)
    r.prepare(np.zeros(IN_SHAPE, dtype=np.float32))
    streams = r.streams(3)
    assert streams.concurrent and "3 execution contexts" in streams.mechanism
    assert len(engine.contexts) == 4
    ctxs = engine.contexts[1:]
    assert len({c.addresses["images"] for c in ctxs} | {engine.contexts[0].addresses["images"]}) == 4
    errors: list = []

    def worker(call, seed):
        rng = np.random.default_rng(seed)
        for _ in range(30):
            x = rng.random(IN_SHAPE, dtype=np.float32)
            got = r.outputs(call(r.prepare(x)))[0]  # prepare from several threads at once, too
            if not np.allclose(got, x.max(axis=(2, 3)), rtol=1e-6):
                errors.append(seed)

    run_threads(worker, streams.calls)
    assert errors == []
    streams_made = cuda.streams_made
    for ctx, stream in zip(ctxs, streams_made, strict=True):
        assert set(ctx.handles) == {stream.cuda_stream} and len(ctx.handles) == 30
    assert engine.contexts[0].binds == 2  # threads preparing never rebound the main context
    r.streams(3)  # asked again (the offline sweep): the contexts are kept
    assert len(engine.contexts) == 4


def test_fp32_engines_are_built_without_tf32_and_say_so(fake_trt):
    from harness.backends.tensorrt import detailed_layer_information

    flags: dict = {}
    with detailed_layer_information(flags, tf32_off=True):
        config = fake_trt.Builder().create_builder_config()
    assert not config.get_flag("TF32") and flags == {"tf32": False, "tf32_cleared": True}
    assert config.profiling_verbosity == "detailed"
    assert fake_trt.Builder is FakeBuilder  # restored
    # the other way: fp16 engines keep TensorRT's default
    flags = {}
    with detailed_layer_information(flags, tf32_off=False):
        config = fake_trt.Builder().create_builder_config()
    assert config.get_flag("TF32") and flags == {"tf32": True, "tf32_cleared": False}


def test_library_version_knows_the_cuda_specific_tensorrt_wheels(monkeypatch):
    from importlib import metadata

    from harness.backends.base import library_version

    def version(dist):
        if dist == "tensorrt-cu13":
            return "10.13.3.9"
        raise metadata.PackageNotFoundError(dist)

    monkeypatch.setattr(metadata, "version", version)
    assert library_version("tensorrt") == "10.13.3.9"
    monkeypatch.setattr(
        metadata, "version", lambda d: (_ for _ in ()).throw(metadata.PackageNotFoundError(d))
    )
    assert library_version("tensorrt") is None


def test_a_tensorrt_the_ep_cannot_load_is_a_reason_naming_both_versions():
    from harness.backends.onnxruntime_trt import tensorrt_mismatch

    why = tensorrt_mismatch("1.31.1", "11.4.0.106")
    assert "onnxruntime-gpu 1.31.1" in why and "11.4.0.106" in why and "libnvinfer.so.10" in why
    assert tensorrt_mismatch("1.31.1", "10.13.3.9") is None
    assert tensorrt_mismatch("1.31.1", None) is None
