"""The ExecuTorch CUDA export traced on a fake CUDA device (harness.backends._shared.fake_cuda), and what the
exported graph predicts against the backend's own limits.

The trace runs ExecuTorch's real pipeline: torch.export, `to_edge_transform_and_lower` with the `CudaPartitioner`,
the backend's passes (its Triton replacements, top-k among them), AOTInductor's lowering and its C++ wrapper code,
where ExecuTorch collects the extern kernels that are not on its list of fallback kernels. It stops where the
kernels would be autotuned on the device. The collected kernels are the backend's own verdict: on a GPU the same
export raises "missing fallback kernels" after compiling the kernels; here the trace raises it at the stop, with the
same wording, so the failure is classified as a GPU export's would be.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.backends._shared.executorch_cuda_options import compile_options
from harness.backends._shared.fake_cuda import (
    FAKE_OPTION,
    Trace,
    attach,
    graph_inventory,
    trace_export,
    write_trace,
)

#: ExecuTorch's Triton top-k handles rows up to this long when its pass does not say (executorch 1.4/1.5:
#: ReplaceEdgeOpWithTritonOpPass._TOPK_MAX_N)
TOPK_MAX_N_DEFAULT = 4096


def topk_limit() -> tuple[int, str]:
    """The longest top-k row ExecuTorch's Triton replacement takes, and where the figure comes from."""
    try:
        from executorch.backends.cuda.triton.replacement_pass import ReplaceEdgeOpWithTritonOpPass

        return int(ReplaceEdgeOpWithTritonOpPass._TOPK_MAX_N), "ReplaceEdgeOpWithTritonOpPass._TOPK_MAX_N"
    except (ImportError, AttributeError):
        return TOPK_MAX_N_DEFAULT, "executorch 1.5's documented limit (its pass is not importable here)"


def fallback_kernels() -> list[str]:
    """ExecuTorch CUDA's list of extern kernels it ships (CudaBackend.get_supported_fallback_kernels)."""
    from executorch.backends.cuda.cuda_backend import CudaBackend

    return sorted(CudaBackend.get_supported_fallback_kernels())


def predict(ep) -> dict:
    """What the exported graph predicts for ExecuTorch's CUDA backend, from its operators alone (a prediction, not a
    lowering): each top-k with its row length against the Triton top-k's limit, and whether the graph holds
    index_put. A top-k row over the limit keeps ATen's topk, which is not on the backend's fallback list."""
    limit, source = topk_limit()
    rows: list[dict[str, Any]] = []
    for n in ep.graph_module.graph.nodes:
        if n.op == "call_function" and "topk" in str(n.target):
            val = n.args[0].meta.get("val") if hasattr(n.args[0], "meta") else None
            dim = n.args[2] if len(n.args) > 2 else n.kwargs.get("dim", -1)
            length = int(val.shape[dim]) if val is not None else None
            rows.append({"op": str(n.target), "row": length, "k": n.args[1] if len(n.args) > 1 else None})
    over = [r for r in rows if r["row"] is not None and r["row"] > limit]
    inventory = graph_inventory(ep)
    index_put = sorted(k for k in inventory if "index_put" in k)
    fails = bool(over)
    if over:
        why = (
            f"top-k over rows of {', '.join(str(r['row']) for r in over)} > {limit}: ExecuTorch's Triton top-k does "
            "not take them, and ATen's topk is not among its fallback kernels: 'missing fallback kernels'"
        )
    elif rows:
        why = f"every top-k row is at most {limit}: ExecuTorch's Triton top-k replaces them"
    else:
        why = "no top-k in the graph"
    return {
        "label": "prediction from the exported graph's operators (not a lowering)",
        "topk": rows,
        "topk_limit": limit,
        "topk_limit_source": source,
        "index_put": index_put,
        "fails": fails,
        "why": why + (f"; the graph holds {', '.join(index_put)}" if index_put else ""),
    }


@contextlib.contextmanager
def collected_fallbacks(found: set[str]) -> Iterator[None]:
    """ExecuTorch's own collection of the extern kernels missing from its fallback list, gathered into `found`
    (AotiBackend.collect_unsupported_fallback_kernels gets a set per method and raises after the compile)."""
    from executorch.backends.aoti.aoti_backend import AotiBackend

    hook = "collect_unsupported_fallback_kernels"
    original = AotiBackend.__dict__[hook]
    func = original.__func__

    @contextlib.contextmanager
    def collecting(cls, missing: set):
        try:
            with func(cls, missing):
                yield
        finally:
            found.update(missing)

    setattr(AotiBackend, hook, classmethod(collecting))
    try:
        yield
    finally:
        setattr(AotiBackend, hook, original)


def missing_message(found: set[str]) -> str:
    """ExecuTorch's error for missing fallback kernels, in its own wording, with where the trace found them."""
    items = "\n  - ".join(sorted(found))
    return (
        f"Method forward missing fallback kernels ({len(found)} total):\n  - {items}\n"
        "Please add them to the AOTI backend.\n"
        "(collected by ExecuTorch's CUDA backend while AOTInductor generated the C++ wrapper, on a fake CUDA "
        "device; on a GPU the export raises this after compiling the kernels)"
    )


def trace_lowering(model, shape: tuple[int, ...], target: str, info: dict) -> Trace:
    """Trace ExecuTorch's CUDA export of `model` (any module; a YOLO26 one prepared and wrapped as for export) on an
    input of `shape` for the stated `target`, filling `info` (graph operators, the prediction, compile options).
    Returns the trace; raises the failure a GPU export would meet (ExecuTorch's "missing fallback kernels" among
    them), carrying the trace (`fake_cuda.attach`)."""
    from executorch.backends.cuda.cuda_backend import CudaBackend
    from executorch.backends.cuda.cuda_partitioner import CudaPartitioner
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

    found: set[str] = set()
    seen: dict = {}

    def lower(ep):
        info["prediction"] = predict(ep)
        specs = [CudaBackend.generate_method_name_compile_spec("forward")]
        # compiled in this process, where the stated Triton driver is installed
        with compile_options(CudaBackend, {"compile_threads": 1}, seen), collected_fallbacks(found):
            return to_edge_transform_and_lower(
                ep,
                partitioner=[CudaPartitioner(specs)],
                compile_config=EdgeCompileConfig(_check_ir_validity=False, _skip_dim_order=True),
            )

    stage = "partition, edge passes, AOTInductor lowering and C++ wrapper (CudaPartitioner)"
    trace = trace_export(target, model, shape, info, stage, lower)
    info["compile_options"] = seen
    if found:  # ExecuTorch's own verdict, which it raises after compiling the kernels on a GPU
        raise attach(RuntimeError(missing_message(found)), trace)
    return trace


def fake_export(req, model, out_dir: Path, info: dict) -> tuple[str, dict]:
    """The ExecuTorch CUDA export of the prepared `model` (already wrapped, remedy applied) traced for req's
    target (`trace_lowering`); returns (the trace file, the export info)."""
    trace = trace_lowering(model, (req.batch, 3, req.height, req.width), req.options[FAKE_OPTION], info)
    info["fallback_kernels_listed"] = fallback_kernels()
    return write_trace(out_dir, info, trace), info
