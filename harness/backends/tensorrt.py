"""TensorRT: ultralytics' engine export, run with the TensorRT runtime on torch CUDA tensors as I/O buffers.

An ultralytics `.engine` file is a 4-byte little-endian length, that many bytes of JSON metadata, then the
serialized engine (`read_engine_file`). Dynamic height/width come from the export's one optimization profile
(min 32x32, opt = the export shape, max = twice it); int8 needs calibration images on disk, never downloaded.
The engine is enqueued on torch's current CUDA stream (`execute_async_v3`), so the harness's synchronize and CUDA
events see its work.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
from pathlib import Path

import numpy as np

from harness.backends import register
from harness.backends.base import Backend, ExportRequest, ExportResult, Runner, library_version
from harness.backends.ultralytics_export import export_with_ultralytics

log = logging.getLogger(__name__)

INT8_DATA_ENV = "YOLO26_BENCH_INT8_DATA"
QUANTIZE_PRECISION = {
    16: "fp16",
    "16": "fp16",
    8: "int8",
    "8": "int8",
    32: "fp32",
    "32": "fp32",
    None: "fp32",
}


def read_engine_file(path: Path) -> tuple[dict, bytes]:
    """(metadata, serialized engine) of an ultralytics .engine file; ({}, whole file) when it has no header."""
    data = Path(path).read_bytes()
    if len(data) >= 4:
        n = int.from_bytes(data[:4], byteorder="little", signed=True)
        if 0 < n <= len(data) - 4:
            try:
                return json.loads(data[4 : 4 + n].decode("utf-8")), data[4 + n :]
            except (UnicodeDecodeError, ValueError):
                pass  # engine bytes that merely look like a length: there is no header
    return {}, data


def int8_calibration_data() -> tuple[str | None, str | None]:
    """(dataset YAML for ultralytics' `data=`, None) when calibration images exist locally, else (None, reason)."""
    env = os.environ.get(INT8_DATA_ENV)
    if env:
        if Path(env).is_file():
            return env, None
        return None, f"{INT8_DATA_ENV}={env} is not a file (expected a dataset YAML whose images are on disk)"
    try:
        from ultralytics.utils import SETTINGS

        root = Path(SETTINGS["datasets_dir"]) / "coco8" / "images" / "val"
    except Exception as e:
        return None, f"int8 calibration images: ultralytics' datasets_dir is unreadable ({e})"
    if root.is_dir() and any(p.suffix.lower() in (".jpg", ".jpeg", ".png") for p in root.iterdir()):
        return "coco8.yaml", None
    return None, (
        f"int8 needs calibration images and none are on disk ({root} is empty or missing; nothing is downloaded): "
        f"set {INT8_DATA_ENV} to a dataset YAML whose images are local"
    )


def _torch_dtype(trt, dtype):
    import torch

    return torch.from_numpy(np.empty(0, dtype=trt.nptype(dtype))).dtype


class TensorRTRunner(Runner):
    """An execution context with its I/O tensor addresses bound to torch CUDA tensors (TensorRT 10 named I/O)."""

    def __init__(self, engine, context, device: str, precision: str) -> None:
        import tensorrt as trt
        import torch

        self.engine = engine
        self.context = context
        self.device = torch.device(device)
        self.precision_executed = precision
        self.timing_scope = "model"
        self.torch_stream = True  # enqueued on torch's current stream (execute_async_v3)
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        self.input_names = [n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        # ultralytics' order: output0, output1, ... (the model's output order)
        self.output_names = sorted(n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.OUTPUT)
        if len(self.input_names) != 1:
            raise RuntimeError(f"expected one engine input, found {self.input_names}")
        self._dtypes = {n: _torch_dtype(trt, engine.get_tensor_dtype(n)) for n in names}
        self._input = None
        self._outputs: list = []

    def prepare(self, x: np.ndarray):
        import torch

        name = self.input_names[0]
        t = torch.from_numpy(np.array(x)).to(self.device, self._dtypes[name]).contiguous()
        if -1 in tuple(self.engine.get_tensor_shape(name)) and not self.context.set_input_shape(
            name, tuple(t.shape)
        ):
            raise ValueError(f"input shape {tuple(t.shape)} is outside the engine's optimization profile")
        self.context.set_tensor_address(name, t.data_ptr())
        self._outputs = []
        for out in self.output_names:
            buf = torch.empty(
                tuple(self.context.get_tensor_shape(out)), dtype=self._dtypes[out], device=self.device
            )
            self.context.set_tensor_address(out, buf.data_ptr())
            self._outputs.append(buf)
        self._input = t
        return t

    def run(self, prepared):
        import torch

        if prepared is not self._input:
            self._input.copy_(prepared)
        if not self.context.execute_async_v3(torch.cuda.current_stream(self.device).cuda_stream):
            raise RuntimeError("TensorRT execute_async_v3 failed")
        return self._outputs

    def synchronize(self) -> None:
        import torch

        torch.cuda.synchronize(self.device)

    def outputs(self, result) -> list[np.ndarray]:
        return [r.detach().float().cpu().numpy() for r in result]

    def close(self) -> None:
        self._input = None
        self._outputs = []
        self.context = None
        self.engine = None


@register
class TensorRT(Backend):
    name = "tensorrt"
    devices = ("cuda",)
    precisions = {"cuda": ("fp32", "fp16", "int8")}
    supports_dynamic = True
    library = "tensorrt"

    def probe(self, device: str) -> str | None:
        try:
            import tensorrt as trt
        except ImportError as e:
            return f"tensorrt is not importable ({e}); install tensorrt-cu12 or tensorrt-cu13"
        if int(trt.__version__.split(".")[0]) < 10:
            return f"TensorRT {trt.__version__} predates the named-tensor API (TensorRT >= 10 is needed)"
        try:
            import torch
        except ImportError as e:
            return f"torch is not installed ({e})"
        if not torch.cuda.is_available():
            return f"no CUDA device visible to torch {torch.__version__} (torch.version.cuda={torch.version.cuda})"
        return None

    def unsupported(self, cell) -> str | None:
        reason = super().unsupported(cell)
        if reason:
            return reason
        version = library_version("tensorrt")
        major = int(version.split(".")[0]) if version else 0
        if (
            cell.precision in ("fp16", "int8")
            and major >= 11
            and importlib.util.find_spec("modelopt") is None
        ):
            return (
                f"TensorRT {version} builds {cell.precision} only from a ModelOpt-quantized ONNX, and "
                "nvidia-modelopt[onnx] is not installed"
            )
        if cell.precision == "int8":
            return int8_calibration_data()[1]
        return None

    def export(self, req: ExportRequest) -> ExportResult:
        kwargs = {}
        if req.precision == "int8":
            data, reason = int8_calibration_data()
            if data is None:
                raise RuntimeError(reason)
            kwargs["data"] = data
        path = export_with_ultralytics(req, "engine", **kwargs)
        meta, _ = read_engine_file(path)
        args = meta.get("args", {})
        return ExportResult(
            str(path),
            {
                "tensorrt": library_version("tensorrt"),
                "quantize": args.get("quantize"),
                "dynamic": args.get("dynamic"),
                "imgsz": meta.get("imgsz"),
            },
        )

    def load(self, artifact: Path, cell, export_info: dict) -> Runner:
        import tensorrt as trt
        import torch

        meta, blob = read_engine_file(artifact)
        precision = QUANTIZE_PRECISION.get(meta.get("args", {}).get("quantize"), cell.precision)
        logger = trt.Logger(trt.Logger.WARNING)
        with torch.cuda.device(torch.device(cell.device)):
            runtime = trt.Runtime(logger)
            engine = runtime.deserialize_cuda_engine(blob)
            if engine is None:
                raise RuntimeError(
                    f"TensorRT {trt.__version__} could not deserialize {artifact} (built by another TensorRT version "
                    "or for another GPU?)"
                )
            context = engine.create_execution_context()
        runner = TensorRTRunner(engine, context, cell.device, precision)
        runner._runtime = runtime  # keep the runtime alive as long as its engine
        return runner
