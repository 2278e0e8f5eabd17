"""ExecuTorch with the CUDA backend (AOTInductor + Triton kernels in a .pte plus a .ptd weights file).

Exporting needs a CUDA device, triton, and the export-side Python of `executorch.backends.cuda` (in the PyPI wheel).
Running needs an ExecuTorch runtime built with `-DEXECUTORCH_BUILD_CUDA=ON`; the PyPI wheel's runtime registers no
`CudaBackend`. The backend therefore decides at probe time whether it can only export: see `ExecuTorchCuda`.

`backbone_only(model)` is the seeds' "hybrid" remedy (request option {"remedy": "backbone-only"}): the network up to
the one-to-one head's decoded predictions goes on the device; the top-k selection that follows (where ExecuTorch
CUDA fails on YOLO26: `index_put` lowering, Triton top-k rows > 4096) runs on the host, with ultralytics' own code.
"""

from __future__ import annotations

import copy
import logging
from pathlib import Path

import numpy as np

from harness.backends import register
from harness.backends.base import Backend, BackendUnavailable, ExportRequest, ExportResult, Runner
from harness.core.threads import GPU_CELL_REASON

log = logging.getLogger(__name__)

REMEDY_BACKBONE_ONLY = "backbone-only"
PTE_NAME = "model.pte"


# -- backbone-only (hybrid) ----------------------------------------------------------------------------------------
def _no_postprocess(preds):
    """Stands in for Detect.postprocess, whose input is [B, anchors, C]: return the raw head's layout [B, C, anchors]."""
    return preds.permute(0, 2, 1)


def backbone_only(model):
    """A copy of `model` (prepared, head e2e) that stops before the head's top-k post-processing.

    Its first output is the one-to-one head's decoded predictions in the raw head's layout, [B, 4 + nc + extra,
    anchors] (boxes xyxy, class scores after sigmoid), in place of [B, max_det, 6 + extra]; other outputs (such as
    segmentation prototypes) are unchanged. `host_postprocess(outputs, postprocess_spec(model))` turns them into the
    full model's outputs. Raises ValueError for a model without a detection head or with the raw head (which has no
    on-device post-processing to move).
    """
    from ultralytics.nn.modules import Detect

    heads = [m for m in model.modules() if isinstance(m, Detect)]
    if not heads:
        raise ValueError("backbone-only applies to models with a detection head (detect, seg, pose, obb)")
    if not heads[-1].end2end:
        raise ValueError(
            "backbone-only applies to head=e2e: the raw head has no top-k post-processing to move"
        )
    model = copy.deepcopy(model)
    head = [m for m in model.modules() if isinstance(m, Detect)][-1]
    head.postprocess = _no_postprocess
    return model


def postprocess_spec(model) -> dict:
    """What the host top-k needs from the model's head (JSON-serialisable, carried in the export info)."""
    from ultralytics.nn.modules import Detect

    head = [m for m in model.modules() if isinstance(m, Detect)][-1]
    return {"nc": int(head.nc), "max_det": int(head.max_det), "agnostic_nms": bool(head.agnostic_nms)}


def host_postprocess(outputs: list, spec: dict) -> list:
    """ultralytics' Detect.postprocess (the one-to-one head's top-k) on the first output, on that tensor's device."""
    from ultralytics.nn.modules import Detect

    class HostTopK:
        """Just the attributes and methods Detect.postprocess uses; no parameters, so it runs on any tensor."""

        _grouped_topk = staticmethod(Detect._grouped_topk)
        _gather = Detect._gather
        get_topk_index = Detect.get_topk_index
        postprocess = Detect.postprocess

        def __init__(self) -> None:
            self.nc = spec["nc"]
            self.max_det = spec["max_det"]
            self.agnostic_nms = spec["agnostic_nms"]
            self.export, self.format, self.dynamic = True, "executorch", False

    return [HostTopK().postprocess(outputs[0].permute(0, 2, 1)), *outputs[1:]]


def export_remedy(req: ExportRequest) -> str | None:
    """The request's remedy option, validated: None or "backbone-only"."""
    remedy = req.options.get("remedy")
    if remedy not in (None, REMEDY_BACKBONE_ONLY):
        raise ValueError(f"{req.backend}: unknown remedy {remedy!r} (known: {REMEDY_BACKBONE_ONLY})")
    return remedy


