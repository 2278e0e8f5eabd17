"""The failure classifier on the real messages quoted in the seed documents and on failures provoked here for real.

The seed documents and the facts file are copied verbatim into tests/data/quoted/ (each file's first line says from
where): a clone of this repository alone has everything these tests read.
"""

from __future__ import annotations

import re
import sys
import traceback
from pathlib import Path

import pytest

from harness.diagnosis.classify import classify, failure_classes, load_patterns, parse_patterns

REPO = Path(__file__).resolve().parents[1]
QUOTED = REPO / "tests" / "data" / "quoted"
FACTS = QUOTED / "FACTS.md"


def classify_exception(exc: BaseException, **kwargs) -> dict:
    """What the isolated worker records for an exception, classified."""
    tb = "".join(traceback.format_exception(exc))
    return classify(str(exc), tb, f"{type(exc).__module__}.{type(exc).__qualname__}", **kwargs)


# -- the real messages quoted in the project's seed documents ----------------------------------------------------


def _seed_files() -> list[Path]:
    files = sorted(QUOTED.glob("seed_*.txt"))
    assert files, f"no quoted seed documents (seed_*.txt) in {QUOTED}"
    return files


def _seed_text(prefix: str) -> str:
    files = [f for f in _seed_files() if f.name.startswith(f"seed_{prefix}_")]
    assert files, f"no quoted seed document seed_{prefix}_*.txt in {QUOTED}"
    return files[0].read_text(encoding="utf-8")


def quoted(text: str, needle: str) -> str:
    """The fenced code block, else the inline `code` span, that quotes `needle` (as the document quotes it)."""
    for block in re.findall(r"```[^\n]*\n(.*?)```", text, re.DOTALL):
        if needle in block:
            return block
    for span in re.findall(r"`([^`]+)`", text):
        if needle in " ".join(span.split()):
            return span
    raise AssertionError(f"{needle!r} is not quoted in the document")


SEED_CASES = [
    # (seed, needle, class, ops, exception_type's last part)
    (
        "000",
        "Lowering not implemented for backend: CudaDevice",
        "unsupported_op",
        ["aten.index_put.default"],
        "LoweringException",
    ),
    ("000", "Constraints violated (height, width)!", "guard_violation", [], "UserError"),
    ("001", "indices must be int64, byte or bool", "dtype_error", ["aten.index.Tensor"], "LoweringException"),
    ("001", "NoValidChoicesError: No choices to select.", "compile_error", [], "NoValidChoicesError"),
    ("003", "coreml: Operator not supported by CoreML", "unsupported_op", [], None),
    ("003", "No available backends from requested", "dependency_missing", [], None),
    ("003", "Requires Qualcomm QNN SDK", "dependency_missing", [], None),
]


@pytest.mark.parametrize(
    ("seed", "needle", "cls", "ops", "etype"), SEED_CASES, ids=[c[1][:40] for c in SEED_CASES]
)
def test_seed_messages(seed, needle, cls, ops, etype):
    f = classify(quoted(_seed_text(seed), needle))
    assert f["class"] == cls, f
    assert f["ops"] == ops
    if etype:
        assert f["exception_type"].rsplit(".", 1)[-1] == etype
        assert not f["message"].startswith(f["exception_type"])  # the message is the exception's own text
    assert f["message"] and not f["message"].startswith(("Traceback", "```"))


def test_seed_guard_violation_carries_torch_suggested_fix():
    f = classify(quoted(_seed_text("000"), "Constraints violated (height, width)!"))
    assert f["exception_type"] == "torch._dynamo.exc.UserError"
    assert f["message"] == "Constraints violated (height, width)!"
    assert f["suggested_fix"] == "height = 640, width = 640"


@pytest.mark.parametrize(
    ("seed", "needle"),
    [
        ("000", "(1 + ((height - 1) // 16)) == (2 + 2*((height - 1) // 32))"),
        ("001", "(1 + ((height-1) // 16)) == (2 + 2*((height-1) // 32))"),
    ],
)
def test_seed_guards_are_extracted(seed, needle):
    f = classify(quoted(_seed_text(seed), needle))
    assert f["class"] == "guard_violation"
    assert needle in f["guards"]


def test_every_error_quoted_in_the_seeds_is_recognised():
    blocks = [
        b
        for f in _seed_files()
        for b in re.findall(r"```[^\n]*\n(.*?)```", f.read_text(encoding="utf-8"), re.DOTALL)
        if re.search(r"^[\w.]+(Error|Exception)\b:", b, re.MULTILINE)
    ]
    assert len(blocks) >= 4
    for b in blocks:
        assert classify(b)["class"] != "unknown", b


