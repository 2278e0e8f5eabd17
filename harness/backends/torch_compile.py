"""torch.compile (TorchInductor) of the prepared model, in two modes that are two backend names.

There is no export step: the artifact is the checkpoint, and compilation happens in `load`, which compiles and runs
the model once so that compilation is measured apart from latency (`runner.compile_s`, recorded as `compile_s`).
A backend name is an axis value in cell ids, so each compile mode is its own backend:

- `torch-compile`: mode "default" (cpu fp32; cuda fp32/fp16).
- `torch-compile-max-autotune`: mode "max-autotune" (cuda only; it also captures CUDA graphs). On a CPU, Inductor's
  max-autotune only tunes GEMM templates, which a convolutional network barely uses, at several times the compile
  time of the default mode; the CPU cell would measure little beyond `torch-compile`.

Compilation is made reproducible and its time honest: Dynamo's caches are reset (yolo26 models share one
`forward` code object, so after a few cells Dynamo's recompile limit would silently fall back to eager), Inductor's
on-disk FX-graph and AOTAutograd caches are off while compiling (a warm cache would make `compile_s` depend on the
cells run before), the model runs once eagerly before compiling (the Detect head caches anchors on its first call),
and after the compiling call the compiler stance is "fail_on_recompile", so a guard failure in the timed rounds
raises instead of recompiling inside the timed region.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from harness.backends import register
from harness.backends.base import Backend, Runner
from harness.backends.torch_eager import TorchRunner, set_tf32
from harness.core.threads import apply_torch

log = logging.getLogger(__name__)


class CompiledRunner(TorchRunner):
    """A torch.compile'd module; `compile_s` is the time of the compiling first call (made in `load`)."""

    def __init__(self, model, device: str, dtype, mode: str, compile_s: float) -> None:
        super().__init__(model, device, dtype)
        self.mode = mode
        self.compile_s = compile_s

    def run(self, prepared):
        import torch

        # the grad mode is part of Dynamo's guards: keep it identical to the compiling call
        with torch.no_grad():
            return self.model(prepared)

    def close(self) -> None:
        import torch

        torch.compiler.set_stance("default")


def compile_and_warm(model, example, mode: str, device: str):
    """torch.compile `model` and run it once on `example` with cold compile caches; return (compiled, seconds)."""
    import torch

    torch._dynamo.reset()
    torch.compiler.set_stance("default")
    # One eager call first: ultralytics' Detect head caches its anchors and input shape on its first call, and a
    # compiled first call would leave that state changed behind its own guards (the second call would recompile).
    with torch.no_grad():
        model(example)
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    compiled = torch.compile(model, mode=None if mode == "default" else mode, dynamic=False, fullgraph=False)
    with torch.compiler.config.patch(force_disable_caches=True), torch.no_grad():
        compiled(example)
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)
    compile_s = time.perf_counter() - t0
    torch.compiler.set_stance("fail_on_recompile")
    return compiled, compile_s


@register
class TorchCompile(Backend):
    """torch.compile, mode "default"."""

    name = "torch-compile"
    display_order = 20
    mode = "default"
    devices = ("cpu", "cuda")
    precisions = {"cpu": ("fp32",), "cuda": ("fp32", "fp16")}
    exports = False
    library = "torch"

    def probe(self, device: str) -> str | None:
        try:
            import torch
        except ImportError as e:
            return f"torch is not installed ({e})"
        if device == "cuda":
            if not torch.cuda.is_available():
                return f"no CUDA device visible to torch {torch.__version__} (torch.version.cuda={torch.version.cuda})"
            import importlib.util

            if importlib.util.find_spec("triton") is None:
                return "torch.compile on CUDA generates Triton kernels, and triton is not installed"
        else:
            from torch._inductor import cpp_builder

            try:
                cpp_builder.get_cpp_compiler()
            except Exception as e:  # Inductor's CPU code generation needs a C++ compiler
                return f"torch.compile on CPU needs a C++ compiler: {e}"
        return None

    def load(self, artifact: Path, cell, export_info: dict) -> Runner:
        import torch

        from harness.yolo.models import prepared_model

        model = prepared_model(artifact, cell.head, (cell.shape.height, cell.shape.width))
        apply_torch()  # the run's budget, before compiling (Inductor's CPU kernels use torch's OpenMP threads)
        dtype = torch.float16 if cell.precision == "fp16" else torch.float32
        set_tf32(cell.device, dtype)
        model = model.to(cell.device).to(dtype)
        example = torch.zeros(
            cell.batch, 3, cell.shape.height, cell.shape.width, device=cell.device, dtype=dtype
        )
        compiled, compile_s = compile_and_warm(model, example, self.mode, cell.device)
        log.info("%s compiled %s in %.1f s", self.name, cell.id, compile_s)
        return CompiledRunner(compiled, cell.device, dtype, self.mode, compile_s)


@register
class TorchCompileMaxAutotune(TorchCompile):
    """torch.compile, mode "max-autotune" (CUDA only: see the module docstring)."""

    name = "torch-compile-max-autotune"
    display_order = 30
    mode = "max-autotune"
    devices = ("cuda",)
    precisions = {"cuda": ("fp32", "fp16")}
