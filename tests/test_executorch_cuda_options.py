"""The ExecuTorch CUDA export's compile options (docs/gpu.md, "ExecuTorch CUDA: compile options"): laid over
executorch's own through `CudaBackend.get_aoti_compile_options`, the hook its AotiBackend.preprocess reads, and
recorded in the export info with each phase's time.

Without a GPU (and without triton, which executorch.backends.cuda imports) the CUDA compile cannot run here: the
backend and executorch's lowering are stand-ins shaped like executorch 1.2-1.5's, and the installed executorch's
source is read to check that the hook is the one its preprocess calls."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import pytest

from harness.backends import executorch_cuda as etc


class AotiBackend:
    """executorch's AotiBackend, reduced to what reads the options: preprocess asks the class for them."""

    compiled_with: list[dict] = []

    @classmethod
    def preprocess(cls, specs):
        options = cls.get_aoti_compile_options(specs)
        cls.compiled_with.append(options)  # torch._inductor.aot_compile(..., options=options)
        return options


class CudaBackend(AotiBackend):
    @staticmethod
    def _setup_cuda_environment_for_fatbin() -> bool:
        return True  # CUDA >= 12.9: executorch asks for multi-arch kernels

    @classmethod
    def get_aoti_compile_options(cls, compile_specs):
        return {
            "max_autotune": True,
            "max_autotune_conv_backends": "TRITON",
            "aot_inductor.emit_multi_arch_kernel": CudaBackend._setup_cuda_environment_for_fatbin(),
        }

    @staticmethod
    def generate_method_name_compile_spec(name):
        return ("method_name", name)


def test_the_overrides_reach_preprocess_and_the_backends_own_method_comes_back():
    original = CudaBackend.__dict__["get_aoti_compile_options"]
    seen: dict = {}
    overrides = etc.compile_overrides({"TORCHINDUCTOR_COMPILE_THREADS": "16"})
    assert overrides == {"aot_inductor.emit_multi_arch_kernel": False, "compile_threads": 16}
    with etc.compile_options(CudaBackend, overrides, seen):
        got = CudaBackend.preprocess([])
    # autotuning stays on (without it convolutions have no valid choice); the fatbin step goes; the workers are set
    assert got["max_autotune"] is True and got["max_autotune_conv_backends"] == "TRITON"
    assert got["aot_inductor.emit_multi_arch_kernel"] is False and got["compile_threads"] == 16
    assert seen == {
        "overrides": overrides,
        "executorch_defaults": {"aot_inductor.emit_multi_arch_kernel": True, "compile_threads": "(not set)"},
    }
    assert CudaBackend.__dict__["get_aoti_compile_options"] is original  # put back
    assert CudaBackend.preprocess([])["aot_inductor.emit_multi_arch_kernel"] is True


def test_a_hook_inherited_from_the_parent_is_put_back_as_inherited_and_a_missing_one_is_refused():
    class Child(CudaBackend):
        pass

    with etc.compile_options(Child, {"compile_threads": 2}, {}):
        assert Child.preprocess([])["compile_threads"] == 2
        assert "compile_threads" not in CudaBackend.get_aoti_compile_options([])  # the parent is not touched
    assert "get_aoti_compile_options" not in Child.__dict__
    with (
        pytest.raises(AttributeError, match="has no get_aoti_compile_options"),
        etc.compile_options(type("Other", (), {}), {}, {}),
    ):
        pass


def test_compile_threads_read_the_environment_else_this_processs_cores():
    assert etc.compile_threads({"TORCHINDUCTOR_COMPILE_THREADS": "12"}) == 12
    cores = etc.compile_threads({})
    assert cores >= 1
    assert etc.compile_threads({"TORCHINDUCTOR_COMPILE_THREADS": "lots"}) == cores
    assert etc.compile_threads({"TORCHINDUCTOR_COMPILE_THREADS": "0"}) == cores


def _executorch_file(*parts: str) -> Path:
    spec = importlib.util.find_spec("executorch")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("executorch is not installed")
    path = Path(next(iter(spec.submodule_search_locations))).joinpath(*parts)
    if not path.is_file():
        pytest.skip(f"this executorch has no {path}")
    return path


def test_the_installed_executorchs_preprocess_reads_its_options_from_that_hook():
    """Read, not imported (executorch.backends.cuda imports triton, which a CPU machine lacks): the options the
    AOTInductor compile gets are `cls.get_aoti_compile_options(compile_specs)`, and the CUDA backend defines it
    with the two keys the overrides replace or add."""
    aoti = _executorch_file("backends", "aoti", "aoti_backend.py").read_text()
    assert "options = cls.get_aoti_compile_options(compile_specs)" in aoti
    assert "options=options" in aoti
    cuda = _executorch_file("backends", "cuda", "cuda_backend.py").read_text()
    assert "def get_aoti_compile_options(" in cuda
    assert '"aot_inductor.emit_multi_arch_kernel": emit_multi_arch_kernel' in cuda
    assert '"max_autotune": True' in cuda


