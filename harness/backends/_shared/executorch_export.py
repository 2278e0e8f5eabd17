"""Shared ExecuTorch export path: torch.export of the prepared model, lowering with a partitioner, .pte out."""

from __future__ import annotations

import logging
from pathlib import Path

from harness.backends._shared.probes import import_error
from harness.backends.base import ExportRequest, ExportResult

log = logging.getLogger(__name__)


def partitioner_missing(module: str, cls: str, label: str) -> str | None:
    """Why `from module import cls` (a delegate's partitioner) fails with the installed executorch, or None."""
    e = import_error(module, cls)
    return None if e is None else f"the installed executorch has no {label} partitioner ({e})"


def exported_program(req: ExportRequest, fmt: str = "executorch"):
    """torch.export the network as ultralytics prepares it for ExecuTorch, with dynamic H/W when asked."""
    import torch
    from ultralytics.utils.export.executorch import executorch_wrapper

    from harness.yolo.models import prepared_model

    model = executorch_wrapper(
        prepared_model(req.checkpoint, req.head, (req.height, req.width), dynamic=req.dynamic, fmt=fmt)
    )
    im = torch.zeros(req.batch, 3, req.height, req.width)
    dynamic_shapes = None
    if req.dynamic:
        from harness.yolo.dynamic import dynamic_shapes_spec

        dynamic_shapes = dynamic_shapes_spec(req.options)
    return torch.export.export(model, (im,), dynamic_shapes=dynamic_shapes, strict=False)


def delegation_ops(graph_module) -> dict:
    """Delegated / non-delegated operator counts and the non-delegated operator names."""
    from executorch.devtools.backend_debug import get_delegation_info

    info = get_delegation_info(graph_module)
    fallback_ops = sorted(
        {
            name
            for name, c in info.delegation_by_operator.items()
            if c.non_delegated > 0 and not name.startswith(("getitem", "executorch_call_delegate"))
        }
    )
    return {
        "delegated": int(info.num_delegated_nodes),
        "fallback": int(info.num_non_delegated_nodes),
        "fallback_ops": fallback_ops,
        "delegated_subgraphs": int(info.num_delegated_subgraphs),
    }


def lowered_dtypes(graph_module) -> dict:
    """Dtype counts of the tensors a lowered program's operators produce: `portable` for the operators left to
    ExecuTorch's kernels, `delegated` for those inside the delegates' subgraphs (the program each delegate was
    given, `LoweredBackendModule.original_module`, where the delegate keeps it).

    Written into the export info; the runner reports it as the precision (`executorch_precision`): the .pte the
    runtime loads does not say which precision a delegate's kernels compute in.
    """
    from harness.backends._shared.precision import graph_value_dtypes, merge_counts

    delegated: list[dict] = []
    unreachable = 0
    for node in graph_module.graph.nodes:
        if node.op != "call_function" or "executorch_call_delegate" not in str(node.target):
            continue
        lowered = getattr(graph_module, str(node.args[0].target), None)
        original = getattr(lowered, "original_module", None)
        sub = getattr(original, "graph_module", None)
        if sub is None:
            unreachable += 1
        else:
            delegated.append(graph_value_dtypes(sub))
    return {
        "portable": graph_value_dtypes(graph_module),
        "delegated": merge_counts(*delegated),
        "delegated_subgraphs_unread": unreachable,
    }


def executorch_precision(export_info: dict) -> tuple[str | None, str, dict | None]:
    """(precision_executed, precision_source, precision_detail) from the export info's `dtypes` (lowered_dtypes)."""
    from harness.backends._shared.precision import merge_counts, verdict

    dtypes = export_info.get("dtypes")
    if not dtypes:
        return None, "the export info has no dtype counts (artifact exported before they were recorded)", None
    executed = verdict(merge_counts(dtypes.get("portable", {}), dtypes.get("delegated", {})))
    if executed is None:
        return None, "the lowered graph has no floating-point or 8-bit tensors", dtypes
    source = (
        "export-time dtypes of the lowered graph (tensors of the portable operators and of the delegates)"
    )
    if dtypes.get("delegated_subgraphs_unread"):
        source += f"; {dtypes['delegated_subgraphs_unread']} delegated subgraph(s) not readable, left out"
    return executed, source, dtypes


def non_edge_functions(graph_module) -> list[str]:
    """Plain Python functions called in the graph (e.g. torch.sym_min), which the Edge dialect rejects."""
    import types

    names = {
        n.target.__name__
        for n in graph_module.graph.nodes
        if n.op == "call_function"
        and isinstance(n.target, types.FunctionType)
        and n.target.__name__ != "alloc"
    }
    return sorted(names)


def export_executorch(req: ExportRequest, partitioners: list, suffix: str, program=None) -> ExportResult:
    """Lower with `partitioners`, write `<model>_<suffix>.pte` into req.out_dir, return delegation counts.

    `program` is the exported program to lower (a quantised one); default: `exported_program(req)`."""
    from executorch.exir import to_edge_transform_and_lower

    out = Path(req.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ep = program if program is not None else exported_program(req)
    try:
        edge = to_edge_transform_and_lower(ep, partitioner=partitioners)
    except AssertionError as e:
        # The Edge verifier asserts without naming the operator; name it so the failure explains itself.
        bad = non_edge_functions(ep.graph_module)
        if bad:
            raise RuntimeError(
                f"Unsupported operator: {', '.join('torch.' + b for b in bad)} (not an ExecuTorch Edge operator; "
                "a Python-level symbolic op that dynamic shapes left in the exported graph)"
            ) from e
        raise
    ops = delegation_ops(edge.exported_program().graph_module)
    dtypes = lowered_dtypes(edge.exported_program().graph_module)
    program = edge.to_executorch()
    pte = out / f"{req.family}{req.size}-{req.task}-{suffix}.pte"
    pte.write_bytes(program.buffer)
    log.info("wrote %s (%d delegated, %d fallback nodes)", pte, ops["delegated"], ops["fallback"])
    return ExportResult(str(pte), {"ops": ops, "dtypes": dtypes})
