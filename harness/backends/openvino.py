"""OpenVINO: ultralytics' OpenVINO IR export, compiled for the CPU (or an Intel GPU when present).

On the CPU the model is compiled with the run's thread budget (INFERENCE_NUM_THREADS) and the LATENCY hint (one
stream: one inference uses all the threads), and the record reads both the threads and the precision back from the
compiled model: INFERENCE_NUM_THREADS, and each layer's runtimePrecision in the execution graph (a CPU without
native fp16 runs an f16 hint in bf16, or f32, and the execution graph says which).
"""

from __future__ import annotations

import importlib.util
import logging
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

from harness.backends import register
from harness.backends._shared.artifact_files import only_file, recorded_file
from harness.backends._shared.precision import verdict
from harness.backends._shared.probes import not_installed
from harness.backends._shared.ultralytics_export import export_with_ultralytics, no_font_download
from harness.backends.base import (
    SPLIT,
    Backend,
    ExportRequest,
    ExportResult,
    Mechanism,
    Plan,
    Runner,
    Streams,
    split,
    split_plan,
)
from harness.threads import GPU_CELL_REASON

log = logging.getLogger(__name__)

OV_DEVICE = {"cpu": "CPU", "gpu": "GPU"}
# Execution-graph layer types that move, reshape or convert data rather than compute: they run in whatever type
# their neighbours need (a Reorder converts between precisions), so they do not decide the precision executed.
DATA_LAYERS = frozenset(
    {
        "Input",
        "Parameter",
        "Output",
        "Result",
        "Const",
        "Constant",
        "Reorder",
        "Reshape",
        "Squeeze",
        "Unsqueeze",
        "Convert",
        "Transpose",
        "Split",
        "Concatenation",
        "Broadcast",
        "Gather",
        "GatherElements",
        "ShapeOf",
        "StridedSlice",
        "Slice",
    }
)
RUNTIME_SOURCE = (
    "OpenVINO's execution graph (compiled.get_runtime_model()): the runtimePrecision of each compute layer "
    "(layers that only move, reshape or convert data are left out)"
)


def _rt(rt_info, key: str) -> str | None:
    if key not in rt_info:
        return None
    value = rt_info[key]
    return str(value.astype(str) if hasattr(value, "astype") else value)


def runtime_precision(compiled) -> tuple[str | None, str, dict | None]:
    """(precision_executed, precision_source, precision_detail) from the compiled model's execution graph.

    The detail counts layers per runtime precision (OpenVINO's element-type names): `compute`, the layers that
    decide, and `data`, the others; `by_layer_type` splits the compute counts by layer type. The verdict rule is
    harness.backends._shared.precision.verdict (>= 90% of the floating-point/8-bit compute layers, else "mixed").
    """
    try:
        ops = compiled.get_runtime_model().get_ordered_ops()
    except Exception as e:
        return None, f"OpenVINO did not return the execution graph ({type(e).__name__}: {e})", None
    compute: Counter = Counter()
    data: Counter = Counter()
    by_type: dict[str, Counter] = {}
    for op in ops:
        rt = op.get_rt_info()
        layer, precision = _rt(rt, "layerType"), _rt(rt, "runtimePrecision")
        if precision is None:
            continue
        if layer in DATA_LAYERS:
            data[precision] += 1
        else:
            compute[precision] += 1
            by_type.setdefault(layer or "?", Counter())[precision] += 1
    detail = {
        "compute": dict(compute),
        "data": dict(data),
        "by_layer_type": {k: dict(v) for k, v in sorted(by_type.items())},
    }
    if not compute and not data:
        return None, "OpenVINO's execution graph carries no runtimePrecision for its layers", None
    executed = verdict(dict(compute))
    if executed is None:
        return (
            None,
            "no compute layer of OpenVINO's execution graph runs a floating-point or 8-bit type",
            detail,
        )
    return executed, RUNTIME_SOURCE, detail


