"""ExecuTorch on Apple GPUs through Metal (the AOTInductor-based Metal backend): export only, and only on macOS.

The PyPI wheel ships the export-side Python of the Metal backend (MetalPartitioner), not the older MPS delegate.
Lowering compiles Metal kernels with AOTInductor for torch's `mps` device and loads torchao's MPS kernels
(libtorchao_ops_mps_aten.dylib), so on Linux the export cannot run: the probe says so instead of failing late.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from harness.backends import register
from harness.backends._shared.executorch_export import export_executorch
from harness.backends.base import Backend, BackendUnavailable, ExportRequest, ExportResult, Runner

log = logging.getLogger(__name__)


@register
class ExecuTorchMps(Backend):
    name = "executorch-mps"
    display_order = 150
    registry_order = 150
    devices = ("mps",)
    precisions = {"mps": ("fp32",)}
    library = "executorch"
    export_only = True

    def probe(self, device: str) -> str | None:
        if sys.platform != "darwin":
            return (
                f"the ExecuTorch Metal backend exports on macOS only: it compiles with AOTInductor for torch's mps "
                f"device and torchao's MPS kernels (libtorchao_ops_mps_aten.dylib), neither exists on {sys.platform}"
            )
        try:
            import torch
            from executorch.backends.apple.metal.metal_partitioner import MetalPartitioner  # noqa: F401
        except ImportError as e:
            return f"the installed executorch has no Metal partitioner ({e})"
        if not torch.backends.mps.is_available():
            return "torch reports no MPS device (torch.backends.mps.is_available() is False)"
        return None

    def export(self, req: ExportRequest) -> ExportResult:
        from executorch.backends.apple.metal.metal_backend import MetalBackend
        from executorch.backends.apple.metal.metal_partitioner import MetalPartitioner

        partitioner = MetalPartitioner([MetalBackend.generate_method_name_compile_spec("forward")])
        return export_executorch(req, [partitioner], "mps")

    def load(self, artifact: Path, cell, export_info: dict) -> Runner:
        raise BackendUnavailable(f"no runtime for {self.name} on this host; export only")
