"""ExecuTorch int8: PT2E post-training quantisation with a backend's quantizer, calibrated on real images.

The network is exported (torch.export, as for fp32), prepared with the quantizer's observers (`prepare_pt2e`), run
on the calibration split letterboxed at the export shape, converted (`convert_pt2e`: quantize/dequantize pairs
around the quantised operators) and exported again; the caller lowers that program as it lowers fp32.
"""

from __future__ import annotations

import logging

from harness.backends._shared.calibration import batches, calibration_for, used_images
from harness.backends.base import ExportRequest

log = logging.getLogger(__name__)


def quantized_program(req: ExportRequest, quantizer) -> tuple[object, dict]:
    """(exported program of the int8-quantised network, export info with its `calibration`) for `req`."""
    import torch
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from harness.backends._shared.executorch_export import exported_program

    cal = calibration_for(req)
    prepared = prepare_pt2e(exported_program(req).module(), quantizer)
    example = None
    with torch.no_grad():
        for x in batches(cal, req.height, req.width, req.batch):
            example = torch.from_numpy(x)
            prepared(example)  # observers record activation ranges
    converted = convert_pt2e(prepared)
    program = torch.export.export(converted, (example,), strict=False)
    return program, {"calibration": cal.info(used_images(cal, req.batch))}
