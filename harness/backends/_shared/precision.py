"""The precision a runtime executes, from what the runtime itself reports: element-type counts and one verdict.

Every backend counts element types where its runtime exposes them (OpenVINO's per-layer runtime precisions, the
ONNX graph ONNX Runtime executes, torch parameter dtypes, the dtypes of the ExecuTorch graph as lowered, TensorRT's
engine inspector) and turns the counts into one record value with `verdict`:

- Only floating-point and 8-bit integer types decide: the other integer types (i32/i64 shape and index arithmetic,
  top-k indices, booleans) do not say at which precision the network's arithmetic runs; they stay in the detail.
- The verdict is the type that holds at least `DOMINANT` (90%) of the deciding counts, named as records name
  precisions (fp32, fp16, bf16, int8). Below that the verdict is "mixed", and the detail says what the mix is.
  90% rather than a plain majority: a graph whose convolutions run bf16 while a handful of reductions, top-k and
  softmax layers stay fp32 is a bf16 graph, but one where a fifth of the compute runs another type is not one
  precision, and calling it one would hide that.
- No deciding count at all: None (the caller says why in `precision_source`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

#: share of the deciding counts one type needs to be the verdict; below it the verdict is "mixed"
DOMINANT = 0.9

# element-type spellings of the runtimes (OpenVINO, ONNX, torch, TensorRT) -> record precision names
PRECISION_NAMES = {
    # OpenVINO
    "f32": "fp32",
    "f16": "fp16",
    "bf16": "bf16",
    "i8": "int8",
    "u8": "int8",
    # ONNX TensorProto.DataType names
    "FLOAT": "fp32",
    "FLOAT16": "fp16",
    "BFLOAT16": "bf16",
    "INT8": "int8",
    "UINT8": "int8",
    # torch dtypes
    "torch.float32": "fp32",
    "torch.float16": "fp16",
    "torch.bfloat16": "bf16",
    "torch.int8": "int8",
    "torch.uint8": "int8",
    "torch.qint8": "int8",
    "torch.quint8": "int8",
    # TensorRT layer information ("Format/Datatype" tokens, harness.backends.tensorrt.TRT_TYPE_TOKENS)
    "FP32": "fp32",
    "FP16": "fp16",
    "BF16": "bf16",
    "FP8": "fp8",
    "FP4": "fp4",
    "INT4": "int4",
}


def verdict(counts: dict[str, int]) -> str | None:
    """The precision holding >= DOMINANT of the floating-point and 8-bit counts, "mixed" below it, None if none."""
    deciding: Counter = Counter()
    for name, n in counts.items():
        p = PRECISION_NAMES.get(name)
        if p is not None and n > 0:
            deciding[p] += n
    total = sum(deciding.values())
    if total == 0:
        return None
    top, n = deciding.most_common(1)[0]
    return top if n >= DOMINANT * total else "mixed"


def torch_dtype_counts(tensors: Iterable) -> dict[str, int]:
    """Counts of `str(t.dtype)` over tensors (parameters, buffers, graph values)."""
    return dict(Counter(str(t.dtype) for t in tensors if getattr(t, "dtype", None) is not None))


def graph_value_dtypes(graph_module) -> dict[str, int]:
    """Dtype counts of the tensors the operators of an FX graph produce (`node.meta["val"]` of call_function nodes).

    Delegate calls and the getitems that unpack their results are left out (the delegate's own graph counts its
    tensors, see `executorch_export.lowered_dtypes`).
    """
    import operator

    c: Counter = Counter()
    for node in graph_module.graph.nodes:
        if node.op != "call_function" or node.target is operator.getitem:
            continue
        if "executorch_call_delegate" in str(node.target):
            continue
        val = node.meta.get("val")
        for t in val if isinstance(val, (list, tuple)) else (val,):
            dtype = getattr(t, "dtype", None)
            if dtype is not None:
                c[str(dtype)] += 1
    return dict(c)


def merge_counts(*counts: dict[str, int]) -> dict[str, int]:
    total: Counter = Counter()
    for c in counts:
        total.update(c)
    return dict(total)