def test_the_export_records_the_options_and_each_phase(tmp_path, monkeypatch):
    """ExecuTorchCuda.export with executorch's CUDA modules and lowering replaced by stand-ins (the CUDA compile
    cannot run here: no GPU, no triton): the lowering sees the overrides through the hook, the export info records
    them with executorch's own values, max_autotune and the four phases' seconds, and the hook is put back."""
    import torch

    from harness.backends._shared import executorch_export
    from harness.backends.base import ExportRequest

    CudaBackend.compiled_with = []
    cuda_backend = types.ModuleType("executorch.backends.cuda.cuda_backend")
    cuda_backend.CudaBackend = CudaBackend
    cuda_partitioner = types.ModuleType("executorch.backends.cuda.cuda_partitioner")
    cuda_partitioner.CudaPartitioner = lambda specs: ("partitioner", specs)
    monkeypatch.setitem(sys.modules, "executorch.backends.cuda.cuda_backend", cuda_backend)
    monkeypatch.setitem(sys.modules, "executorch.backends.cuda.cuda_partitioner", cuda_partitioner)

    class Program:
        buffer = b"pte"

        def write_tensor_data_to_file(self, outdir):
            Path(outdir, "aoti_cuda_blob.ptd").write_bytes(b"ptd")

    class Edge:
        def exported_program(self):
            return types.SimpleNamespace(graph_module=None)

        def to_executorch(self):
            return Program()

    def lower(ep, partitioner, compile_config):
        ((_, specs),) = partitioner
        CudaBackend.preprocess(specs)  # what executorch's lowering does per partition
        return Edge()

    import executorch.exir
    import ultralytics.utils.export.executorch as ul_et

    monkeypatch.setattr(executorch.exir, "to_edge_transform_and_lower", lower)
    monkeypatch.setattr(ul_et, "executorch_wrapper", lambda m: m)
    monkeypatch.setattr("harness.yolo.models.prepared_model", lambda *a, **k: torch.nn.Conv2d(3, 4, 1).eval())
    monkeypatch.setattr(executorch_export, "delegation_ops", lambda gm: {"delegated": 1, "fallback": 0})
    monkeypatch.setattr(executorch_export, "lowered_dtypes", lambda gm: {})
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "3")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    req = ExportRequest(
        "executorch-cuda", "cuda", "x.pt", "n", "detect", "e2e", 32, 32, False, 1, "fp32", str(tmp_path), {}
    )
    result = etc.ExecuTorchCuda().export(req)
    info = result.info
    (used,) = CudaBackend.compiled_with
    assert used["aot_inductor.emit_multi_arch_kernel"] is False and used["compile_threads"] == 3
    assert info["max_autotune"] is True and info["inductor_cache_dir"] == str(tmp_path / "inductor")
    assert info["compile_options"]["overrides"]["compile_threads"] == 3
    assert info["compile_options"]["executorch_defaults"]["aot_inductor.emit_multi_arch_kernel"] is True
    assert [k.split(" ")[0] for k in info["phase_s"]] == [
        "torch.export",
        "to_edge_transform_and_lower",
        "to_executorch",
        "serialize",
    ]
    assert all(v >= 0 for v in info["phase_s"].values()) and info["ptd"] == ["aoti_cuda_blob.ptd"]
    assert CudaBackend.get_aoti_compile_options([])["aot_inductor.emit_multi_arch_kernel"] is True


def test_the_overrides_are_inductor_options_this_torch_knows():
    """The overrides are passed to Inductor as `options`, which it applies like `config.patch`: each key must be
    one this torch's Inductor has (an unknown one is refused), and neither turns autotuning off."""
    import torch._inductor.config as inductor_config

    overrides = etc.compile_overrides({"TORCHINDUCTOR_COMPILE_THREADS": "2"})
    before = inductor_config.max_autotune
    with inductor_config.patch(overrides):
        assert inductor_config.aot_inductor.emit_multi_arch_kernel is False
        assert inductor_config.compile_threads == 2
        assert inductor_config.max_autotune == before  # autotuning is executorch's to set, and it stays so
    with (
        pytest.raises(AttributeError),
        inductor_config.patch({"aot_inductor.emit_multi_arch_kernels": False}),
    ):
        pass
