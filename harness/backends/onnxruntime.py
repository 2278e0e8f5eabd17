"""ONNX Runtime: ultralytics' ONNX export, run with the CPU (or CUDA) execution provider.

Threads: every session gets the run's budget as its intra-op pool (`intra_op_num_threads`), one inter-op thread
and sequential execution (a YOLO graph is a chain: parallel branches would only oversubscribe the budget).
Precision: ONNX Runtime does not report the precision its kernels run, so the record reads the element types of
the graph the session runs (`graph_precision`).
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

import numpy as np

from harness.backends import register
from harness.backends._shared.ort_cuda import preload_cuda_libraries, provider_missing, require_provider
from harness.backends._shared.precision import verdict
from harness.backends._shared.ultralytics_export import export_with_ultralytics
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

log = logging.getLogger(__name__)

PROVIDER = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider"}
# operators that carry quantized (8-bit integer) arithmetic: their presence makes the graph an int8 graph
QUANT_OPS = (
    "QuantizeLinear",
    "DequantizeLinear",
    "DynamicQuantizeLinear",
    "QLinearConv",
    "QLinearMatMul",
    "ConvInteger",
    "MatMulInteger",
)
# ONNX Runtime's NodeArg.type spellings -> the ONNX element type names used in the counts
ORT_TYPE = {
    "tensor(float)": "FLOAT",
    "tensor(float16)": "FLOAT16",
    "tensor(bfloat16)": "BFLOAT16",
    "tensor(int8)": "INT8",
    "tensor(uint8)": "UINT8",
}
GRAPH_SOURCE = (
    "element types of the ONNX graph the session runs (input from the session; initializers, value infos and "
    "quantize/dequantize operators from the model file): ONNX Runtime does not report its kernels' precision"
)


def session_options(threads: int | None = None):
    """SessionOptions with the run's thread budget: intra-op pool = budget, one inter-op thread, sequential."""
    import onnxruntime as ort

    from harness.offline import quiet_onnxruntime
    from harness.threads import budget

    quiet_onnxruntime(ort)  # no telemetry events from the sessions these options create
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    so.intra_op_num_threads = threads or budget()
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return so


def session_threads(session) -> tuple[int | None, str]:
    """The intra-op threads of a session, from the options the session holds (not the Python object passed in)."""
    try:
        opts = session.get_session_options()
        n = int(opts.intra_op_num_threads)
    except Exception as e:
        return None, f"ONNX Runtime did not return the session's options ({type(e).__name__}: {e})"
    if n < 1:
        return (
            None,
            "the session's intra_op_num_threads is 0 (ONNX Runtime's own default, which it does not report)",
        )
    return n, (
        "intra_op_num_threads of the options the InferenceSession holds (get_session_options(), the C++ "
        f"session's copy it built its pool from; inter-op {opts.inter_op_num_threads}, {opts.execution_mode.name}); "
        "ONNX Runtime does not report its pool's live thread count"
    )


