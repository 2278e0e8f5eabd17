"""ExecuTorch on Apple GPUs through Metal (the AOTInductor-based Metal backend): export only, and only on macOS.

The PyPI wheel ships the export-side Python of the Metal backend (MetalPartitioner), not the older MPS delegate.
Lowering compiles Metal kernels with AOTInductor for torch's `mps` device and loads torchao's MPS kernels
(libtorchao_ops_mps_aten.dylib), so on Linux the export cannot run: the probe says so instead of failing late.
"""

from __future__ import annotations

import logging
import sys

from harness.backends import register
from harness.backends._shared.executorch_export import export_executorch, partitioner_missing
from harness.backends.base import ExportOnlyBackend, ExportRequest, ExportResult

log = logging.getLogger(__name__)


@register
class ExecuTorchMps(ExportOnlyBackend):
    name = "executorch-mps"
    display_order = 150
    registry_order = 150
    devices = ("mps",)
    precisions = {"mps": ("fp32",)}
    library = "executorch"

    def probe(self, device: str) -> str | None:
        if sys.platform != "darwin":
            return (
                f"the ExecuTorch Metal backend exports on macOS only: it compiles with AOTInductor for torch's mps "
                f"device and torchao's MPS kernels (libtorchao_ops_mps_aten.dylib), neither exists on {sys.platform}"
            )
        reason = partitioner_missing(
            "executorch.backends.apple.metal.metal_partitioner", "MetalPartitioner", "Metal"
        )
        if reason:
            return reason
        import torch

        if not torch.backends.mps.is_available():
            return "torch reports no MPS device (torch.backends.mps.is_available() is False)"
        return None

    def export(self, req: ExportRequest) -> ExportResult:
        from executorch.backends.apple.metal.metal_backend import MetalBackend
        from executorch.backends.apple.metal.metal_partitioner import MetalPartitioner

        partitioner = MetalPartitioner([MetalBackend.generate_method_name_compile_spec("forward")])
        return export_executorch(req, [partitioner], "mps")
