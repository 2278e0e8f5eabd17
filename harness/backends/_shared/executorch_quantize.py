"""ExecuTorch int8: PT2E post-training quantisation with a backend's quantizer, calibrated on real images.

The network is exported (torch.export, as for fp32), prepared with the quantizer's observers (`prepare_pt2e`), run
on the calibration split letterboxed at the export shape, converted (`convert_pt2e`: quantize/dequantize pairs
around the quantised operators) and exported again; the caller lowers that program as it lowers fp32.

The head's post-processing stays float (`KeepDecodeFloat`), as ultralytics' OpenVINO int8 export keeps it out of
NNCF's scope: quantised with the rest, the end-to-end head's last concatenation of boxes (0..640 px), scores (0..1)
and classes shares one int8 scale, every score rounds to 0, and mAP is 0 (measured: stand-in yolo26n at 320, 16
val images, 0.000 against the reference's 0.290). The convolutions of the head stay quantised.
"""

from __future__ import annotations

import logging

from harness.backends._shared.calibration import batches, calibration_for, used_images
from harness.backends.base import ExportRequest

log = logging.getLogger(__name__)


def head_name(program) -> str:
    """The detection head's module name in the exported graph: the last `model.N` of the network."""
    indices = {
        int(parts[1])
        for n in program.graph.nodes
        for entry in (n.meta.get("nn_module_stack") or {}).values()
        if len(parts := entry[0].split(".")) >= 2 and parts[0] == "model" and parts[1].isdigit()
    }
    return f"model.{max(indices)}"


def keep_decode_float(quantizer, head: str):
    """`quantizer`, except that the operators of the head's own forward (its decoding, top-k and concatenation:
    nodes whose innermost module is the network or the head itself, not one of the head's convolutions) are left
    unannotated, so they run in float."""
    from torchao.quantization.pt2e.quantizer import Quantizer

    def decoding(node) -> bool:
        stack = node.meta.get("nn_module_stack")
        if not stack:
            return node.op == "call_function"
        return list(stack.values())[-1][0] in ("", head)

    class KeepDecodeFloat(Quantizer):
        def annotate(self, model):
            quantizer.annotate(model)
            for node in model.graph.nodes:
                if decoding(node):
                    node.meta.pop("quantization_annotation", None)
            return model

        def validate(self, model) -> None:
            quantizer.validate(model)

    return KeepDecodeFloat()


def quantized_program(req: ExportRequest, quantizer) -> tuple[object, dict]:
    """(exported program of the int8-quantised network, export info with its `calibration`) for `req`."""
    import torch
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from harness.backends._shared.executorch_export import exported_program

    cal = calibration_for(req)
    program = exported_program(req)
    head = head_name(program)
    prepared = prepare_pt2e(program.module(), keep_decode_float(quantizer, head))
    example = None
    with torch.no_grad():
        for x in batches(cal, req.height, req.width, req.batch):
            example = torch.from_numpy(x)
            prepared(example)  # observers record activation ranges
    converted = convert_pt2e(prepared)
    program = torch.export.export(converted, (example,), strict=False)
    return program, {"calibration": cal.info(used_images(cal, req.batch)), "float_scope": f"{head} decoding"}
