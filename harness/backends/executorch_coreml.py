"""ExecuTorch with the Core ML delegate (Apple Neural Engine/GPU/CPU): export only, Core ML runs on Apple OSes."""

from __future__ import annotations

import logging

from harness.backends import register
from harness.backends._shared.executorch_export import export_executorch, partitioner_missing
from harness.backends.base import ExportOnlyBackend, ExportRequest, ExportResult

log = logging.getLogger(__name__)


@register
class ExecuTorchCoreML(ExportOnlyBackend):
    name = "executorch-coreml"
    display_order = 140
    registry_order = 140
    devices = ("coreml",)
    precisions = {"coreml": ("fp32", "fp16")}
    library = "executorch"

    def probe(self, device: str) -> str | None:
        try:
            import coremltools  # noqa: F401
        except ImportError as e:
            return f"coremltools is not installed, the Core ML delegate needs it to export ({e})"
        return partitioner_missing(
            "executorch.backends.apple.coreml.partition", "CoreMLPartitioner", "Core ML"
        )

    def export(self, req: ExportRequest) -> ExportResult:
        import coremltools as ct
        from executorch.backends.apple.coreml.compiler import CoreMLBackend
        from executorch.backends.apple.coreml.partition import CoreMLPartitioner

        # The delegate's default compute precision is fp16; ask for what the cell requests.
        precision = ct.precision.FLOAT16 if req.precision == "fp16" else ct.precision.FLOAT32
        specs = CoreMLBackend.generate_compile_specs(compute_precision=precision)
        return export_executorch(req, [CoreMLPartitioner(compile_specs=specs)], "coreml")
