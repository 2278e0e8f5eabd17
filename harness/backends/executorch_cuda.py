"""ExecuTorch with the CUDA backend (AOTInductor + Triton kernels in a .pte plus a .ptd weights file).

Exporting needs a CUDA device, triton, and the export-side Python of `executorch.backends.cuda` (in the PyPI wheel).
Running needs an ExecuTorch runtime built with `-DEXECUTORCH_BUILD_CUDA=ON`; the PyPI wheel's runtime registers no
`CudaBackend`. The backend therefore decides at probe time whether it can only export: see `ExecuTorchCuda`.

The seeds' "hybrid" remedy (request option {"remedy": "backbone-only"}) is harness.backends._shared.backbone_only:
the network up to the one-to-one head's decoded predictions goes on the device, the top-k runs on the host.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from harness.backends import register
from harness.backends._shared.artifact_files import recorded_file
from harness.backends._shared.backbone_only import (
    REMEDY_BACKBONE_ONLY,
    HostTopKRunner,
    backbone_only,
    export_remedy,
    host_postprocess,
    postprocess_spec,
)
from harness.backends._shared.executorch_cuda_options import OPTIONS_HOOK, compile_options
from harness.backends._shared.executorch_runtime import ExecuTorchMethodRunner, runtime_backends
from harness.backends._shared.fake_cuda import FAKE_OPTION
from harness.backends._shared.phases import phase
from harness.backends._shared.probes import torch_cuda_missing
from harness.backends.base import Backend, BackendUnavailable, ExportRequest, ExportResult, Runner
from harness.threads import GPU_CELL_REASON

log = logging.getLogger(__name__)

#: the backbone-only remedy's names, imported from here by harness.measure.parity and benchmarks/gpu_check.py
__all__ = [
    "OPTIONS_HOOK",
    "REMEDY_BACKBONE_ONLY",
    "ExecuTorchCuda",
    "ExecuTorchCudaRunner",
    "HostTopKRunner",
    "backbone_only",
    "compile_options",
    "export_remedy",
    "host_postprocess",
    "postprocess_spec",
    "runtime_backends",
]

PTE_NAME = "model.pte"


# -- runtime -------------------------------------------------------------------------------------------------------
class ExecuTorchCudaRunner(ExecuTorchMethodRunner):
    """A method of a CUDA-delegated program; the Python runtime takes host tensors, so copies are in the timing."""

    def __init__(self, method, export_info: dict | None = None) -> None:
        super().__init__(method, export_info)
        self.timing_scope = "model+h2d+d2h"

    def cpu_threads(self) -> tuple[int | None, str]:
        return None, GPU_CELL_REASON

    def run(self, prepared):
        return list(self.method.execute(prepared))

    def synchronize(self) -> None:
        import torch

        if torch.cuda.is_available():
            torch.cuda.synchronize()


def autotune_setting(cuda_backend, specs) -> dict:
    """Whether the CUDA backend's AOTInductor compile autotunes, as its own options say: executorch 1.2 hard-codes
    Inductor's max_autotune (minutes per export); 1.4 adds a `max_autotune` compile spec."""
    try:
        options = cuda_backend.get_aoti_compile_options(specs)
    except Exception as e:  # an older or newer signature: say so rather than guess
        return {"max_autotune": None, "max_autotune_source": f"get_aoti_compile_options failed: {e!r}"[:300]}
    return {
        "max_autotune": options.get("max_autotune"),
        "max_autotune_source": "executorch CudaBackend.get_aoti_compile_options",
        "inductor_cache_dir": os.environ.get("TORCHINDUCTOR_CACHE_DIR"),
    }


def compile_threads(env: dict | None = None) -> int:
    """Inductor's compile workers for an export: $TORCHINDUCTOR_COMPILE_THREADS, else the cores this process may
    run on (a container's affinity, not the host's count)."""
    env = os.environ if env is None else env
    value = str(env.get("TORCHINDUCTOR_COMPILE_THREADS") or "")
    if value.isdigit() and int(value) > 0:
        return int(value)
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def compile_overrides(env: dict | None = None) -> dict:
    """The Inductor options laid over executorch's own for an ExecuTorch CUDA export: shorter compiles, autotuning
    kept (without it convolutions are left with no valid choice).

    - `aot_inductor.emit_multi_arch_kernel: False`: executorch asks for multi-arch kernels on CUDA >= 12.9, which on
      cu130 adds an nvcc fatbin step to every kernel; the artifact then holds this GPU's architecture only;
    - `compile_threads`: Inductor's compile workers, the cores here (`compile_threads`).
    The Inductor cache is $TORCHINDUCTOR_CACHE_DIR, one folder for every export of a call (benchmarks/gpu_once.sh),
    so a second export reuses what the first autotuned."""
    return {"aot_inductor.emit_multi_arch_kernel": False, "compile_threads": compile_threads(env)}