class HostTopKRunner(Runner):
    """Wraps the runner of a backbone-only artifact: each timed call is the device part, the copy of its raw outputs
    to the host and ultralytics' top-k there (the hybrid pipeline end to end). `outputs` are the raw outputs, which
    the harness compares with `backbone_only(model)` in PyTorch; the host top-k is ultralytics' own code.
    """

    def __init__(self, inner: Runner, spec: dict, device_outputs: bool) -> None:
        self.inner = inner
        self.spec = spec
        self.precision_executed = inner.precision_executed
        self.precision_source = inner.precision_source
        self.precision_detail = inner.precision_detail
        self.compile_s = inner.compile_s
        self.torch_stream = inner.torch_stream
        copy_back = "+d2h" if device_outputs and "d2h" not in inner.timing_scope else ""
        self.timing_scope = f"{inner.timing_scope}{copy_back}+host_topk"

    def cpu_threads(self) -> tuple[int | None, str]:
        return self.inner.cpu_threads()

    def prepare(self, x: np.ndarray):
        return self.inner.prepare(x)

    def run(self, prepared):
        raw = self.inner.run(prepared)
        tensors = list(raw) if isinstance(raw, (list, tuple)) else [raw]
        return raw, host_postprocess([t.cpu() for t in tensors], self.spec)

    def synchronize(self) -> None:
        self.inner.synchronize()

    def outputs(self, result) -> list[np.ndarray]:
        return self.inner.outputs(result[0])

    def close(self) -> None:
        self.inner.close()


# -- runtime -------------------------------------------------------------------------------------------------------
def runtime_backends() -> list[str]:
    from executorch.runtime import Runtime

    return list(Runtime.get().backend_registry.registered_backend_names)


class ExecuTorchCudaRunner(Runner):
    """A method of a CUDA-delegated program; the Python runtime takes host tensors, so copies are in the timing."""

    def __init__(self, method, export_info: dict | None = None) -> None:
        from harness.backends._shared.executorch_export import executorch_precision

        self.method = method
        self.precision_executed, self.precision_source, self.precision_detail = executorch_precision(
            export_info or {}
        )
        self.timing_scope = "model+h2d+d2h"

    def cpu_threads(self) -> tuple[int | None, str]:
        return None, GPU_CELL_REASON

    def prepare(self, x: np.ndarray):
        import torch

        return [torch.from_numpy(np.array(x, dtype=np.float32))]

    def run(self, prepared):
        return list(self.method.execute(prepared))

    def synchronize(self) -> None:
        import torch

        if torch.cuda.is_available():
            torch.cuda.synchronize()

    def outputs(self, result) -> list[np.ndarray]:
        return [
            np.asarray(r.float().cpu().numpy() if hasattr(r, "numpy") else r, dtype=np.float32)
            for r in result
        ]


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
        try:
            import torch
        except ImportError as e:
            return f"torch is not installed ({e})"
        if not torch.cuda.is_available():
            return (
                f"ExecuTorch CUDA export compiles kernels for a CUDA device (AOTInductor + Triton), and torch "
                f"{torch.__version__} sees none (torch.version.cuda={torch.version.cuda})"
            )
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
        im = torch.zeros(req.batch, 3, req.height, req.width)
        ep = torch.export.export(model, (im,), strict=False)
        partitioner = CudaPartitioner([CudaBackend.generate_method_name_compile_spec("forward")])
        edge = to_edge_transform_and_lower(
            ep,
            partitioner=[partitioner],
            compile_config=EdgeCompileConfig(_check_ir_validity=False, _skip_dim_order=True),
        )
        info["ops"] = delegation_ops(edge.exported_program().graph_module)
        info["dtypes"] = lowered_dtypes(edge.exported_program().graph_module)
        program = edge.to_executorch()
        # The artifact is a directory, so its size counts the .pte and the .ptd weights together.
        out = Path(req.out_dir) / (
            f"yolo26{req.size}-{req.task}-executorch-cuda" + ("-backbone" if remedy else "")
        )
        out.mkdir(parents=True, exist_ok=True)
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
        ptds = sorted(artifact.glob("*.ptd"))
        program = Runtime.get().load_program(artifact / PTE_NAME, data_path=ptds[0] if ptds else None)
        runner = ExecuTorchCudaRunner(program.load_method("forward"), export_info)
        spec = export_info.get("host_postprocess")
        return HostTopKRunner(runner, spec, device_outputs=False) if spec else runner
