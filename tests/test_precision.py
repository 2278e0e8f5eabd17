"""The precision a runtime executes is read from the runtime (never copied from the request), with its source.

Real fp32 exports of yolo26n at 160x160 (shared with tests/test_threads.py through the session's cache directory),
and cases where the runtime's answer differs from an fp32 request: OpenVINO compiled with a bf16/f16 hint, an ONNX
graph converted to fp16, a quantized ONNX graph, an fp16 torch model.
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from harness.backends._shared.precision import DOMINANT, verdict
from tests import test_threads as shared

export = pytest.mark.export
slow = pytest.mark.slow


# -- the verdict rule --------------------------------------------------------------------------------------------
def test_verdict_rule():
    assert verdict({"f32": 137, "i32": 3}) == "fp32"  # integer index arithmetic does not decide
    assert verdict({"bf16": 130, "f32": 7}) == "bf16"  # 95% of the deciding layers
    assert verdict({"FLOAT16": 89, "FLOAT": 11}) == "mixed"  # below DOMINANT
    assert (
        verdict({"torch.float16": int(DOMINANT * 100), "torch.float32": 100 - int(DOMINANT * 100)}) == "fp16"
    )
    assert verdict({"torch.int64": 5}) is None and verdict({}) is None
    assert verdict({"u8": 50, "i8": 50}) == "int8"


# -- OpenVINO: runtime precisions of the execution graph ---------------------------------------------------------
@slow
@export
def test_openvino_fp32_from_the_execution_graph(cache_dir):
    runner = shared.load_runner(cache_dir, "openvino")
    assert runner.precision_executed == "fp32"
    assert "get_runtime_model" in runner.precision_source and "runtimePrecision" in runner.precision_source
    detail = runner.precision_detail
    assert detail["compute"]["f32"] > 100 and not {"bf16", "f16"} & set(detail["compute"])
    assert detail["by_layer_type"]["Convolution"] == {"f32": detail["by_layer_type"]["Convolution"]["f32"]}
    assert detail["inference_precision_hint"] == "f32"


def _cpu_capabilities() -> list[str]:
    import openvino as ov

    return list(ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"))


def _compile(cache_dir, hint: str):
    import openvino as ov

    from harness.backends.openvino import OpenVinoRunner, compile_config
    from harness.core.cell import Cell

    artifact = Path(shared.exported(cache_dir, "openvino").artifact)
    xml = next(artifact.glob("*.xml"))
    cell = Cell("n", "detect", "e2e", "openvino", "cpu", shared.SHAPE)
    core = ov.Core()
    compiled = core.compile_model(core.read_model(str(xml)), "CPU", compile_config(cell, precision_hint=hint))
    return OpenVinoRunner(compiled, "cpu")


@slow
@export
def test_openvino_bf16_hint_reads_back_bf16(cache_dir):
    caps = _cpu_capabilities()
    if "BF16" not in caps:
        pytest.skip(
            f"this CPU has no bf16 support in OpenVINO (OPTIMIZATION_CAPABILITIES: {', '.join(caps)})"
        )
    runner = _compile(cache_dir, "bf16")
    assert runner.precision_executed == "bf16", runner.precision_detail
    assert runner.precision_detail["by_layer_type"]["Convolution"].get("bf16", 0) > 100


@slow
@export
def test_openvino_f16_hint_reads_back_what_the_cpu_runs(cache_dir):
    """An f16 request runs f16 only where the CPU has native fp16; elsewhere OpenVINO substitutes, and says so."""
    caps = _cpu_capabilities()
    expected = "fp16" if "FP16" in caps else "bf16" if "BF16" in caps else "fp32"
    runner = _compile(cache_dir, "f16")
    assert runner.precision_executed == expected, (caps, runner.precision_detail)


# -- ONNX Runtime: the graph's element types ---------------------------------------------------------------------
@slow
@export
def test_onnxruntime_fp32_from_the_graph(cache_dir):
    runner = shared.load_runner(cache_dir, "onnxruntime")
    assert runner.precision_executed == "fp32"
    assert "element types of the ONNX graph" in runner.precision_source
    d = runner.precision_detail
    assert d["input"] == "FLOAT" and d["initializers"]["FLOAT"] > 100 and d["quantize_ops"] == {}
    assert "FLOAT16" not in d["initializers"] and d["value_infos"]["FLOAT"] > 100


@slow
@export
def test_onnxruntime_fp16_graph_reads_back_fp16(cache_dir, tmp_path):
    import onnx
    import onnxruntime as ort

    from harness.backends.onnxruntime import OrtRunner, session_options

    try:
        from onnxruntime.transformers.float16 import convert_float_to_float16
    except ImportError as e:
        pytest.skip(f"onnxruntime.transformers.float16 is not importable ({e})")
    model = onnx.load(shared.exported(cache_dir, "onnxruntime").artifact)
    path = tmp_path / "fp16.onnx"
    onnx.save(convert_float_to_float16(model, keep_io_types=False), str(path))
    session = ort.InferenceSession(
        str(path), sess_options=session_options(1), providers=["CPUExecutionProvider"]
    )
    runner = OrtRunner(session, path)
    assert runner.precision_executed == "fp16", runner.precision_detail
    assert runner.precision_detail["input"] == "FLOAT16"
    shared.run_once(runner)  # the CPU provider runs it (with casts where it has no fp16 kernel)


def test_onnx_quantize_operators_make_an_int8_graph(tmp_path):
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from harness.backends.onnxruntime import graph_precision

    scale = numpy_helper.from_array(np.array(0.1, dtype=np.float32), "scale")
    zero = numpy_helper.from_array(np.array(0, dtype=np.int8), "zero")
    graph = helper.make_graph(
        [
            helper.make_node("QuantizeLinear", ["x", "scale", "zero"], ["q"]),
            helper.make_node("DequantizeLinear", ["q", "scale", "zero"], ["y"]),
        ],
        "qdq",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [scale, zero],
    )
    path = tmp_path / "qdq.onnx"
    path.write_bytes(helper.make_model(graph).SerializeToString())
    executed, source, detail = graph_precision(path)
    assert executed == "int8" and detail["quantize_ops"] == {"QuantizeLinear": 1, "DequantizeLinear": 1}
    assert "element types of the ONNX graph" in source


# -- ExecuTorch: dtypes of the lowered graph, counted at export --------------------------------------------------
@slow
@export
def test_executorch_precision_from_the_export_info(cache_dir):
    result = shared.exported(cache_dir, "executorch-xnnpack")
    dtypes = result.info["dtypes"]
    assert dtypes["delegated"]["torch.float32"] > 100  # the XNNPACK subgraphs were reachable and counted
    assert dtypes["delegated_subgraphs_unread"] == 0
    runner = shared.load_runner(cache_dir, "executorch-xnnpack")
    assert runner.precision_executed == "fp32"
    assert runner.precision_source.startswith("export-time dtypes of the lowered graph")
    assert runner.precision_detail == dtypes


def test_executorch_without_dtypes_says_why():
    from harness.backends._shared.executorch_export import executorch_precision

    executed, source, detail = executorch_precision({"ops": {}})
    assert executed is None and detail is None and "no dtype counts" in source
    executed, _, _ = executorch_precision({"dtypes": {"portable": {"torch.float16": 40}, "delegated": {}}})
    assert executed == "fp16"


# -- torch: the parameters' dtype ---------------------------------------------------------------------------------
@slow
@export
def test_torch_eager_fp32_from_the_parameters(cache_dir):
    runner = shared.load_runner(cache_dir, "torch-eager")
    assert runner.precision_executed == "fp32"
    assert runner.precision_source == "dtypes of the model's parameters as loaded"
    assert set(runner.precision_detail) == {"parameters"}  # no TF32 switches on the CPU
    assert runner.precision_detail["parameters"]["torch.float32"] > 100


def test_torch_fp16_model_reads_back_fp16():
    import torch

    from harness.backends.torch_eager import TorchRunner

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.Conv2d(8, 4, 1)).half()
    runner = TorchRunner(model, "cpu", torch.float32)  # the dtype asked for is not what is reported
    assert runner.precision_executed == "fp16"
    assert runner.precision_detail == {"parameters": {"torch.float16": 4}}


def test_tf32_is_off_for_fp32_cuda_cells_and_recorded():
    """CUDA cells: TF32 off for fp32, and the switches as torch reports them are in the detail (no GPU needed)."""
    import torch

    from harness.backends.torch_eager import set_tf32, torch_precision

    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        set_tf32("cpu", torch.float32)
        assert torch.backends.cudnn.allow_tf32 is True  # CPU cells leave the CUDA switches alone
        set_tf32("cuda", torch.float16)
        assert torch.backends.cudnn.allow_tf32 is True  # fp16 kernels do not use TF32: left as they are
        assert torch_precision([torch.zeros(3).half()], "cuda")[2]["tf32_cudnn"] is True
        set_tf32("cuda", torch.float32)
        executed, source, detail = torch_precision([torch.zeros(3)], "cuda")
        assert executed == "fp32" and "TF32" in source
        assert detail == {"parameters": {"torch.float32": 1}, "tf32_matmul": False, "tf32_cudnn": False}
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def test_aoti_precision_from_the_export_info():
    from harness.backends.aoti import aoti_precision

    info = {
        "parameter_dtypes": {"torch.float32": 206},
        "graph_dtypes": {"torch.float32": 338, "torch.int64": 17},
    }
    executed, source, detail = aoti_precision(info, "cpu")
    assert executed == "fp32" and "AOTInductor compiled" in source
    assert detail == {"parameters": info["parameter_dtypes"], "graph_values": info["graph_dtypes"]}
    assert aoti_precision({}, "cpu")[0] is None


# -- TensorRT: the engine inspector (no GPU here: a stand-in engine returns TensorRT's layer JSON) ----------------
def _layer(kind: str, fmt: str, tactic: str = "") -> dict:
    return {
        "Name": f"{kind} layer",
        "LayerType": kind,
        "Inputs": [
            {"Name": "in", "Location": "Device", "Dimensions": [1, 16, 40, 40], "Format/Datatype": fmt}
        ],
        "Outputs": [
            {"Name": "out", "Location": "Device", "Dimensions": [1, 16, 40, 40], "Format/Datatype": fmt}
        ],
        "TacticName": tactic,
    }


class _Engine:
    def __init__(self, info: dict) -> None:
        self.info = info

    def create_engine_inspector(self):
        engine = self

        class Inspector:
            execution_context = None

            def get_engine_information(self, fmt):
                assert fmt == "JSON"
                return json.dumps(engine.info)

        return Inspector()


def test_tensorrt_engine_inspector_layers(monkeypatch):
    monkeypatch.setitem(
        sys.modules,
        "tensorrt",
        types.SimpleNamespace(LayerInformationFormat=types.SimpleNamespace(JSON="JSON")),
    )
    from harness.backends.tensorrt import engine_precision

    fp16 = "Channel major FP16 format where channel % 8 == 0"
    layers = [_layer("CaskConvolution", fp16, "sm80_xmma_fprop_implicit_gemm_f16f16") for _ in range(30)]
    layers += [_layer("Reformat", "Row major linear FP32 format")] * 5
    layers += [_layer("TopK", "Row major linear FP32 format"), _layer("Gather", "Row major Int32 format")]
    executed, source, detail = engine_precision(_Engine({"Layers": layers}), None, {"quantize": "fp16"})
    assert executed == "fp16" and "engine inspector" in source
    assert detail["compute"] == {"FP16": 30, "FP32": 1, "INT32": 1} and detail["data"] == {"FP32": 5}
    assert detail["tf32_tactic_layers"] == 0

    tf32 = [
        _layer("CaskConvolution", "Row major linear FP32 format", "sm80_xmma_fprop_tf32f32") for _ in range(4)
    ]
    executed, _, detail = engine_precision(_Engine({"Layers": tf32}), None, {"tf32_builder_flag": True})
    assert executed == "fp32" and detail["tf32_tactic_layers"] == 4 and detail["tf32_builder_flag"] is True

    executed, source, detail = engine_precision(
        _Engine({"Layers": ["conv1", "conv2"]}), None, {"quantize": "fp32"}
    )
    assert executed is None and "names only" in source and detail["layers"] == 2

    class Broken:
        def create_engine_inspector(self):
            raise RuntimeError("no inspector")

    executed, source, detail = engine_precision(Broken(), None, {})
    assert executed is None and "no inspector" in source and detail is None
