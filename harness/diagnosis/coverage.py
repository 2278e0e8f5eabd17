"""Operator coverage: which of a model's operators a runtime places on the requested device, and which fall back.

Both functions return the same shape as ExecuTorch's delegation counts (`info["ops"]` of an ExecuTorch export):
{delegated, fallback, fallback_ops, ...}, so the report can show one "ops" column for every backend.
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

log = logging.getLogger(__name__)

# OpenVINO graph nodes that are not operators a device executes.
_OV_NOT_OPS = frozenset({"Parameter", "Result", "Constant"})
# ONNX Runtime records node placement only when asked through this session config key (onnxruntime >= 1.23).
ORT_RECORD_ASSIGNMENT = "session.record_ep_graph_assignment_info"


def openvino_coverage(xml_path: str | Path, device: str = "CPU") -> dict:
    """Operators of an OpenVINO IR that `device` supports, from `Core().query_model`.

    query_model maps each supported node's friendly name to the device; nodes it leaves out have no
    implementation there (compile_model would fail or, under HETERO, run them elsewhere). Parameters, Results and
    Constants are not counted. Raises what OpenVINO raises when the device's plugin cannot load (no GPU driver).
    """
    import openvino as ov

    xml_path = Path(xml_path)
    if xml_path.is_dir():
        xml_path = next(xml_path.glob("*.xml"))
    core = ov.Core()
    model = core.read_model(str(xml_path))
    supported = core.query_model(model, device)
    ops = [op for op in model.get_ordered_ops() if op.get_type_name() not in _OV_NOT_OPS]
    missing = [op for op in ops if op.get_friendly_name() not in supported]
    return {
        "device": device,
        "delegated": len(ops) - len(missing),
        "fallback": len(missing),
        "fallback_ops": sorted({op.get_type_name() for op in missing}),
        "op_types": dict(Counter(op.get_type_name() for op in ops)),
        "method": "openvino.Core.query_model",
    }


def onnxruntime_coverage(
    onnx_path: str | Path, providers: list[str] | tuple[str, ...], optimize: bool = True
) -> dict:
    """Node placement per execution provider for an ONNX model, as ONNX Runtime assigns it.

    The first provider is the one asked for; nodes placed on any other provider (normally the CPU provider ORT
    falls back to) count as fallback. Placement is read from the session after graph partitioning with
    `session.record_ep_graph_assignment_info` and `InferenceSession.get_provider_graph_assignment_info()`, so it
    counts the nodes after ORT's graph optimizations (`optimize=False` counts the nodes of the file as written).
    Providers this onnxruntime build lacks are listed in `unavailable` (ORT drops them with a warning).
    """
    import onnxruntime as ort

    providers = list(providers)
    if not providers:
        raise ValueError("onnxruntime_coverage needs at least one execution provider")
    available = set(ort.get_available_providers())
    unavailable = [p for p in providers if p not in available]
    usable = [p for p in providers if p in available] or ["CPUExecutionProvider"]
    so = ort.SessionOptions()
    so.add_session_config_entry(ORT_RECORD_ASSIGNMENT, "1")
    so.log_severity_level = 3
    so.graph_optimization_level = (
        ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    )
    session = ort.InferenceSession(str(onnx_path), sess_options=so, providers=usable)
    by_provider: dict[str, Counter] = {}
    for subgraph in session.get_provider_graph_assignment_info():
        counts = by_provider.setdefault(subgraph.ep_name, Counter())
        counts.update(_ort_op_name(n) for n in subgraph.get_nodes())
    requested = providers[0]
    delegated = sum(by_provider.get(requested, Counter()).values())
    other = Counter()
    for ep, counts in by_provider.items():
        if ep != requested:
            other.update(counts)
    return {
        "providers": session.get_providers(),
        "requested": requested,
        "unavailable": unavailable,
        "delegated": delegated,
        "fallback": sum(other.values()),
        "fallback_ops": sorted(other),
        "by_provider": {ep: {"nodes": sum(c.values()), "op_types": dict(c)} for ep, c in by_provider.items()},
        "method": "onnxruntime InferenceSession.get_provider_graph_assignment_info",
    }


def _ort_op_name(node) -> str:
    return f"{node.domain}.{node.op_type}" if node.domain and node.domain != "ai.onnx" else node.op_type
