"""ONNX Runtime with the TensorRT execution provider (CUDA EP for what TensorRT does not take), I/O bound on the GPU.

The artifact is ultralytics' fp32 ONNX export; fp16 is TensorRT's choice of kernels (`trt_fp16_enable`), not an
fp16 graph. TensorRT builds its engine when the session is created (and on the first run for dynamic inputs), so
`load` creates the session and runs once, and that build time is `runner.compile_s`, apart from latency. The
engine cache is off: every cell's `compile_s` is a real build, and no engine from another run is ever reused.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np

from harness.backends import register
from harness.backends._shared.ort_cuda import preload_cuda_libraries, provider_missing, require_provider
from harness.backends._shared.ort_iobinding import OrtIOBindingRunner
from harness.backends._shared.ultralytics_export import export_with_ultralytics
from harness.backends.base import Backend, ExportRequest, ExportResult, Runner, library_version
from harness.backends.onnxruntime import graph_counts, onnx_export_info, session_options

log = logging.getLogger(__name__)

TRT_EP = "TensorrtExecutionProvider"
CUDA_EP = "CUDAExecutionProvider"
#: the TensorRT major version onnxruntime-gpu's TensorRT EP is built against (1.20 to 1.31: TensorRT 10, whose
#: libnvinfer.so.10 it opens by soname); the gpu extra pins tensorrt to the same major
EP_TENSORRT_MAJOR = 10


def tensorrt_mismatch(ort_version: str | None, trt_version: str | None) -> str | None:
    """Why the installed TensorRT cannot serve onnxruntime-gpu's TensorRT EP (both versions named), or None."""
    if trt_version is None:
        return None  # preload_tensorrt says what is missing
    major = int(trt_version.split(".")[0])
    if major != EP_TENSORRT_MAJOR:
        return (
            f"onnxruntime-gpu {ort_version}'s TensorRT EP loads TensorRT {EP_TENSORRT_MAJOR} "
            f"(libnvinfer.so.{EP_TENSORRT_MAJOR}), and the installed tensorrt is {trt_version}: install "
            f"tensorrt>={EP_TENSORRT_MAJOR},<{EP_TENSORRT_MAJOR + 1} (the gpu extra's pin)"
        )
    return None


def preload_tensorrt() -> str | None:
    """Make libnvinfer loadable for the TensorRT EP; None when it is, else the reason.

    The `tensorrt` wheel keeps its libraries in its own package directory; importing it loads them into the
    process, where the EP's dlopen by soname then finds them.
    """
    try:
        import tensorrt  # noqa: F401

        return None
    except ImportError:
        pass
    import ctypes

    errors = []
    for soname in ("libnvinfer.so.10", "libnvinfer.so.11", "libnvinfer.so"):
        try:
            ctypes.CDLL(soname)
            return None
        except OSError as e:
            errors.append(str(e))
    return "the TensorRT EP needs the TensorRT libraries: neither the tensorrt wheel nor libnvinfer.so is installed"


def trt_provider_options(cell, device_id: int = 0) -> dict:
    """TensorRT EP options for `cell`: fp16 kernels when asked, an explicit profile for dynamic input."""
    opts: dict = {
        "device_id": device_id,
        "trt_fp16_enable": cell.precision == "fp16",
        "trt_engine_cache_enable": False,
    }
    if cell.shape.dynamic:
        from harness.yolo.dynamic import DEFAULT_RANGE

        lo, hi = DEFAULT_RANGE
        b = cell.batch
        opts["trt_profile_min_shapes"] = f"images:{b}x3x{lo}x{lo}"
        opts["trt_profile_opt_shapes"] = f"images:{b}x3x640x640"
        opts["trt_profile_max_shapes"] = f"images:{b}x3x{hi}x{hi}"
    return opts


def trt_ep_precision(artifact: Path, session, cell) -> tuple[None, str, dict | None]:
    """Always (None, why, graph counts): the TensorRT EP builds its engine inside ONNX Runtime, and neither reports
    the precision of the engine's layers; the fp32 graph says nothing about the kernels TensorRT picked
    (fp16 when trt_fp16_enable is on, TF32 for fp32 layers unless TensorRT is told otherwise).
    """
    opts = session.get_provider_options().get(TRT_EP, {})
    fp16 = opts.get("trt_fp16_enable")
    why = (
        "the TensorRT EP builds its engine inside ONNX Runtime, and neither reports the precision of the engine's "
        f"layers (graph element types in the detail; trt_fp16_enable={fp16} lets TensorRT choose the kernels)"
    )
    try:
        counts = graph_counts(artifact, session.get_inputs()[0].type)
        counts["trt_fp16_enable"] = fp16 in ("1", 1, "true", "True")
        detail: dict | None = counts
    except Exception:
        detail = None
    return None, why, detail


@register
class OnnxRuntimeTensorRT(Backend):
    name = "onnxruntime-trt"
    display_order = 110
    registry_order = 90
    devices = ("cuda",)
    precisions = {"cuda": ("fp32", "fp16")}
    supports_dynamic = True
    library = "onnxruntime"

    def probe(self, device: str) -> str | None:
        reason = provider_missing(TRT_EP, "; install onnxruntime-gpu")
        if reason:
            return reason
        from harness.backends._shared.nvml_access import cuda_device_count

        if cuda_device_count() == 0:
            from harness.backends._shared.nvml_access import nvml_reason

            return f"no NVIDIA GPU visible ({nvml_reason() or 'NVML lists none'})"
        mismatch = tensorrt_mismatch(library_version("onnxruntime"), library_version("tensorrt"))
        return mismatch or preload_tensorrt()

    def export(self, req: ExportRequest) -> ExportResult:
        # One fp32 graph, exported on the CPU: TensorRT picks fp16 kernels itself when trt_fp16_enable is set.
        path = export_with_ultralytics(req, "onnx", simplify=True, half=False, int8=False, device="cpu")
        return ExportResult(str(path), onnx_export_info(path))

    def load(self, artifact: Path, cell, export_info: dict) -> Runner:
        import onnxruntime as ort

        preload_tensorrt()
        preload_cuda_libraries(ort)
        so = session_options()
        providers = [(TRT_EP, trt_provider_options(cell)), (CUDA_EP, {"device_id": 0})]
        t0 = time.perf_counter()
        session = ort.InferenceSession(str(artifact), sess_options=so, providers=providers)
        require_provider(session, TRT_EP)
        inp = session.get_inputs()[0]
        dtype = np.float16 if "float16" in inp.type else np.float32
        dummy = np.zeros((cell.batch, 3, cell.shape.height or 640, cell.shape.width or 640), dtype=dtype)
        session.run(None, {inp.name: dummy})  # engine build (deferred to the first run for dynamic input)
        compile_s = time.perf_counter() - t0
        runner = OrtIOBindingRunner(session, trt_ep_precision(artifact, session, cell), device_id=0)
        runner.compile_s = compile_s
        log.info("TensorRT EP built %s in %.1f s", cell.id, compile_s)
        return runner