def onnx_export_info(path: Path) -> dict:
    """What the export info records of an ONNX file: its opset and its operator types (sorted)."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    ops = sorted({n.op_type for n in model.graph.node})
    return {"onnx_opset": model.opset_import[0].version, "onnx_op_types": ops}


def graph_counts(artifact: Path, input_type: str | None = None) -> dict:
    """Element-type counts of an ONNX model: initializers, constants, value infos; quantization operators."""
    import onnx

    model = onnx.load(str(artifact), load_external_data=False)
    name = onnx.TensorProto.DataType.Name
    g = model.graph
    tensors = Counter(name(t.data_type) for t in g.initializer)
    for node in g.node:
        if node.op_type == "Constant":
            tensors.update(name(a.t.data_type) for a in node.attribute if a.name == "value")
    values = Counter(
        name(v.type.tensor_type.elem_type)
        for v in (*g.input, *g.value_info, *g.output)
        if v.type.HasField("tensor_type") and v.name not in {t.name for t in g.initializer}
    )
    quant = Counter(n.op_type for n in g.node if n.op_type in QUANT_OPS)
    return {
        "input": ORT_TYPE.get(input_type, input_type) if input_type else None,
        "initializers": dict(tensors),
        "value_infos": dict(values),
        "quantize_ops": dict(quant),
    }


def graph_precision(artifact: Path, session=None) -> tuple[str | None, str, dict | None]:
    """(precision_executed, precision_source, precision_detail) from the graph's element types.

    Quantization operators make it int8; otherwise the verdict (harness.backends._shared.precision) over the
    floating-point types of the weights and of the values between operators.
    """
    input_type = session.get_inputs()[0].type if session is not None else None
    try:
        detail = graph_counts(artifact, input_type)
    except Exception as e:
        return None, f"the ONNX graph could not be read for its element types ({type(e).__name__}: {e})", None
    if detail["quantize_ops"]:
        return "int8", GRAPH_SOURCE, detail
    counts = Counter(detail["initializers"])
    counts.update(detail["value_infos"])
    executed = verdict(dict(counts))
    if executed is None:
        return None, "the ONNX graph declares no floating-point or 8-bit element types", detail
    return executed, GRAPH_SOURCE, detail


class OrtRunner(Runner):
    """An InferenceSession fed host arrays; on the CPU provider there is no copy to exclude."""

    def __init__(self, session, artifact: Path | None = None) -> None:
        self.session = session
        self.artifact = artifact
        #: sessions per worker of the split mechanism, by worker count (made once, on first use)
        self._split: dict[int, list] = {}
        inp = session.get_inputs()[0]
        self.input_name = inp.name
        self.timing_scope = (
            "model" if session.get_providers()[0] == "CPUExecutionProvider" else "model+h2d+d2h"
        )
        self._dtype = np.float16 if "float16" in inp.type else np.float32
        if artifact is not None:
            self.precision_executed, self.precision_source, self.precision_detail = graph_precision(
                artifact, session
            )

    def cpu_threads(self) -> tuple[int | None, str]:
        return session_threads(self.session)

    def prepare(self, x: np.ndarray):
        return {self.input_name: np.ascontiguousarray(x, dtype=self._dtype)}

    def run(self, prepared):
        return self.session.run(None, prepared)

    def outputs(self, result) -> list[np.ndarray]:
        return [np.asarray(r, dtype=np.float32) for r in result]

    def streams(self, n: int) -> Streams:
        # InferenceSession.run is thread-safe: concurrent calls on one session each get their own run state
        return Streams(
            [self.run] * n,
            f"one InferenceSession called from {n} threads at once (InferenceSession.run is thread-safe; each "
            "call uses the session's intra-op thread pool)",
        )

    def _batch_dynamic(self) -> bool:
        dim = self.session.get_inputs()[0].shape[0]
        return not isinstance(dim, int)

    def batched_reason(self) -> str:
        shape = self.session.get_inputs()[0].shape
        return (
            f"the ONNX graph's input has a static batch ({shape}): a dynamic-batch export would take N frames"
        )

    def batched(self, n: int) -> Streams | None:
        if not self._batch_dynamic():
            return None
        return Streams([self.run], f"one InferenceSession call on a batch of {n} frames (dynamic batch)")

    def mechanisms(self, threads: int | None = None) -> list[Mechanism]:
        """Besides the base's: the thread budget split between InferenceSessions, one per worker (ONNX Runtime's
        way of serving several streams at once: each session its own intra-op pool of budget/k threads)."""
        out = super().mechanisms(threads)
        words = "one InferenceSession per worker, the thread budget split between them"
        if self.timing_scope != "model" or self.artifact is None or threads is None:
            why = "a session per worker splits the CPU thread budget: a CPU session loaded from its file only"
            return [*out, Mechanism(SPLIT, words, None, None, why)]
        return [
            *out,
            Mechanism(SPLIT, words, lambda n: self._sessions(n, threads), lambda n: _split_plan(n, threads)),
        ]

    def _sessions(self, n: int, threads: int) -> Streams:
        import onnxruntime as ort

        k, t = split(n, threads)
        if k not in self._split:
            self._split[k] = [
                ort.InferenceSession(
                    str(self.artifact),
                    sess_options=session_options(t),
                    providers=self.session.get_providers(),
                )
                for _ in range(k)
            ]
        calls = [lambda p, s=s: s.run(None, p) for s in self._split[k]]
        return Streams(
            calls,
            f"{k} InferenceSessions with intra_op_num_threads={t} each, one per worker thread; the {n} cameras' "
            "frames go to whichever is free",
            plan=_split_plan(n, threads),
        )


def _split_plan(n: int, threads: int) -> Plan:
    return split_plan(n, threads, lambda k, t: f"{k} InferenceSessions x {t} thread{'s' if t != 1 else ''}")


@register
class OnnxRuntime(Backend):
    name = "onnxruntime"
    display_order = 50
    registry_order = 20
    devices = ("cpu", "cuda")
    precisions = {"cpu": ("fp32", "int8"), "cuda": ("fp32", "fp16")}
    supports_dynamic = True
    library = "onnxruntime"

    def probe(self, device: str) -> str | None:
        reason = provider_missing(PROVIDER[device])
        if reason:
            return reason
        if device == "cuda":
            from harness.backends._shared.nvml_access import cuda_device_count

            if cuda_device_count() == 0:
                return "no NVIDIA GPU visible"
        return None

    def export(self, req: ExportRequest) -> ExportResult:
        if req.precision == "int8":
            from harness.backends._shared.ort_quantize import quantize_static_qdq

            fp32 = export_with_ultralytics(req, "onnx", simplify=True, int8=False, half=False)
            path, extra = quantize_static_qdq(fp32, req)
        else:
            path, extra = export_with_ultralytics(req, "onnx", simplify=True), {}
        return ExportResult(str(path), {**onnx_export_info(path), **extra})

    def load(self, artifact: Path, cell, export_info: dict) -> Runner:
        import onnxruntime as ort

        provider: str | tuple = PROVIDER[cell.device]
        if cell.device == "cuda":
            # TF32 off for fp32 cells, as for the torch backends: fp32 means IEEE fp32 convolutions and matmuls
            # (the CUDA EP's use_tf32 defaults to on).
            provider = (PROVIDER["cuda"], {"device_id": 0, "use_tf32": int(cell.precision != "fp32")})
            preload_cuda_libraries(ort)
        session = ort.InferenceSession(str(artifact), sess_options=session_options(), providers=[provider])
        if cell.device == "cuda":
            from harness.backends._shared.ort_iobinding import OrtIOBindingRunner

            require_provider(session, PROVIDER["cuda"])  # no silent CPU fallback recorded as CUDA

            executed, source, detail = graph_precision(artifact, session)
            if detail is not None:
                opts = session.get_provider_options().get(PROVIDER["cuda"], {})
                detail["tf32_cuda_ep"] = opts.get("use_tf32") in ("1", 1, "true", "True")
            return OrtIOBindingRunner(session, (executed, source, detail), device_id=0)
        return OrtRunner(session, artifact)