@register
class ExecuTorchCuda(Backend):
    """ExecuTorch CUDA backend.

    Probe decides three cases. No CUDA device, no triton or no `executorch.backends.cuda`: the reason (the cell is
    skipped). Export possible and the installed runtime registers `CudaBackend`: a normal backend. Export possible
    but the runtime lacks `CudaBackend` (the PyPI wheel): probe returns None and remembers why the runtime cannot
    run the .pte; `export_only_reason(cell)` returns that, so the harness exports (recording whether the
    partitioner could lower YOLO26 and the artifact's size) and records status "exported" without loading. The
    decision is made per host, not as a class constant (`export_only` stays False), because the same code runs
    fully against a CUDA-enabled runtime.
    """

    name = "executorch-cuda"
    display_order = 120
    registry_order = 100
    devices = ("cuda",)
    precisions = {"cuda": ("fp32",)}
    supports_dynamic = False  # the seeds: strided-convolution guards block dynamic H/W on this backend
    library = "executorch"
    fake_cuda = True

    def __init__(self) -> None:
        self._runtime_reason: str | None = None
        self._probed = False

    def export_only_reason(self, cell) -> str | None:
        """Why this host can export `cell` but not run it (no CudaBackend in the runtime), or None: it runs."""
        if not self._probed:  # the harness probes first; decide here too when it did not, on this instance
            try:
                self._runtime_reason = self._runtime_missing(runtime_backends())
            except ImportError as e:
                self._runtime_reason = f"the ExecuTorch runtime is not importable ({e})"
            self._probed = True
        return self._runtime_reason

    @staticmethod
    def _runtime_missing(names: list[str]) -> str | None:
        if "CudaBackend" in names:
            return None
        return (
            f"the installed ExecuTorch runtime has no CudaBackend (registered: {', '.join(names) or 'none'}); "
            "the PyPI wheel is a CPU build: build ExecuTorch with -DEXECUTORCH_BUILD_CUDA=ON to run the .pte"
        )

    def probe(self, device: str) -> str | None:
        reason = torch_cuda_missing(
            "ExecuTorch CUDA export compiles kernels for a CUDA device (AOTInductor + Triton), and torch "
            "{version} sees none (torch.version.cuda={cuda})"
        )
        if reason:
            return reason
        try:
            from executorch.backends.cuda.cuda_partitioner import CudaPartitioner  # noqa: F401
        except ImportError as e:
            return f"ExecuTorch CUDA export is not importable ({e}); it needs executorch and triton"
        try:
            names = runtime_backends()
        except ImportError as e:
            return f"the ExecuTorch runtime is not importable ({e})"
        self._runtime_reason = self._runtime_missing(names)
        self._probed = True
        return None

    def export(self, req: ExportRequest) -> ExportResult:
        import torch
        from executorch.backends.cuda.cuda_backend import CudaBackend
        from executorch.backends.cuda.cuda_partitioner import CudaPartitioner
        from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
        from ultralytics.utils.export.executorch import executorch_wrapper

        from harness.backends._shared.executorch_export import delegation_ops, lowered_dtypes
        from harness.yolo.models import prepared_model

        remedy = export_remedy(req)
        model = executorch_wrapper(
            prepared_model(req.checkpoint, req.head, (req.height, req.width), fmt="executorch")
        )
        info: dict = {"remedy": remedy}
        if remedy == REMEDY_BACKBONE_ONLY:
            info["host_postprocess"] = postprocess_spec(model)
            model = backbone_only(model)
        if req.options.get(FAKE_OPTION):
            from harness.backends._shared.executorch_cuda_trace import fake_export

            Path(req.out_dir).mkdir(parents=True, exist_ok=True)
            return ExportResult(*fake_export(req, model, Path(req.out_dir), info))
        im = torch.zeros(req.batch, 3, req.height, req.width)
        specs = [CudaBackend.generate_method_name_compile_spec("forward")]
        seen: dict = {}
        with compile_options(CudaBackend, compile_overrides(), seen):
            info.update(autotune_setting(CudaBackend, specs))
            info["compile_options"] = seen
            phases: dict[str, float] = {}
            info["phase_s"] = phases
            with phase("torch.export", phases):
                ep = torch.export.export(model, (im,), strict=False)
            with phase("to_edge_transform_and_lower (AOTInductor compile of the CUDA partitions)", phases):
                edge = to_edge_transform_and_lower(
                    ep,
                    partitioner=[CudaPartitioner(specs)],
                    compile_config=EdgeCompileConfig(_check_ir_validity=False, _skip_dim_order=True),
                )
        info["ops"] = delegation_ops(edge.exported_program().graph_module)
        info["dtypes"] = lowered_dtypes(edge.exported_program().graph_module)
        with phase("to_executorch", phases):
            program = edge.to_executorch()
        # The artifact is a directory, so its size counts the .pte and the .ptd weights together.
        out = Path(req.out_dir) / (
            f"{req.family}{req.size}-{req.task}-executorch-cuda" + ("-backbone" if remedy else "")
        )
        out.mkdir(parents=True, exist_ok=True)
        with phase("serialize (.pte and .ptd)", phases):
            (out / PTE_NAME).write_bytes(program.buffer)
            program.write_tensor_data_to_file(outdir=str(out))
        info["ptd"] = sorted(p.name for p in out.glob("*.ptd"))
        log.info("wrote %s (%s)", out, info["ops"])
        return ExportResult(str(out), info)

    def load(self, artifact: Path, cell, export_info: dict) -> Runner:
        from executorch.runtime import Runtime

        names = runtime_backends()
        if "CudaBackend" not in names:
            raise BackendUnavailable(self._runtime_missing(names))
        artifact = Path(artifact)
        # the .ptd weights the export recorded (a file added to the directory later is never loaded)
        ptds = [recorded_file(artifact, {"ptd": n}, "ptd") for n in export_info.get("ptd") or []]
        program = Runtime.get().load_program(artifact / PTE_NAME, data_path=ptds[0] if ptds else None)
        runner = ExecuTorchCudaRunner(program.load_method("forward"), export_info)
        spec = export_info.get("host_postprocess")
        return HostTopKRunner(runner, spec, device_outputs=False) if spec else runner
