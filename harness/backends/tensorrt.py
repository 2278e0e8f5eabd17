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
import re
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from harness.backends import register
from harness.backends._shared.precision import verdict
from harness.backends._shared.ultralytics_export import export_with_ultralytics
from harness.backends.base import Backend, ExportRequest, ExportResult, Runner, library_version
from harness.core.threads import GPU_CELL_REASON

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


# tokens of TensorRT's "Format/Datatype" strings (e.g. "Channel major FP16 format where channel % 8 == 0")
TRT_TYPE_TOKENS = ("FP32", "FP16", "BF16", "FP8", "FP4", "INT8", "UINT8", "INT32", "INT64", "INT4", "BOOL")
# layer types that only move or reformat data (they run in whatever type their neighbours need)
TRT_DATA_LAYERS = ("Reformat", "NoOp", "Constant", "Shuffle")
INSPECTOR_SOURCE = (
    "TensorRT's engine inspector (layer information JSON): the output data type of each compute layer of the "
    "engine as built (reformat/no-op/constant/shuffle layers left out)"
)


@contextmanager
def detailed_layer_information(build_flags: dict):
    """Build engines with ProfilingVerbosity.DETAILED, so that the engine inspector can list each layer's types.

    ultralytics asks for DETAILED only for int8 engines; otherwise the inspector lists layer names only. The setting
    adds layer metadata to the plan and does not change the kernels chosen. `build_flags` receives the TF32
    builder flag as TensorRT set it (TensorRT allows TF32 for fp32 layers by default).
    """
    import tensorrt as trt

    original = trt.Builder

    class DetailedBuilder:
        """trt.Builder whose builder configs ask for detailed layer information; everything else is the builder's."""

        def __init__(self, *args, **kwargs) -> None:
            self._builder = original(*args, **kwargs)

        def create_builder_config(self):
            config = self._builder.create_builder_config()
            config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
            try:
                build_flags["tf32"] = bool(config.get_flag(trt.BuilderFlag.TF32))
            except Exception:  # a TensorRT without the flag (strongly typed only)
                build_flags["tf32"] = None
            return config

        def __getattr__(self, name):
            return getattr(self._builder, name)

    trt.Builder = DetailedBuilder
    try:
        yield
    finally:
        trt.Builder = original


def _layer_type_token(fmt: str) -> str | None:
    text = fmt.upper().replace("FLOAT16", "FP16").replace("FLOAT32", "FP32")
    words = set(re.split(r"[^A-Z0-9]+", text))
    for token in TRT_TYPE_TOKENS:
        if token in words:
            return token
    return None


def engine_precision(engine, context, build_info: dict) -> tuple[str | None, str, dict | None]:
    """(precision_executed, precision_source, precision_detail) from the engine inspector's layer information.

    Counts each compute layer's first output type ("Format/Datatype"); the verdict rule is
    harness.backends._shared.precision.verdict. The detail also counts layers whose tactic name says TF32.
    None with the reason when the inspector is missing or the engine has no detailed layer information.
    """
    import tensorrt as trt

    requested = build_info.get("quantize")
    try:
        inspector = engine.create_engine_inspector()
        if context is not None:
            inspector.execution_context = context
        info = json.loads(inspector.get_engine_information(trt.LayerInformationFormat.JSON))
    except Exception as e:
        return None, f"TensorRT's engine inspector failed ({type(e).__name__}: {e})", None
    layers = info.get("Layers", []) if isinstance(info, dict) else []
    detailed = [layer for layer in layers if isinstance(layer, dict)]
    if not detailed:
        return (
            None,
            "the engine has no detailed layer information (built without ProfilingVerbosity.DETAILED): the "
            "inspector lists layer names only",
            {"layers": len(layers), "quantize_requested_at_build": requested},
        )
    counts: Counter = Counter()
    data: Counter = Counter()
    tf32 = 0
    for layer in detailed:
        outputs = layer.get("Outputs") or []
        fmt = outputs[0].get("Format/Datatype", "") if outputs and isinstance(outputs[0], dict) else ""
        token = _layer_type_token(str(fmt)) or "unknown"
        kind = str(layer.get("LayerType", ""))
        if any(d.lower() in kind.lower() for d in TRT_DATA_LAYERS):
            data[token] += 1
        else:
            counts[token] += 1
        if "tf32" in str(layer.get("TacticName", "")).lower():
            tf32 += 1
    detail = {
        "compute": dict(counts),
        "data": dict(data),
        "tf32_tactic_layers": tf32,
        "tf32_builder_flag": build_info.get("tf32_builder_flag"),
        "quantize_requested_at_build": requested,
    }
    executed = verdict(dict(counts))
    if executed is None:
        return None, "no compute layer of the engine reports a floating-point or 8-bit output type", detail
    return executed, INSPECTOR_SOURCE, detail


def _torch_dtype(trt, dtype):
    import torch

    return torch.from_numpy(np.empty(0, dtype=trt.nptype(dtype))).dtype


class TensorRTRunner(Runner):
    """An execution context with its I/O tensor addresses bound to torch CUDA tensors (TensorRT 10 named I/O)."""

    def __init__(self, engine, context, device: str, build_info: dict | None = None) -> None:
        import tensorrt as trt
        import torch

        self.engine = engine
        self.context = context
        self.device = torch.device(device)
        self.precision_executed, self.precision_source, self.precision_detail = engine_precision(
            engine, context, build_info or {}
        )
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

    def cpu_threads(self) -> tuple[int | None, str]:
        return None, GPU_CELL_REASON

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
    display_order = 100
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
        build_flags: dict = {}
        with detailed_layer_information(build_flags):
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
                "tf32_builder_flag": build_flags.get("tf32"),
            },
        )

    def load(self, artifact: Path, cell, export_info: dict) -> Runner:
        import tensorrt as trt
        import torch

        meta, blob = read_engine_file(artifact)
        requested = QUANTIZE_PRECISION.get(meta.get("args", {}).get("quantize"), cell.precision)
        build_info = {"quantize": requested, "tf32_builder_flag": export_info.get("tf32_builder_flag")}
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
        runner = TensorRTRunner(engine, context, cell.device, build_info)
        runner._runtime = runtime  # keep the runtime alive as long as its engine
        return runner
