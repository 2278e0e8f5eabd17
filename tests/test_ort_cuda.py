"""ONNX Runtime on CUDA without a silent CPU fallback, and one IOBinding per stream (issue 24, defects 3 and 4).

The fallback is real here: this machine's onnxruntime is the CPU build, and a session created for the
CUDAExecutionProvider runs on the CPU provider with only a warning. The I/O binding runner runs on the CPU device
(the same code path the CUDA EP takes), from several threads at once.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from harness import backends
from harness.backends._shared.ort_cuda import ProviderFallback, preload_cuda_libraries, require_provider
from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.record import new_record
from harness.diagnosis.failure import failure_from_exception
from harness.execute.ladder import next_remedy
from tests.fake_cuda import run_threads

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")


@pytest.fixture
def model_path(tmp_path):
    from onnx import TensorProto, helper

    w = np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["images", "w"], ["c"], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c"], ["output0"]),
        ],
        "g",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, [1, 4, 8, 8])],
        [helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.ravel())],
    )
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    return path


@pytest.mark.skipif(
    "CUDAExecutionProvider" in ort.get_available_providers(), reason="asserts the CPU build's fallback"
)
def test_a_cuda_session_that_fell_back_to_the_cpu_fails_the_cell_with_the_reason(model_path):
    cell = Cell("n", "detect", "e2e", "onnxruntime", "cuda", Shape(8, 8))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ORT's own fallback warning: the point is that it is only a warning
        with pytest.raises(ProviderFallback, match="CUDAExecutionProvider did not load") as info:
            backends.get("onnxruntime").load(model_path, cell, {})
    assert "runs on CPUExecutionProvider" in str(info.value)
    f = failure_from_exception(info.value, "load", None)
    assert f["class"] == "dependency_missing"
    failed = new_record("r", cell, "random-init:0")
    failed.status, failed.failure = "load_failed", f
    assert next_remedy(cell, [], failed, False) is None  # no remedy for it
    # the other way: a session on the provider it was created for passes
    require_provider(
        ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"]), "CPUExecutionProvider"
    )


def test_preload_is_called_where_onnxruntime_has_it():
    class WithPreload:
        __version__ = "1.31.0"
        calls = 0

        def preload_dlls(self):
            WithPreload.calls += 1

    class Old:
        __version__ = "1.20.0"

    assert preload_cuda_libraries(WithPreload()) is None and WithPreload.calls == 1
    assert "predates 1.21" in preload_cuda_libraries(Old())


def test_each_stream_has_its_own_io_binding_and_threads_get_their_own_results(model_path):
    from harness.backends._shared.ort_iobinding import OrtIOBindingRunner

    session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    r = OrtIOBindingRunner(session, ("fp32", "test: given", None), device_id=0, device_type="cpu")
    streams = r.streams(4)
    assert streams.concurrent and "IOBinding of its own" in streams.mechanism
    errors: list = []

    def worker(call, seed):
        rng = np.random.default_rng(seed)
        for _ in range(50):
            x = rng.random((1, 3, 8, 8), dtype=np.float32)
            got = r.outputs(call(r.prepare(x)))[0]  # prepare from several threads at once, too
            want = session.run(None, {"images": x})[0]
            if not np.allclose(got, want, rtol=1e-5, atol=1e-6):
                errors.append(seed)

    run_threads(worker, streams.calls)
    assert errors == []
    assert len({id(b.binding) for b in r.stream_bindings.values()} | {id(r.binding)}) == 5
    assert r.streams(4).calls and len(r.stream_bindings) == 4  # the offline sweep asks again: kept
    r.close()
