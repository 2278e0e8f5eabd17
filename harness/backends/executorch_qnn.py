"""ExecuTorch with the Qualcomm QNN delegate (Hexagon HTP): export only, and only with the QNN SDK present.

Lowering calls into the QNN SDK's libraries. When QNN_SDK_ROOT is unset, executorch's setup would try to download
the SDK: the probe and the export both refuse first, since nothing may be downloaded at run time.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from harness.backends import register
from harness.backends._shared.executorch_export import export_executorch, partitioner_missing
from harness.backends.base import BackendUnavailable, ExportOnlyBackend, ExportRequest, ExportResult

log = logging.getLogger(__name__)

DEFAULT_SOC = "SM8650"  # Snapdragon 8 Gen 3; override with options["qnn_soc"]


def sdk_missing() -> str | None:
    """Why the QNN SDK cannot be used here, or None."""
    root = os.environ.get("QNN_SDK_ROOT")
    if not root:
        return "QNN SDK not found (QNN_SDK_ROOT unset)"
    if not Path(root).is_dir():
        return f"QNN SDK not found (QNN_SDK_ROOT={root} is not a directory)"
    return None


@register
class ExecuTorchQnn(ExportOnlyBackend):
    name = "executorch-qnn"
    display_order = 160
    registry_order = 160
    devices = ("qnn",)
    # The HTP runs fp16 or quantized integer graphs, not fp32.
    precisions = {"qnn": ("fp16",)}
    library = "executorch"

    def probe(self, device: str) -> str | None:
        return sdk_missing() or partitioner_missing(
            "executorch.backends.qualcomm.partition.qnn_partitioner", "QnnPartitioner", "QNN"
        )

    def export(self, req: ExportRequest) -> ExportResult:
        reason = sdk_missing()
        if reason:
            raise BackendUnavailable(reason)
        from executorch.backends.qualcomm.partition.qnn_partitioner import QnnPartitioner
        from executorch.backends.qualcomm.serialization.qc_schema import QcomChipset
        from executorch.backends.qualcomm.utils.utils import (
            generate_htp_compiler_spec,
            generate_qnn_executorch_compiler_spec,
        )

        soc = QcomChipset[req.options.get("qnn_soc", DEFAULT_SOC)]
        specs = generate_qnn_executorch_compiler_spec(
            soc_model=soc, backend_options=generate_htp_compiler_spec(use_fp16=True)
        )
        return export_executorch(req, [QnnPartitioner(specs)], "qnn")
