"""torch.compile (TorchInductor) of the prepared model, in two modes that are two backend names.

There is no export step: the artifact is the checkpoint, and compilation happens in `load`, which compiles and runs
the model once so that compilation is measured apart from latency (`runner.compile_s`, recorded as `compile_s`).
A backend name is an axis value in cell ids, so each compile mode is its own backend:

- `torch-compile`: mode "default" (cpu fp32; cuda fp32/fp16).
- `torch-compile-max-autotune`: mode "max-autotune" (cuda only; it also captures CUDA graphs). On a CPU, Inductor's
  max-autotune only tunes GEMM templates, which a convolutional network barely uses, at several times the compile
  time of the default mode; the CPU cell would measure little beyond `torch-compile`.

Compilation is made reproducible and its time honest without touching other runners: several compiled runners are
alive at once (every timing phase loads all its workloads before timing them; fp16 sits beside fp32), so nothing
here resets Dynamo's caches or sets a process-wide stance (a global `torch._dynamo.reset()` dropped the first
runner's compiled code, and its next call then failed under the stance). Instead:

- the recompile limit is raised while compiling (yolo26 models share one `forward` code object, and at Dynamo's
  default of 8 entries a later cell would silently fall back to eager); Dynamo's parameters are graph inputs, so
  a model identical to one compiled earlier in the process (architecture, shape, dtype, mode) reuses that code:
  its compiling call compiles nothing, and `compile_s` is then null with that reason;
- Inductor's on-disk FX-graph and AOTAutograd caches are off while compiling (a warm cache would make
  `compile_s` depend on the cells run before);
- the model runs once eagerly before compiling (the Detect head caches anchors on its first call);
- each timed call runs under the stance "fail_on_recompile" as a context manager (torch >= 2.6, so 2.11 and
  2.13), so a guard failure in the timed rounds raises instead of recompiling inside the timed region, and the
  stance ends with the call. Such a failure is the harness's (`HarnessError`), never a remedy's business.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from harness.backends import register
from harness.backends._shared.probes import inductor_missing, not_installed
from harness.backends._shared.torch_runtime import prepared_on_device
from harness.backends.base import Backend, Runner
from harness.backends.torch_eager import TorchRunner
from harness.core.errors import HarnessError

log = logging.getLogger(__name__)

#: Dynamo's per-code-object cache entries allowed while compiling: one per compiled model, shape and precision
RECOMPILE_LIMIT = 1024

_stance_lock = threading.Lock()
_stance_users = 0
_stance_restore = None  # the context `set_stance` returned: its exit restores the stance it found


@contextlib.contextmanager
def fail_on_recompile() -> Iterator[None]:
    """Dynamo's stance "fail_on_recompile" for the duration of the calls inside it, from any number of threads.

    torch's stance is one process-wide value, and `set_stance` as a context manager restores the value it found:
    two overlapping threads would restore each other's "fail_on_recompile" and leave it set for good. Here the
    first call to enter sets it and the last to leave restores what the first found.
    """
    import torch

    global _stance_users, _stance_restore
    with _stance_lock:
        if _stance_users == 0:
            _stance_restore = torch.compiler.set_stance("fail_on_recompile")  # sets it now
        _stance_users += 1
    try:
        yield
    finally:
        with _stance_lock:
            _stance_users -= 1
            if _stance_users == 0:
                _stance_restore.__exit__(None, None, None)
                _stance_restore = None


class CompiledRunner(TorchRunner):
    """A torch.compile'd module; `compile_s` is the time of the compiling first call (made in `load`)."""

    def __init__(self, model, device: str, dtype, mode: str, compile_s: float | None) -> None:
        super().__init__(model, device, dtype)
        self.mode = mode
        self.compile_s = compile_s
        if compile_s is None:
            self.compile_reason = (
                "not measured: this process had already compiled an identical model (architecture, shape, dtype, "
                "mode), and Dynamo reused that code (no cache is reset: other compiled runners are alive)"
            )

    def run(self, prepared):
        import torch

        # the grad mode is part of Dynamo's guards: keep it identical to the compiling call. The stance holds for
        # this call only (another compiled runner compiling or running is untouched by it).
        try:
            with fail_on_recompile(), torch.no_grad():
                return self.model(prepared)
        except RuntimeError as e:
            if "fail_on_recompile" in str(e):
                raise HarnessError(
                    f"a timed call of the compiled model needed a recompile (its compiled code was dropped or its "
                    f"guards changed since compiling): {first_line(e)}"
                ) from e
            raise

    def stream_call(self, prepared):
        # the eager streams' inference_mode is not the grad mode compiled for: a stream calls `run` (no_grad, and
        # the stance for that call only)
        return self.run(prepared)


