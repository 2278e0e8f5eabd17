"""ExecuTorch with the XNNPACK delegate (CPU), run through the ExecuTorch Python runtime."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from harness.backends import register
from harness.backends.base import Backend, ExportRequest, ExportResult, Runner
from harness.backends.executorch_common import export_executorch

log = logging.getLogger(__name__)


class ExecuTorchRunner(Runner):
    """A loaded ExecuTorch method, executed synchronously on the host."""

    def __init__(self, method) -> None:
        self.method = method
        self.precision_executed = "fp32"
        self.timing_scope = "model"

    def prepare(self, x: np.ndarray):
        import torch

        return [torch.from_numpy(np.array(x, dtype=np.float32))]

    def run(self, prepared):
        return self.method.execute(prepared)

    def outputs(self, result) -> list[np.ndarray]:
        return [np.asarray(r.float().numpy() if hasattr(r, "numpy") else r, dtype=np.float32) for r in result]


def load_method(artifact: Path):
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(Path(artifact))
    return program.load_method("forward")


@register
class ExecuTorchXnnpack(Backend):
    name = "executorch-xnnpack"
    devices = ("cpu",)
    precisions = {"cpu": ("fp32",)}
    supports_dynamic = True
    library = "executorch"

    def probe(self, device: str) -> str | None:
        try:
            from executorch.runtime import Runtime
        except ImportError as e:
            return f"executorch is not installed ({e})"
        backends = Runtime.get().backend_registry.registered_backend_names
        if "XnnpackBackend" not in backends:
            return f"the installed ExecuTorch runtime has no XnnpackBackend (has {', '.join(backends)})"
        return None

    def export(self, req: ExportRequest) -> ExportResult:
        from executorch.backends.xnnpack.partition.config import ALL_PARTITIONER_CONFIGS
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        # Remedy option: keep some op kinds out of the delegate (matched against the partitioner config names,
        # e.g. "squeeze" drops SqueezeConfig and UnsqueezeConfig); ExecuTorch's portable kernels run them.
        exclude = [e.lower() for e in req.options.get("xnnpack_exclude_configs", [])]
        configs = [c for c in ALL_PARTITIONER_CONFIGS if not any(e in c.__name__.lower() for e in exclude)]
        return export_executorch(req, [XnnpackPartitioner(configs=configs)], "xnnpack")

    def load(self, artifact: Path, cell, export_info: dict) -> Runner:
        return ExecuTorchRunner(load_method(artifact))
