"""ONNX Runtime int8: static QDQ quantisation (onnxruntime.quantization.quantize_static) of an fp32 ONNX export.

Weights int8 per output channel (symmetric), activations uint8 (asymmetric, min-max calibrated on the calibration
split letterboxed at the export shape): ONNX Runtime's recommended U8S8 on x86-64. Only the arithmetic-heavy
operators (`OP_TYPES`) are quantised: the head's box decoding and top-k stay in fp32, so box coordinates in pixels
are not rounded to 256 levels. On x86-64 CPUs without VNNI the weights use 7 bits (`reduce_range`), as ONNX
Runtime advises, to avoid the saturation of its u8s8 AVX2 kernels.
"""

from __future__ import annotations

import logging
from pathlib import Path

from harness.backends._shared.calibration import batches, calibration_for, used_images
from harness.backends.base import ExportRequest

log = logging.getLogger(__name__)

OP_TYPES = ("Conv", "MatMul", "Gemm")


def _has_vnni() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return True  # not Linux x86: ARM and others have no u8s8 saturation issue
    return "vnni" in flags


def quantize_static_qdq(fp32: Path, req: ExportRequest) -> tuple[Path, dict]:
    """Quantise the fp32 ONNX model `fp32` for `req`; returns the int8 model's path and the export info."""
    import onnx
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    cal = calibration_for(req)
    input_name = onnx.load(str(fp32), load_external_data=False).graph.input[0].name

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self._it = iter(batches(cal, req.height, req.width, req.batch))

        def get_next(self):
            x = next(self._it, None)
            return None if x is None else {input_name: x}

    out = Path(fp32).with_name(Path(fp32).stem + "_int8_qdq.onnx")
    reduce_range = not _has_vnni()
    quantize_static(
        str(fp32),
        str(out),
        Reader(),
        quant_format=QuantFormat.QDQ,
        op_types_to_quantize=list(OP_TYPES),
        per_channel=True,
        reduce_range=reduce_range,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
        calibrate_method=CalibrationMethod.MinMax,
    )
    Path(fp32).unlink()  # the artifact is the int8 model; the fp32 one would only double the cache entry
    info = {
        "calibration": cal.info(used_images(cal, req.batch)),
        "quantization": (
            "int8 static QDQ (onnxruntime.quantization.quantize_static): weights int8 per channel, activations "
            f"uint8 min-max, operators {', '.join(OP_TYPES)}"
            + (", reduce_range (no VNNI)" if reduce_range else "")
        ),
    }
    return out, info
