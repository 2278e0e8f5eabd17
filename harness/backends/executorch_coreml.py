"""ExecuTorch with the Core ML delegate (Apple Neural Engine/GPU/CPU): export only, Core ML runs on Apple OSes."""

from __future__ import annotations

import logging
from pathlib import Path

from harness.backends import register
from harness.backends._shared.executorch_export import export_executorch
from harness.backends.base import Backend, BackendUnavailable, ExportRequest, ExportResult, Runner

log = logging.getLogger(__name__)


@register
class ExecuTorchCoreML(Backend):
    name = "executorch-coreml"
    display_order = 140
    registry_order = 140
    devices = ("coreml",)
    precisions = {"coreml": ("fp32", "fp16")}
    library = "executorch"
    export_only = True

    def probe(self, device: str) -> str | None:
        try:
            import coremltools  # noqa: F401
        except ImportError as e:
            return f"coremltools is not installed, the Core ML delegate needs it to export ({e})"
        try:
            from executorch.backends.apple.coreml.partition import CoreMLPartitioner  # noqa: F401
        except ImportError as e:
            return f"the installed executorch has no Core ML partitioner ({e})"
        return None

    def export(self, req: ExportRequest) -> ExportResult:
        import coremltools as ct
        from executorch.backends.apple.coreml.compiler import CoreMLBackend
        from executorch.backends.apple.coreml.partition import CoreMLPartitioner

        # The delegate's default compute precision is fp16; ask for what the cell requests.
        precision = ct.precision.FLOAT16 if req.precision == "fp16" else ct.precision.FLOAT32
        specs = CoreMLBackend.generate_compile_specs(compute_precision=precision)
        return export_executorch(req, [CoreMLPartitioner(compile_specs=specs)], "coreml")

    def load(self, artifact: Path, cell, export_info: dict) -> Runner:
        raise BackendUnavailable(f"no runtime for {self.name} on this host; export only")