@pytest.mark.parametrize(
    ("needle", "cls"),
    [
        (
            "Lowering not implemented for backend: CudaDevice for target: aten.index_put.default",
            "unsupported_op",
        ),
        ("indices must be int64, byte or bool", "dtype_error"),
        ("NoValidChoicesError", "compile_error"),
        ("missing fallback kernels", "missing_fallback_kernel"),
        ("Constraints violated (height, width)!", "guard_violation"),
    ],
)
def test_facts_messages(needle, cls):
    assert FACTS.is_file(), f"quoted facts file missing: {FACTS}"
    f = classify(quoted(FACTS.read_text(encoding="utf-8"), needle))
    assert f["class"] == cls, f
    if "target:" in needle:
        assert f["ops"] == ["aten.index_put.default"]


# -- message formats of failures that cannot be provoked on this CPU host (strings as the libraries write them) ----

# captured from the executorch-arm export of yolo26n at 320 (tosa-tools 2026.5.0, ethos-u-vela 5.1.0)
ARM_QUANTIZER = "Quantizer detected operator new_full with different device inputs: {'cpu', 'Could not get device from 8.0'}."
# the format executorch's AOTI backend (aoti_backend.py) raises
MISSING_KERNELS = (
    "Method forward missing fallback kernels (2 total):\n  - aoti_torch_cuda_topk\n  - at::_ops::sort::call\n"
    "Please add them to the AOTI backend."
)
ONNX_UNSUPPORTED = "Exporting the operator 'aten::unique_dim' to ONNX opset version 17 is not supported."

FORMATS = [
    (ARM_QUANTIZER, "builtins.ValueError", "unsupported_op"),
    (MISSING_KERNELS, "builtins.RuntimeError", "missing_fallback_kernel"),
    (ONNX_UNSUPPORTED, "torch.onnx.errors.UnsupportedOperatorError", "unsupported_op"),
    (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "79.1 GiB",
        None,
        "out_of_memory",
    ),
    (
        "[TRT] [E] IBuilder::buildSerializedNetwork: Error Code 4: Internal Error (Network has dynamic or shape "
        "inputs, but no optimization profile has been defined.)",
        None,
        "compile_error",
    ),
    (
        "Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a driver",
        "builtins.RuntimeError",
        "device_missing",
    ),
    ("No module named 'tensorrt'", "builtins.ModuleNotFoundError", "dependency_missing"),
    (
        "Could not guard on data-dependent expression Eq(u0, 1) (unhinted: Eq(u0, 1)).",
        "torch.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode",
        "guard_violation",
    ),
    (
        "[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : Non-zero status code returned while running Conv node.",
        "onnxruntime.capi.onnxruntime_pybind11_state.RuntimeException",
        "runtime_error",
    ),
]


@pytest.mark.parametrize(
    ("message", "etype", "cls"), FORMATS, ids=[f"{f[2]}-{i}" for i, f in enumerate(FORMATS)]
)
def test_known_formats(message, etype, cls):
    assert classify(message, exception_type=etype)["class"] == cls


def test_missing_fallback_kernels_lists_the_kernels():
    f = classify(MISSING_KERNELS, exception_type="builtins.RuntimeError")
    assert f["ops"] == ["aoti_torch_cuda_topk", "at::_ops::sort::call"]
    assert f["message"] == "Method forward missing fallback kernels (2 total):"


def test_unsupported_operators_are_named():
    assert classify(ONNX_UNSUPPORTED)["ops"] == ["aten::unique_dim"]
    assert classify(ARM_QUANTIZER)["ops"] == ["new_full"]


def test_process_endings_decide_before_text():
    segv = classify("export process killed by SIGSEGV", signal="SIGSEGV", status="crashed")
    assert (segv["class"], segv["signal"]) == ("crash", "SIGSEGV")
    # A SIGKILL is out of memory only when the kernel's OOM record says so (harness.diagnosis.kernel_oom).
    oom = (
        "export process killed by SIGKILL: the kernel's OOM killer ended it (Out of memory: Killed process 7)"
    )
    assert classify(oom, signal="SIGKILL", status="crashed")["class"] == "out_of_memory"
    outside = "export process killed by SIGKILL from outside (the kernel log records no out-of-memory kill of pid 7)"
    assert classify(outside, signal="SIGKILL", status="crashed")["class"] == "killed"
    unread = "export process killed by signal 9 (SIGKILL); the kernel log (dmesg) could not be read, so ..."
    assert classify(unread, signal="SIGKILL", status="crashed")["class"] == "killed"
    assert classify("export exceeded the 3 s timeout", status="timeout")["class"] == "timeout"
    assert (
        classify("export process exited with status 1 without a result", status="crashed")["class"] == "crash"
    )


