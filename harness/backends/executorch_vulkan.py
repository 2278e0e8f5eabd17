"""ExecuTorch with the Vulkan delegate (GPU shaders): export only, no Vulkan runtime is built into the PyPI wheel."""

from __future__ import annotations

import logging

from harness.backends import register
from harness.backends._shared.executorch_export import export_executorch, partitioner_missing
from harness.backends.base import ExportOnlyBackend, ExportRequest, ExportResult

log = logging.getLogger(__name__)


@register
class ExecuTorchVulkan(ExportOnlyBackend):
    name = "executorch-vulkan"
    display_order = 130
    registry_order = 130
    devices = ("vulkan",)
    precisions = {"vulkan": ("fp32", "fp16")}
    library = "executorch"

    def probe(self, device: str) -> str | None:
        return partitioner_missing(
            "executorch.backends.vulkan.partitioner.vulkan_partitioner", "VulkanPartitioner", "Vulkan"
        )

    def export(self, req: ExportRequest) -> ExportResult:
        from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner

        # force_fp16 makes the delegate store and compute in half precision; fp32 is the delegate's default.
        options = {"force_fp16": True} if req.precision == "fp16" else {}
        return export_executorch(req, [VulkanPartitioner(options)], "vulkan")
