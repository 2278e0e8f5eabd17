"""OpenVINO: ultralytics' OpenVINO IR export, compiled for the CPU (or an Intel GPU when present)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from harness.backends import register
from harness.backends.base import Backend, ExportRequest, ExportResult, Runner
from harness.backends.ultralytics_export import export_with_ultralytics

log = logging.getLogger(__name__)

OV_DEVICE = {"cpu": "CPU", "gpu": "GPU"}
# OpenVINO element type names -> record precision names
OV_PRECISION = {"f32": "fp32", "f16": "fp16", "bf16": "bf16", "i8": "int8", "u8": "int8"}


class OpenVinoRunner(Runner):
    """A compiled model with one reusable infer request (synchronous inference)."""

    def __init__(self, compiled) -> None:
        self.compiled = compiled
        self.request = compiled.create_infer_request()
        hint = compiled.get_property("INFERENCE_PRECISION_HINT")
        self.precision_executed = OV_PRECISION.get(str(getattr(hint, "type_name", hint)).lower(), str(hint))
        self.timing_scope = "model"

    def prepare(self, x: np.ndarray):
        return np.ascontiguousarray(x, dtype=np.float32)

    def run(self, prepared):
        return self.request.infer(prepared, share_inputs=True, share_outputs=False)

    def outputs(self, result) -> list[np.ndarray]:
        return [np.asarray(result[o], dtype=np.float32) for o in self.compiled.outputs]


@register
class OpenVino(Backend):
    name = "openvino"
    devices = ("cpu", "gpu")
    precisions = {"cpu": ("fp32", "fp16"), "gpu": ("fp32", "fp16")}
    supports_dynamic = True
    library = "openvino"

    def probe(self, device: str) -> str | None:
        try:
            import openvino as ov
        except ImportError as e:
            return f"openvino is not installed ({e})"
        available = ov.Core().available_devices
        if not any(d.split(".")[0] == OV_DEVICE[device] for d in available):
            return (
                f"OpenVINO sees no {OV_DEVICE[device]} device (available: {', '.join(available) or 'none'})"
            )
        return None

    def export(self, req: ExportRequest) -> ExportResult:
        # The artifact is the IR directory (model .xml plus the .bin weights), so its size counts both.
        return ExportResult(str(export_with_ultralytics(req, "openvino")), {})

    def load(self, artifact: Path, cell, export_info: dict) -> Runner:
        import openvino as ov

        core = ov.Core()
        # Ask for the requested precision explicitly: on CPUs with bf16/AMX OpenVINO otherwise silently runs bf16.
        config = {"INFERENCE_PRECISION_HINT": "f16" if cell.precision == "fp16" else "f32"}
        xml = next(Path(artifact).glob("*.xml")) if Path(artifact).is_dir() else Path(artifact)
        compiled = core.compile_model(core.read_model(str(xml)), OV_DEVICE[cell.device], config)
        return OpenVinoRunner(compiled)