def test_fallbacks_by_stage_and_status():
    assert (
        classify("something odd", exception_type="builtins.RuntimeError", stage="run")["class"]
        == "runtime_error"
    )
    assert (
        classify("something odd", exception_type="builtins.RuntimeError", stage="load")["class"]
        == "runtime_error"
    )
    assert classify("something odd", exception_type="builtins.RuntimeError")["class"] == "unknown"
    assert (
        classify("rel_l2 0.3 exceeds the fp32 tolerance 0.001", stage="parity")["class"]
        == "numerical_mismatch"
    )
    empty = classify(None)
    assert empty["class"] == "unknown" and empty["message"] is None


def test_message_is_the_exception_line_not_traceback_or_warning():
    tb = (
        "/x/contextlib.py:144: UserWarning: The tensor attributes were assigned during export.\n"
        "  next(self.gen)\n"
        "Traceback (most recent call last):\n"
        '  File "/x/a.py", line 3, in <module>\n'
        "    import nncf\n"
        "ModuleNotFoundError: No module named 'nncf'\n"
    )
    f = classify(None, tb)
    assert f["message"] == "No module named 'nncf'"
    assert f["exception_type"] == "ModuleNotFoundError"
    assert f["class"] == "dependency_missing"
    assert (
        classify("UserWarning: deprecated\nreal failure here", stage="run")["message"] == "real failure here"
    )


def test_text_in_the_message_outranks_the_traceback():
    # A warning deep in the log mentions an unsupported op; the exception itself ran out of memory.
    tb = "W1122 warning: operator aten.foo.default is not supported, falling back\nMemoryError\n"
    assert classify("", tb, "builtins.MemoryError")["class"] == "out_of_memory"


def test_failure_dict_has_the_record_fields():
    f = classify("boom")
    assert set(f) >= {"class", "stage", "message", "ops", "guards", "suggested_fix", "exception_type", "log"}
    assert f["log"] is None


def test_patterns_are_validated():
    classes = failure_classes()
    assert {"unsupported_op", "guard_violation", "out_of_memory", "unknown"} <= set(classes)
    assert {r.cls for r in load_patterns().rules} <= set(classes)
    with pytest.raises(ValueError, match="unknown keys"):
        parse_patterns(
            {
                "schema_version": 1,
                "classes": ["crash"],
                "rules": [{"class": "crash", "regex": "x"}],
                "fallback": {"default": "crash"},
                "suggested_fix_header": "x",
            }
        )
    with pytest.raises(ValueError, match="not one of"):
        parse_patterns(
            {
                "schema_version": 1,
                "classes": ["crash"],
                "rules": [{"class": "nope"}],
                "fallback": {"default": "crash"},
                "suggested_fix_header": "x",
            }
        )
    with pytest.raises(ValueError, match="schema_version"):
        parse_patterns({"schema_version": 99})


# -- failures provoked for real ------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.export
def test_real_dynamic_export_is_a_guard_violation(tmp_path):
    """torch.export of yolo26n with free height/width over 320..1280 fails on torch's guards (FACTS: ~11 s)."""
    from harness.backends._shared.executorch_export import exported_program
    from harness.backends.base import ExportRequest
    from harness.yolo.dynamic import dynamic_shapes_spec
    from harness.yolo.models import ModelSource, materialize

    assert dynamic_shapes_spec({})[0][2].min == 320  # the free range this test relies on
    mat = materialize(ModelSource("n", "detect"), tmp_path / "cache")
    req = ExportRequest(
        backend="executorch-xnnpack",
        device="cpu",
        checkpoint=str(mat.checkpoint),
        size="n",
        task="detect",
        head="raw",
        height=320,
        width=320,
        dynamic=True,
        batch=1,
        precision="fp32",
        out_dir=str(tmp_path / "out"),
    )
    with pytest.raises(Exception) as info:
        exported_program(req)
    f = classify_exception(info.value)
    assert f["class"] == "guard_violation", f
    assert f["exception_type"] == "torch._dynamo.exc.UserError"
    assert f["message"].startswith("Constraints violated (height, width)!")
    assert "(1 + ((height - 1) // 16)) == (2 + 2*((height - 1) // 32))" in f["guards"]
    assert "(1 + ((width - 1) // 8)) == (4 + 4*((width - 1) // 32))" in f["guards"]
    assert "height = 32*_height" in f["suggested_fix"]
    assert "width = 32*_width" in f["suggested_fix"]
    # The traceback alone (what a log holds) gives the same diagnosis.
    from_log = classify(None, "".join(traceback.format_exception(info.value)))
    assert (from_log["class"], from_log["guards"]) == (f["class"], f["guards"])


