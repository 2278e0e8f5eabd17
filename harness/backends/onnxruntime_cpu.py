"""ONNX Runtime: ultralytics' ONNX export, run with the CPU (or CUDA) execution provider."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from harness.backends import register
from harness.backends.base import Backend, ExportRequest, ExportResult, Runner
from harness.backends.ultralytics_export import export_with_ultralytics

log = logging.getLogger(__name__)

PROVIDER = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider"}


class OrtRunner(Runner):
    """An InferenceSession fed host arrays; on the CPU provider there is no copy to exclude."""

    def __init__(self, session, precision: str) -> None:
        self.session = session
        self.input_name = session.get_inputs()[0].name
        self.precision_executed = precision
        self.timing_scope = (
            "model" if session.get_providers()[0] == "CPUExecutionProvider" else "model+h2d+d2h"
        )
        self._dtype = np.float16 if precision == "fp16" else np.float32

    def prepare(self, x: np.ndarray):
        return {self.input_name: np.ascontiguousarray(x, dtype=self._dtype)}

    def run(self, prepared):
        return self.session.run(None, prepared)

    def outputs(self, result) -> list[np.ndarray]:
        return [np.asarray(r, dtype=np.float32) for r in result]


@register
class OnnxRuntime(Backend):
    name = "onnxruntime"
    devices = ("cpu", "cuda")
    precisions = {"cpu": ("fp32",), "cuda": ("fp32", "fp16")}
    supports_dynamic = True
    library = "onnxruntime"

    def probe(self, device: str) -> str | None:
        try:
            import onnxruntime as ort
        except ImportError as e:
            return f"onnxruntime is not installed ({e})"
        have = ort.get_available_providers()
        if PROVIDER[device] not in have:
            return f"this onnxruntime build has no {PROVIDER[device]} (has {', '.join(have)})"
        if device == "cuda":
            from harness.envinfo import cuda_device_count

            if cuda_device_count() == 0:
                return "no NVIDIA GPU visible"
        return None

    def export(self, req: ExportRequest) -> ExportResult:
        import onnx

        path = export_with_ultralytics(req, "onnx", simplify=True)
        model = onnx.load(str(path), load_external_data=False)
        ops = sorted({n.op_type for n in model.graph.node})
        return ExportResult(str(path), {"onnx_opset": model.opset_import[0].version, "onnx_op_types": ops})

    def load(self, artifact: Path, cell, export_info: dict) -> Runner:
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.log_severity_level = 3
        session = ort.InferenceSession(str(artifact), sess_options=so, providers=[PROVIDER[cell.device]])
        in_type = session.get_inputs()[0].type  # 'tensor(float)' or 'tensor(float16)'
        precision = "fp16" if "float16" in in_type else "fp32"
        if cell.device == "cuda":
            from harness.backends.onnxruntime_cuda import OrtIOBindingRunner

            return OrtIOBindingRunner(session, precision, device_id=0)
        return OrtRunner(session, precision)
