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
from typing import Any

import numpy as np

from harness.backends import register
from harness.backends._shared.cuda_streams import per_stream_calls
from harness.backends._shared.precision import verdict
from harness.backends._shared.probes import torch_cuda_missing
from harness.backends._shared.ultralytics_export import export_with_ultralytics
from harness.backends.base import Backend, ExportRequest, ExportResult, Runner, Streams, library_version
from harness.threads import GPU_CELL_REASON

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
def detailed_layer_information(build_flags: dict, tf32_off: bool = False):
    """Build engines with ProfilingVerbosity.DETAILED, so that the engine inspector can list each layer's types.

    ultralytics asks for DETAILED only for int8 engines; otherwise the inspector lists layer names only. The setting
    adds layer metadata to the plan and does not change the kernels chosen. TensorRT allows TF32 for fp32 layers by
    default: `tf32_off` (fp32 cells, as for torch: fp32 means IEEE fp32 convolutions and matmuls) clears the
    builder flag. `build_flags` receives the TF32 flag as the build used it, and whether it was cleared.
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
                if tf32_off:
                    config.clear_flag(trt.BuilderFlag.TF32)
                build_flags["tf32"] = bool(config.get_flag(trt.BuilderFlag.TF32))
                build_flags["tf32_cleared"] = tf32_off
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


class ContextIO:
    """An execution context with device buffers of its own, bound once per input shape (one per stream)."""

    def __init__(self, runner: TensorRTRunner, context) -> None:
        self.runner = runner
        self.context = context
        self.shape: tuple | None = None
        self.input: Any = None  # the device buffer of the bound shape (a torch tensor)
        self.outputs: list = []

    def bind(self, t) -> None:
        """Buffers for `t`'s shape, their addresses set in the context (a new shape only)."""
        import torch

        shape = tuple(t.shape)
        if shape == self.shape:
            return
        r = self.runner
        name = r.input_names[0]
        if -1 in tuple(r.engine.get_tensor_shape(name)) and not self.context.set_input_shape(name, shape):
            raise ValueError(f"input shape {shape} is outside the engine's optimization profile")
        self.input = torch.empty(shape, dtype=r._dtypes[name], device=r.device)
        self.context.set_tensor_address(name, self.input.data_ptr())
        self.outputs = []
        for out in r.output_names:
            buf = torch.empty(
                tuple(self.context.get_tensor_shape(out)), dtype=r._dtypes[out], device=r.device
            )
            self.context.set_tensor_address(out, buf.data_ptr())
            self.outputs.append(buf)
        self.shape = shape

    def run(self, prepared, stream_handle: int) -> list:
        self.bind(prepared)
        self.input.copy_(prepared)  # on the stream that runs the engine (its current stream)
        if not self.context.execute_async_v3(stream_handle):
            raise RuntimeError("TensorRT execute_async_v3 failed")
        return self.outputs


class TensorRTRunner(Runner):
    """Execution contexts with their I/O tensor addresses bound to torch CUDA tensors (TensorRT 10 named I/O).

    `prepare` copies the input to the device (a tensor of its own, touching no context, so several threads can
    prepare at once); `run` copies it into the context's input buffer and enqueues the engine on torch's current
    stream. `streams(n)` gives each stream an execution context of its own (with its own buffers) on a CUDA stream
    of its own (one context rebound from several threads was a race). `cuda` is torch.cuda (a fake in the CPU
    tests).
    """

    def __init__(
        self, engine, context, device: str, build_info: dict | None = None, cuda: Any = None
    ) -> None:
        import tensorrt as trt
        import torch

        self.engine = engine
        self.device = torch.device(device)
        self.cuda = cuda or torch.cuda
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
        self._runtime: Any = None  # the TensorRT runtime that deserialized the engine, kept alive with it
        self.main = ContextIO(self, context)
        self.stream_contexts: dict[int, ContextIO] = {}

    @property
    def context(self):
        """The execution context of single-stream calls."""
        return self.main.context

    def cpu_threads(self) -> tuple[int | None, str]:
        return None, GPU_CELL_REASON

    def prepare(self, x: np.ndarray):
        import torch

        name = self.input_names[0]
        if isinstance(x, torch.Tensor):  # converted on the device already (device_input)
            t = x.to(self.device, self._dtypes[name]).contiguous()
        else:
            t = torch.from_numpy(np.array(x)).to(self.device, self._dtypes[name]).contiguous()
        self.main.bind(t)  # a new shape: buffers and addresses set now, outside any timed call
        return t

    def device_input(self) -> tuple[Any, Any] | None:
        dtype = self._dtypes[self.input_names[0]]
        return (self.device, dtype) if getattr(dtype, "is_floating_point", False) else None

    def _stream_handle(self) -> int:
        return self.cuda.current_stream(self.device).cuda_stream

    def run(self, prepared):
        return self.main.run(prepared, self._stream_handle())

    def synchronize(self) -> None:
        self.cuda.synchronize(self.device)

    def outputs(self, result) -> list[np.ndarray]:
        return [r.detach().float().cpu().numpy() for r in result]

    def streams(self, n: int) -> Streams:
        def make(i: int, stream):
            io = self.stream_contexts.get(i)
            if io is None:
                io = self.stream_contexts[i] = ContextIO(self, self.engine.create_execution_context())
            if self.main.input is not None:
                io.bind(self.main.input)  # the shape known so far: bound before the scenario starts
            return lambda prepared: io.run(prepared, stream.cuda_stream)

        return per_stream_calls(
            self.run,
            self.device,
            n,
            f"{n} execution contexts of one engine, each with its own buffers on a CUDA stream of its own",
            cuda=self.cuda,
            make_fn=make,
        )

    def close(self) -> None:
        self.main = ContextIO(self, None)
        self.stream_contexts.clear()
        self.engine = None


@register
class TensorRT(Backend):
    name = "tensorrt"
    display_order = 100
    registry_order = 80
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
        return torch_cuda_missing()

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
        with detailed_layer_information(build_flags, tf32_off=req.precision == "fp32"):
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
                "tf32_cleared_for_fp32": build_flags.get("tf32_cleared"),
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