def first_line(e: BaseException) -> str:
    """The first non-empty line of an exception's message."""
    return next((line.strip() for line in str(e).splitlines() if line.strip()), type(e).__name__)


def compile_and_warm(model, example, mode: str, device: str):
    """torch.compile `model` and run it once on `example` with cold compile caches; return (compiled, seconds).

    Touches no other compiled model: no cache reset, no process-wide stance (see the module docstring). Seconds is
    None when Dynamo reused code compiled for an identical model earlier in this process (no graph was compiled)."""
    import torch
    from torch._dynamo.utils import counters

    # One eager call first: ultralytics' Detect head caches its anchors and input shape on its first call, and a
    # compiled first call would leave that state changed behind its own guards (the second call would recompile).
    with torch.no_grad():
        model(example)
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)
    graphs_before = counters["stats"]["unique_graphs"]
    t0 = time.perf_counter()
    compiled = torch.compile(model, mode=None if mode == "default" else mode, dynamic=False, fullgraph=False)
    with (
        # torch's config modules gain `patch` at import (install_config_module): the stubs do not show it
        torch.compiler.config.patch(force_disable_caches=True),  # type: ignore[attr-defined]
        torch._dynamo.config.patch(  # type: ignore[attr-defined]
            recompile_limit=RECOMPILE_LIMIT, accumulated_recompile_limit=RECOMPILE_LIMIT
        ),
        torch.compiler.set_stance("default"),
        torch.no_grad(),
    ):
        compiled(example)
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)
    compile_s = time.perf_counter() - t0
    if counters["stats"]["unique_graphs"] == graphs_before:
        # Dynamo found code it had compiled for an identical model (same architecture, shape, dtype and mode: the
        # parameters are graph inputs, so that code is this model's too): the call measured a cache hit
        return compiled, None
    return compiled, compile_s


@register
class TorchCompile(Backend):
    """torch.compile, mode "default"."""

    name = "torch-compile"
    display_order = 20
    registry_order = 50
    mode = "default"
    devices = ("cpu", "cuda")
    precisions = {"cpu": ("fp32",), "cuda": ("fp32", "fp16")}
    exports = False
    library = "torch"

    def probe(self, device: str) -> str | None:
        return not_installed("torch") or inductor_missing(
            device, "torch.compile", "torch.compile on CPU needs a C++ compiler"
        )

    def load(self, artifact: Path, cell, export_info: dict) -> Runner:
        import torch

        model, dtype = prepared_on_device(artifact, cell)
        example = torch.zeros(
            cell.batch, 3, cell.shape.height, cell.shape.width, device=cell.device, dtype=dtype
        )
        compiled, compile_s = compile_and_warm(model, example, self.mode, cell.device)
        log.info("%s compiled %s in %s s", self.name, cell.id, compile_s)
        return CompiledRunner(compiled, cell.device, dtype, self.mode, compile_s)


@register
class TorchCompileMaxAutotune(TorchCompile):
    """torch.compile, mode "max-autotune" (CUDA only: see the module docstring)."""

    name = "torch-compile-max-autotune"
    display_order = 30
    registry_order = 60
    mode = "max-autotune"
    devices = ("cuda",)
    precisions = {"cuda": ("fp32", "fp16")}
