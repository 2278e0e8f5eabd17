"""ExecuTorch with the Vulkan delegate (GPU shaders): export only, no Vulkan runtime is built into the PyPI wheel."""

from __future__ import annotations

import logging
from pathlib import Path

from harness.backends import register
from harness.backends._shared.executorch_export import export_executorch
from harness.backends.base import Backend, BackendUnavailable, ExportRequest, ExportResult, Runner

log = logging.getLogger(__name__)


@register
class ExecuTorchVulkan(Backend):
    name = "executorch-vulkan"
    display_order = 130
    registry_order = 130
    devices = ("vulkan",)
    precisions = {"vulkan": ("fp32", "fp16")}
    library = "executorch"
    export_only = True

    def probe(self, device: str) -> str | None:
        try:
            from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner  # noqa: F401
        except ImportError as e:
            return f"the installed executorch has no Vulkan partitioner ({e})"
        return None

    def export(self, req: ExportRequest) -> ExportResult:
        from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner

        # force_fp16 makes the delegate store and compute in half precision; fp32 is the delegate's default.
        options = {"force_fp16": True} if req.precision == "fp16" else {}
        return export_executorch(req, [VulkanPartitioner(options)], "vulkan")

    def load(self, artifact: Path, cell, export_info: dict) -> Runner:
        raise BackendUnavailable(f"no runtime for {self.name} on this host; export only")