class OpenVinoRunner(Runner):
    """A compiled model with one reusable infer request (synchronous inference)."""

    def __init__(
        self, compiled, device: str = "cpu", core=None, read=None, config: dict | None = None
    ) -> None:
        self.compiled = compiled
        self.device = device
        #: what compiled it: the core, a reader of the IR (the model itself is not kept), the properties (the split
        #: mechanism compiles the model again with streams); None: not kept
        self.core, self.read, self.config = core, read, dict(config or {})
        self._split: dict[int, tuple] = {}  # worker count -> (compiled model, infer requests)
        self.request = compiled.create_infer_request()
        self.precision_executed, self.precision_source, self.precision_detail = runtime_precision(compiled)
        if self.precision_detail is not None:
            try:
                hint = compiled.get_property("INFERENCE_PRECISION_HINT")
                self.precision_detail["inference_precision_hint"] = str(getattr(hint, "type_name", hint))
            except Exception:
                pass
        self.timing_scope = "model"

    def cpu_threads(self) -> tuple[int | None, str]:
        if self.device != "cpu":
            return None, f"{GPU_CELL_REASON} (an OpenVINO {OV_DEVICE.get(self.device, self.device)} cell)"
        try:
            n = int(self.compiled.get_property("INFERENCE_NUM_THREADS"))
        except Exception as e:
            return None, f"OpenVINO did not report INFERENCE_NUM_THREADS ({type(e).__name__}: {e})"
        streams = self.compiled.get_property("NUM_STREAMS")
        return (
            n,
            f'compiled.get_property("INFERENCE_NUM_THREADS") of the compiled model ({streams} stream(s))',
        )

    def prepare(self, x: np.ndarray):
        return np.ascontiguousarray(x, dtype=np.float32)

    def run(self, prepared):
        return self.request.infer(prepared, share_inputs=True, share_outputs=False)

    def outputs(self, result) -> list[np.ndarray]:
        # a request of another compiled model (the split mechanism's) gives its outputs in order
        if isinstance(result, tuple):
            return [np.asarray(r, dtype=np.float32) for r in result]
        return [np.asarray(result[o], dtype=np.float32) for o in self.compiled.outputs]

    def streams(self, n: int) -> Streams:
        requests = [self.request] + [self.compiled.create_infer_request() for _ in range(n - 1)]

        def on(request):
            return lambda prepared: request.infer(prepared, share_inputs=True, share_outputs=False)

        try:
            streams = int(self.compiled.get_property("NUM_STREAMS"))
        except Exception:
            streams = None
        return Streams(
            [on(r) for r in requests],
            f"{n} infer requests of one compiled model, one per thread (infer releases the GIL); the compiled "
            f"model has {streams if streams is not None else 'an unreported number of'} execution stream(s)",
        )

    def _batch_dynamic(self) -> bool:
        try:
            return self.compiled.inputs[0].get_partial_shape()[0].is_dynamic
        except Exception:
            return False

    def batched_reason(self) -> str:
        try:
            shape = self.compiled.inputs[0].get_partial_shape()
        except Exception:
            shape = "not reported"
        return (
            f"the compiled model's input has a static batch ({shape}): a dynamic-batch IR would take N frames"
        )

    def batched(self, n: int) -> Streams | None:
        if not self._batch_dynamic():
            return None
        return Streams([self.run], f"one infer request on a batch of {n} frames (dynamic batch)")

    def mechanisms(self, threads: int | None = None) -> list[Mechanism]:
        """Besides the base's: OpenVINO's throughput mode, the model compiled again with one execution stream per
        worker (NUM_STREAMS) sharing the thread budget (INFERENCE_NUM_THREADS), one infer request per worker."""
        out = super().mechanisms(threads)
        words = "OpenVINO execution streams of one compiled model (throughput mode), the thread budget split"
        if self.device != "cpu" or self.core is None or self.read is None or threads is None:
            why = "OpenVINO's CPU streams split the thread budget: a CPU model compiled by this runner only"
            return [*out, Mechanism(SPLIT, words, None, None, why)]
        return [
            *out,
            Mechanism(
                SPLIT, words, lambda n: self._streams_of(n, threads), lambda n: _split_plan(n, threads)
            ),
        ]

    def _streams_of(self, n: int, threads: int) -> Streams:
        k, _ = split(n, threads)
        if k not in self._split:
            config = {
                **self.config,
                "PERFORMANCE_HINT": "THROUGHPUT",
                "NUM_STREAMS": k,
                "INFERENCE_NUM_THREADS": threads,
            }
            compiled = self.core.compile_model(self.read(), OV_DEVICE[self.device], config)
            self._split[k] = (compiled, [compiled.create_infer_request() for _ in range(k)])
        compiled, requests = self._split[k]
        got = _property(compiled, "NUM_STREAMS"), _property(compiled, "INFERENCE_NUM_THREADS")

        def on(request):
            return lambda p: request.infer(p, share_inputs=True, share_outputs=False).to_tuple()

        return Streams(
            [on(r) for r in requests],
            f"one model compiled with NUM_STREAMS={got[0]} and INFERENCE_NUM_THREADS={got[1]} (as the compiled "
            f"model reports them; asked {k} and {threads}), {k} infer requests, one per worker thread; the {n} "
            "cameras' frames go to whichever is free",
            plan=_split_plan(n, threads),
        )