def test_real_executorch_openvino_partitioner_needs_nncf():
    try:
        from executorch.backends.openvino.partitioner import OpenvinoPartitioner  # noqa: F401
    except ImportError as e:
        f = classify_exception(e)
    else:
        pytest.skip("nncf is installed: the ExecuTorch OpenVINO partitioner imports")
    assert f["class"] == "dependency_missing", f
    assert "nncf" in f["message"]


def test_real_arm_partitioner_needs_tosa_serializer():
    try:
        from executorch.backends.arm.ethosu import EthosUPartitioner  # noqa: F401
    except ImportError as e:
        f = classify_exception(e)
    else:
        pytest.skip("the TOSA serializer is installed")
    assert f["class"] == "dependency_missing", f
    assert f["message"] == "No module named 'tosa_serializer'"


@pytest.mark.skipif(sys.platform == "darwin", reason="the Metal backend's MPS kernels exist on macOS")
def test_real_metal_backend_on_linux_lacks_its_mps_library():
    from executorch.backends.apple.metal.metal_backend import MetalBackend

    with pytest.raises(Exception) as info:
        MetalBackend.get_aoti_compile_options([])  # the first step of lowering that needs the MPS kernels
    f = classify_exception(info.value)
    assert f["class"] == "dependency_missing", f
    assert "libtorchao_ops_mps_aten" in f["message"]


def test_real_openvino_gpu_plugin_without_opencl():
    import openvino as ov

    core = ov.Core()
    if "GPU" in core.available_devices:
        pytest.skip("this host has an OpenVINO GPU device")
    with pytest.raises(RuntimeError) as info:
        core.get_property("GPU", "FULL_DEVICE_NAME")
    f = classify_exception(info.value)
    assert f["class"] == "dependency_missing", f


def _onnx_model(op: str, dtype: int) -> bytes:
    from onnx import helper

    x = helper.make_tensor_value_info("x", dtype, [2, 2])
    y = helper.make_tensor_value_info("y", dtype, None)
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"], name=f"{op.lower()}_node")], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def test_real_onnxruntime_missing_kernel_is_unsupported_op():
    import onnx
    import onnxruntime as ort

    with pytest.raises(Exception) as info:  # the CPU provider has no int64 Relu kernel
        ort.InferenceSession(_onnx_model("Relu", onnx.TensorProto.INT64), providers=["CPUExecutionProvider"])
    f = classify_exception(info.value, stage="load")
    assert f["class"] == "unsupported_op", f
    assert f["ops"] == ["Relu"]


def test_real_onnxruntime_type_error_is_dtype_error():
    import onnx
    import onnxruntime as ort

    with pytest.raises(Exception) as info:  # Sqrt's schema has no int32
        ort.InferenceSession(_onnx_model("Sqrt", onnx.TensorProto.INT32), providers=["CPUExecutionProvider"])
    f = classify_exception(info.value, stage="load")
    assert f["class"] == "dtype_error", f
    assert f["ops"] == ["Sqrt"]


def test_coreml_e2e_gather_with_float_indices_is_a_dtype_error():
    # Real message: ExecuTorch CoreML partitioner on yolo26n's end-to-end head (ultralytics 8.4.190, coremltools
    # via executorch 1.5.1), seen in a default-profile run on 2026-11-22. The same `index // nc` float indices
    # as seed 001's CUDA AOTI failure.
    msg = (
        'Op "aten_gather_default_1" (op_type: gather_along_axis) Input indices="aten_floor_divide_default" '
        "expects tensor or scalar of dtype from type domain ['int32'] but got tensor[1,300,fp32]"
    )
    f = classify(msg, exception_type="builtins.ValueError")
    assert f["class"] == "dtype_error"
    assert f["ops"] == ["aten_gather_default"]
    assert "gather" in f["suggested_fix"]
