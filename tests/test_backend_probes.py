"""The probes' reasons, worded once (harness.backends._shared.probes) and quoted by every backend the same way.

The expected strings are the reasons the backends gave before the shared helpers existed (ec02d03): a skip reason is
what the record keeps, so its wording must not move. A missing library is simulated the way Python itself refuses
an import (a None entry in sys.modules); the rest runs against the real torch, executorch and onnxruntime here.
"""

from __future__ import annotations

import importlib.util
import sys

import pytest

from harness import backends

HALTED = "import of {m} halted; None in sys.modules"


def statement_error(statement: str) -> str:
    """The message Python's own import statement raises for `statement`."""
    try:
        exec(statement, {})
    except ImportError as e:
        return str(e)
    raise AssertionError(f"{statement!r} imported")


def test_import_error_words_it_as_the_statement_does():
    from harness.backends._shared.probes import import_error

    assert str(import_error("no_such_module_q")) == statement_error("import no_such_module_q")
    assert str(import_error("json", "no_such_name")) == statement_error("from json import no_such_name")
    assert import_error("json", "loads") is None
    assert import_error("xml", "dom") is None  # a submodule, as `from xml import dom` finds it


def test_not_installed():
    from harness.backends._shared.probes import not_installed

    assert not_installed("json") is None
    assert not_installed("no_such_module_q.sub") == (
        "no_such_module_q is not installed (No module named 'no_such_module_q')"
    )
    assert not_installed("json", "nope", label="JSON").startswith(
        "JSON is not installed (cannot import name 'nope'"
    )


@pytest.mark.parametrize(
    ("backend", "device", "module"),
    [
        ("torch-eager", "cpu", "torch"),
        ("torch-compile", "cpu", "torch"),
        ("aoti", "cpu", "torch"),
        ("executorch-cuda", "cuda", "torch"),
        ("onnxruntime", "cpu", "onnxruntime"),
        ("openvino", "cpu", "openvino"),
    ],
)
def test_a_missing_library_is_named(backend, device, module, monkeypatch):
    monkeypatch.setitem(sys.modules, module, None)
    why = HALTED.format(m=module)
    assert backends.get(backend).probe(device) == f"{module} is not installed ({why})"


def test_missing_torch_for_the_device_timing(monkeypatch):
    from harness.measure.cuda_timing import torch_cuda_reason

    monkeypatch.setitem(sys.modules, "torch", None)
    assert torch_cuda_reason() == (None, f"torch is not installed ({HALTED.format(m='torch')})")


def test_missing_executorch_runtime(monkeypatch):
    monkeypatch.setitem(sys.modules, "executorch.runtime", None)
    why = HALTED.format(m="executorch.runtime")
    assert backends.get("executorch-xnnpack").probe("cpu") == f"executorch is not installed ({why})"


def test_the_runtimes_here_pass_their_probes():
    assert backends.get("torch-eager").probe("cpu") is None
    assert backends.get("onnxruntime").probe("cpu") is None
    assert backends.get("executorch-xnnpack").probe("cpu") is None
    assert backends.get("executorch-vulkan").probe("vulkan") is None


def test_no_cuda_device_is_worded_once():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    from harness.measure.cuda_timing import torch_cuda_reason

    why = f"no CUDA device visible to torch {torch.__version__} (torch.version.cuda={torch.version.cuda})"
    assert backends.get("torch-compile").probe("cuda") == why
    assert backends.get("aoti").probe("cuda") == why
    assert torch_cuda_reason() == (None, why)
    assert backends.get("torch-eager").probe("cuda") == "no CUDA device visible to torch"


def test_inductor_needs_triton_on_cuda(monkeypatch):
    import torch

    real = importlib.util.find_spec
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "triton" else real(name, *a)
    )
    assert backends.get("torch-compile").probe("cuda") == (
        "torch.compile on CUDA generates Triton kernels, and triton is not installed"
    )
    assert backends.get("aoti").probe("cuda") == (
        "AOTInductor on CUDA generates Triton kernels, and triton is not installed"
    )


@pytest.mark.process
def test_inductor_needs_a_cpp_compiler_on_cpu(monkeypatch):
    from torch._inductor import cpp_builder

    assert backends.get("torch-compile").probe("cpu") is None  # this machine has one

    def no_compiler():
        raise RuntimeError("no C++ compiler found")

    monkeypatch.setattr(cpp_builder, "get_cpp_compiler", no_compiler)
    assert backends.get("torch-compile").probe("cpu") == (
        "torch.compile on CPU needs a C++ compiler: no C++ compiler found"
    )
    assert backends.get("aoti").probe("cpu") == (
        "AOTInductor needs a C++ compiler to build its shared library: no C++ compiler found"
    )


def test_a_missing_partitioner_is_named():
    from harness.backends._shared.executorch_export import partitioner_missing

    module = "executorch.backends.vulkan.partitioner.vulkan_partitioner"
    assert partitioner_missing(module, "VulkanPartitioner", "Vulkan") is None
    why = statement_error(f"from {module} import NoSuchPartitioner")
    assert partitioner_missing(module, "NoSuchPartitioner", "Vulkan") == (
        f"the installed executorch has no Vulkan partitioner ({why})"
    )


def test_a_missing_execution_provider_is_named():
    import onnxruntime as ort

    have = ort.get_available_providers()
    if "TensorrtExecutionProvider" in have or "CUDAExecutionProvider" in have:
        pytest.skip("this onnxruntime build has the GPU providers")
    listed = ", ".join(have)
    assert backends.get("onnxruntime").probe("cuda") == (
        f"this onnxruntime build has no CUDAExecutionProvider (has {listed})"
    )
    assert backends.get("onnxruntime-trt").probe("cuda") == (
        f"this onnxruntime build has no TensorrtExecutionProvider (has {listed}; install onnxruntime-gpu)"
    )


def test_executorch_cuda_words_the_missing_device_its_own_way():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    assert backends.get("executorch-cuda").probe("cuda") == (
        f"ExecuTorch CUDA export compiles kernels for a CUDA device (AOTInductor + Triton), and torch "
        f"{torch.__version__} sees none (torch.version.cuda={torch.version.cuda})"
    )