def _property(compiled, name: str):
    try:
        return compiled.get_property(name)
    except Exception:
        return "not reported"


def _split_plan(n: int, threads: int) -> Plan:
    return split_plan(n, threads, lambda k, t: f"OpenVINO {k} streams x {t} thread{'s' if t != 1 else ''}")


def compile_config(cell, threads: int | None = None, precision_hint: str | None = None) -> dict:
    """compile_model properties for `cell`: the precision asked for and, on the CPU, the run's thread budget."""
    from harness.threads import budget

    # Ask for the requested precision explicitly: on CPUs with bf16/AMX OpenVINO otherwise silently runs bf16.
    config: dict = {
        "INFERENCE_PRECISION_HINT": precision_hint or ("f16" if cell.precision == "fp16" else "f32")
    }
    if cell.device == "cpu":
        config["INFERENCE_NUM_THREADS"] = threads or budget()
        config["PERFORMANCE_HINT"] = "LATENCY"
    return config


def ir_files(ir_dir: Path) -> dict:
    """The names of the IR's model and weights files, recorded with the export: the loader opens these."""
    return {"ir_xml": only_file(ir_dir, "*.xml"), "ir_bin": only_file(ir_dir, "*.bin")}


@register
class OpenVino(Backend):
    name = "openvino"
    display_order = 60
    registry_order = 30
    devices = ("cpu", "gpu")
    precisions = {"cpu": ("fp32", "fp16", "int8"), "gpu": ("fp32", "fp16")}
    supports_dynamic = True
    library = "openvino"

    def unsupported(self, cell) -> str | None:
        reason = super().unsupported(cell)
        if reason is None and cell.precision == "int8" and importlib.util.find_spec("nncf") is None:
            return "OpenVINO int8 is NNCF post-training quantisation, and nncf is not installed (pip install nncf)"
        return reason

    def probe(self, device: str) -> str | None:
        reason = not_installed("openvino")
        if reason:
            return reason
        import openvino as ov

        available = ov.Core().available_devices
        if not any(d.split(".")[0] == OV_DEVICE[device] for d in available):
            return (
                f"OpenVINO sees no {OV_DEVICE[device]} device (available: {', '.join(available) or 'none'})"
            )
        return None

    def export(self, req: ExportRequest) -> ExportResult:
        # The artifact is the IR directory (model .xml plus the .bin weights), so its size counts both.
        if req.precision != "int8":
            path = export_with_ultralytics(req, "openvino")
            return ExportResult(str(path), ir_files(Path(path)))
        # int8: ultralytics' own int8 export (NNCF post-training quantisation of the IR, its ignored scope for the
        # head's post-processing), calibrated on the calibration split through its LetterBox at the export shape
        from harness.backends._shared.calibration import calibration_for, used_images

        cal = calibration_for(req)
        if req.task == "cls":  # its int8 calibration reads through ultralytics' classify dataset: torchvision
            from harness.yolo.torchvision_compat import load_torchvision

            load_torchvision()
        with tempfile.TemporaryDirectory(prefix="ov-calibration-") as tmp, no_font_download():
            data = cal.ultralytics_yaml(Path(tmp), req.task)
            path = export_with_ultralytics(req, "openvino", data=str(data))
        info = {
            "calibration": cal.info(used_images(cal, req.batch)),
            "quantization": "int8 NNCF post-training (ultralytics int8=True)",
            **ir_files(Path(path)),
        }
        return ExportResult(str(path), info)

    def load(self, artifact: Path, cell, export_info: dict) -> Runner:
        import openvino as ov

        core = ov.Core()
        if Path(
            artifact
        ).is_dir():  # the IR directory: the .xml and .bin the export recorded, nothing else in it
            xml = recorded_file(Path(artifact), export_info, "ir_xml")
            weights = recorded_file(Path(artifact), export_info, "ir_bin")

            def read():
                return core.read_model(str(xml), str(weights))
        else:

            def read():
                return core.read_model(str(artifact))

        config = compile_config(cell)
        compiled = core.compile_model(read(), OV_DEVICE[cell.device], config)
        return OpenVinoRunner(compiled, cell.device, core=core, read=read, config=config)
