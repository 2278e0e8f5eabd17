"""Operator coverage of real yolo26n exports (160x160) under ONNX Runtime and OpenVINO."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.axes import Shape
from harness.diagnosis.coverage import onnxruntime_coverage, openvino_coverage
from tests.conftest import shared_export


@pytest.fixture(scope="module")
def exports(cache_dir):
    """The ONNX and OpenVINO exports of yolo26n (end-to-end head) at 160 a run makes, from the session's export
    cache (tests/conftest.py shared_export): the artifacts other modules' runs at that shape time."""
    return {
        fmt: Path(shared_export(cache_dir, backend, Shape(160, 160)).artifact)
        for fmt, backend in (("onnx", "onnxruntime"), ("openvino", "openvino"))
    }


@pytest.mark.slow
@pytest.mark.export
def test_onnxruntime_cpu_places_every_node_on_cpu(exports):
    import onnx

    nodes = len(onnx.load(str(exports["onnx"])).graph.node)
    as_written = onnxruntime_coverage(exports["onnx"], ["CPUExecutionProvider"], optimize=False)
    assert as_written["delegated"] == nodes  # every node of the file, as ORT partitioned it
    assert (as_written["fallback"], as_written["fallback_ops"]) == (0, [])
    cov = onnxruntime_coverage(exports["onnx"], ["CPUExecutionProvider"])
    assert cov["providers"] == ["CPUExecutionProvider"]
    assert 0 < cov["delegated"] <= nodes  # after ORT's fusions
    assert cov["fallback"] == 0
    placed = cov["by_provider"]["CPUExecutionProvider"]
    assert placed["nodes"] == cov["delegated"]
    assert {"Conv", "TopK"} <= set(placed["op_types"])


@pytest.mark.slow
@pytest.mark.export
def test_onnxruntime_missing_provider_falls_back_entirely(exports):
    import onnxruntime as ort

    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this onnxruntime has the CUDA provider")
    cov = onnxruntime_coverage(exports["onnx"], ["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert cov["unavailable"] == ["CUDAExecutionProvider"]
    assert cov["delegated"] == 0
    assert cov["fallback"] == cov["by_provider"]["CPUExecutionProvider"]["nodes"] > 0
    assert {"Conv", "TopK"} <= set(cov["fallback_ops"])


@pytest.mark.slow
@pytest.mark.export
def test_openvino_cpu_supports_every_operator(exports):
    cov = openvino_coverage(exports["openvino"], "CPU")
    assert cov["delegated"] > 0
    assert (cov["fallback"], cov["fallback_ops"]) == (0, [])
    assert sum(cov["op_types"].values()) == cov["delegated"] + cov["fallback"]
    assert {"Convolution", "TopK"} <= set(cov["op_types"])
    assert not {"Parameter", "Result", "Constant"} & set(cov["op_types"])


@pytest.mark.slow
@pytest.mark.export
def test_openvino_coverage_accepts_the_xml_file(exports):
    xml = next(exports["openvino"].glob("*.xml"))
    assert openvino_coverage(xml)["delegated"] == openvino_coverage(exports["openvino"])["delegated"]


@pytest.mark.slow
@pytest.mark.export
def test_openvino_absent_device_raises(exports):
    import openvino as ov

    if "GPU" in ov.Core().available_devices:
        pytest.skip("this host has an OpenVINO GPU device")
    with pytest.raises(RuntimeError, match=r"(?i)gpu"):
        openvino_coverage(exports["openvino"], "GPU")


def test_onnxruntime_coverage_of_a_two_node_graph(tmp_path):
    """The fast tier's case: a Conv then a TopK, written with onnx.helper (no export), all placed on the CPU; the
    other way, a provider this build lacks is named unavailable and every node is fallback."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    k = numpy_helper.from_array(np.array([2], np.int64), "k")
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1]),
            helper.make_node("TopK", ["y", "k"], ["values", "indices"], axis=-1),
        ],
        "two",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [
            helper.make_tensor_value_info("values", TensorProto.FLOAT, [1, 4, 8, 2]),
            helper.make_tensor_value_info("indices", TensorProto.INT64, [1, 4, 8, 2]),
        ],
        [weight, k],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "two.onnx"
    onnx.save(model, str(path))
    cov = onnxruntime_coverage(path, ["CPUExecutionProvider"], optimize=False)
    assert (cov["delegated"], cov["fallback"], cov["fallback_ops"]) == (2, 0, [])
    assert set(cov["by_provider"]["CPUExecutionProvider"]["op_types"]) == {"Conv", "TopK"}
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        other = onnxruntime_coverage(path, ["CUDAExecutionProvider", "CPUExecutionProvider"], optimize=False)
        assert other["unavailable"] == ["CUDAExecutionProvider"]
        assert (other["delegated"], other["fallback"]) == (0, 2)
