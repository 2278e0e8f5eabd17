"""The operator view of a cell: which operators ran in the delegate / accelerator / optimized kernel and which fell
back, with each operator's share of the inference time where the runtime's profiler gives it.

Silent fallback is what users of every runtime complain about most (onnxruntime#29669, #17434): a model "runs on
the GPU" while a few nodes run on the CPU provider, or a delegate leaves operators to slow portable kernels. Each
runtime that can tell is asked through its own profiler, on a second, profiling instance of the cell's artifact,
never on the runner being timed:

- ONNX Runtime: a session with `enable_profiling`, the same providers and options; node events of the profile
  JSON carry the op type, the provider the node was placed on, and its kernel time (`parse_ort_profile`).
- OpenVINO: the compiled model's execution graph (`get_runtime_model()`: each node's plugin layer type and kernel
  implementation) and, from a second compile with PERF_COUNT, each node's time (`openvino_section`).
- ExecuTorch: the program run with ETDump; its events time every delegated operator the delegate reports and every
  kernel left outside the delegate (`executorch_section`). Export-only targets get the export's delegation counts.

`operator_view` returns the record section; runtimes that cannot tell raise `OperatorsUnavailable(reason)`.
Section: {source, ops: [{op, where, fallback, count, time_share}], fallback_ops, fallback_time_share, total_ops},
ops sorted fallbacks first, then by time share descending. Counts are nodes of the graph the runtime executes
(`fallback_ops`, `total_ops` too; None per operator in the export-only ExecuTorch view, which has totals only); time
shares are fractions of the profiled time named in `source`, None where nothing was timed.
"""

from __future__ import annotations

import json
import logging
import re
import tempfile
import warnings
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)

#: profiled inferences after the warm-up ones (the first inference pays for allocation and lazy initialization)
PROFILED_RUNS = 3
WARMUP_RUNS = 1

# Backends whose runtime has no delegate or partition to fall back from, or does not report it, and why.
UNAVAILABLE = {
    "torch-eager": (
        "PyTorch eager runs every operator as an ATen kernel on the cell's device: there is no delegate or "
        "accelerator partition to fall back from"
    ),
    "torch-compile": (
        "torch.compile (Inductor) fuses the graph into generated kernels and calls ATen for the operators it has "
        "no lowering for, but the compiled module does not report which operators those were at run time"
    ),
    "aoti": (
        "AOTInductor compiles the graph ahead of time into one shared library; which operators became ATen "
        "fallback calls is a compile-time detail the loaded package does not report"
    ),
    "tensorrt": (
        "TensorRT builds one engine from the whole network or fails to build: no operator runs outside the "
        "engine (per-layer tactics and times would need the engine inspector on a GPU; not read here)"
    ),
}
# The delegate id an ExecuTorch backend lowers to (ETDump events do not name it without an ETRecord).
DELEGATE_ID = {
    "executorch-xnnpack": "XnnpackBackend",
    "executorch-vulkan": "VulkanBackend",
    "executorch-coreml": "CoreMLBackend",
    "executorch-mps": "MPSBackend",
    "executorch-qnn": "QnnBackend",
    "executorch-cuda": "CudaBackend",
    "executorch-arm": "EthosUBackend",
}
#: where ExecuTorch runs the operators its delegate did not take
ET_KERNELS = "ExecuTorch CPU kernels"
# OpenVINO execution-graph layers that carry data in or out or hold constants: never executed as kernels.
OV_NOT_EXECUTED = frozenset({"Input", "Output", "Const"})
# The CPU plugin's node for operators it has no implementation of: OpenVINO core's reference `evaluate` runs them.
OV_FALLBACK_LAYER = "Reference"


class OperatorsUnavailable(Exception):
    """The runtime of a backend cannot tell which operators fell back; `reason` says why, for null_reasons."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# ---------------------------------------------------------------------------------------------------------------
# the section, whatever the runtime


def section(rows: Iterable[dict], source: str, total_time: float | None = None) -> dict:
    """The record section from aggregated rows {op, where, fallback, count, time}.

    `time` is each row's profiled time (any unit, the same for all rows, None when not timed); `total_time` the
    time the shares are fractions of (the sum of the rows' times when None). Sorted fallbacks first, then by time
    share descending, then by count.
    """
    rows = list(rows)
    timed = any(r.get("time") is not None for r in rows)
    total = total_time if total_time is not None else sum(r.get("time") or 0.0 for r in rows)
    ops = [
        {
            "op": str(r["op"]),
            "where": str(r["where"]),
            "fallback": bool(r["fallback"]),
            "count": r["count"],
            "time_share": _share(r.get("time"), total) if timed else None,
        }
        for r in rows
    ]
    ops.sort(key=_order)
    fallback_time = sum(r.get("time") or 0.0 for r in rows if r["fallback"])
    return {
        "source": source,
        "ops": ops,
        "fallback_ops": sum(o["count"] or 0 for o in ops if o["fallback"]),
        "fallback_time_share": _share(fallback_time, total) if timed else None,
        "total_ops": sum(o["count"] or 0 for o in ops),
    }


def _share(time: float | None, total: float) -> float | None:
    if time is None or not total:
        return None
    return round(time / total, 6)


def _order(op: dict) -> tuple:
    share = op["time_share"]
    return (not op["fallback"], -(share if share is not None else -1.0), -(op["count"] or 0), op["op"])


def _aggregate(nodes: Iterable[tuple[str, str, bool, str, float | None]]) -> list[dict]:
    """Rows from (op, where, fallback, node id, time) per node: one row per (op, where, fallback), counting nodes."""
    rows: dict[tuple, dict] = {}
    for op, where, fallback, node, time in nodes:
        row = rows.setdefault(
            (op, where, fallback), {"op": op, "where": where, "fallback": fallback, "ids": set()}
        )
        row["ids"].add(node)
        if time is not None:
            row["time"] = row.get("time", 0.0) + time
    return [
        {
            "op": r["op"],
            "where": r["where"],
            "fallback": r["fallback"],
            "count": len(r["ids"]),
            "time": r.get("time"),
        }
        for r in rows.values()
    ]


# ---------------------------------------------------------------------------------------------------------------
# entry point


def operator_view(backend: str, runner, artifact: Path | None, export_info: dict, cell) -> dict:
    """The operator view of one cell (the record section described in the module docstring).

    `runner` is the loaded runner (None for an export-only target), `artifact` the exported file or directory,
    `export_info` what the export returned, `cell` the harness Cell. Raises OperatorsUnavailable when the
    backend's runtime cannot tell; other exceptions are the runtime's own failures.
    """
    if backend in ("onnxruntime", "onnxruntime-trt"):
        return onnxruntime_view(runner, artifact, cell)
    if backend == "openvino":
        return openvino_view(runner, artifact, cell)
    if backend.startswith("executorch-"):
        return executorch_view(backend, runner, artifact, export_info, cell)
    raise OperatorsUnavailable(unavailable_reason(backend))


def unavailable_reason(backend: str) -> str:
    """Why `backend` has no operator view (its base backend's reason for the -cudagraph and autotune variants)."""
    for name, reason in UNAVAILABLE.items():
        if backend == name or backend.startswith(name + "-"):
            return reason
    return f"{backend}: its runtime reports no per-operator placement or fallback that the harness reads"


def _input_array(cell):
    """The cell's real input (letterboxed images) at its shape; 640x640 for a dynamic-shape cell."""
    import numpy as np

    from harness.yolo.inputs import letterboxed

    h, w = cell.shape.height or 640, cell.shape.width or 640
    return np.array(letterboxed(h, w, cell.batch), dtype=np.float32)  # a writable copy


# ---------------------------------------------------------------------------------------------------------------
# ONNX Runtime


def onnxruntime_view(runner, artifact: Path | None, cell, runs: int = PROFILED_RUNS) -> dict:
    """Profile a second InferenceSession of `artifact` (same providers and provider options as the runner's, the
    harness's session options, so the thread budget) and parse the profile (`parse_ort_profile`).

    On the CUDA and TensorRT providers this path is untested here (no GPU): the profiling session builds its own
    TensorRT engine again, which can take minutes.
    """
    session = getattr(runner, "session", None)
    if session is None or artifact is None:
        raise OperatorsUnavailable(
            "no loaded ONNX Runtime session and ONNX file to profile (export-only cell?)"
        )
    providers = session.get_providers()
    events = _ort_profile(Path(artifact), session, _input_array(cell), WARMUP_RUNS + runs)
    return parse_ort_profile(events, providers, skip_runs=WARMUP_RUNS)


def _ort_profile(artifact: Path, session, x, runs: int) -> list[dict]:
    """Run a profiling copy of `session` `runs` times on `x`; the profile's events (its file is deleted)."""
    import numpy as np
    import onnxruntime as ort

    from harness.backends.onnxruntime import session_options

    options = session.get_provider_options()
    providers = [(p, options.get(p, {})) for p in session.get_providers()]
    inp = session.get_inputs()[0]
    feed = {inp.name: x.astype(np.float16 if "float16" in inp.type else np.float32)}
    with tempfile.TemporaryDirectory(prefix="ort-profile-") as tmp:
        so = session_options()
        so.enable_profiling = True
        so.profile_file_prefix = str(Path(tmp) / "profile")
        prof = ort.InferenceSession(str(artifact), sess_options=so, providers=providers)
        for _ in range(runs):
            prof.run(None, feed)
        path = Path(prof.end_profiling())
        events = json.loads(path.read_text())
        path.unlink(missing_ok=True)
    return events


def _ort_run_windows(events: list[dict]) -> list[tuple[float, float]]:
    runs = [e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"]
    return sorted((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))) for e in runs)


def parse_ort_profile(events: list[dict], providers: list[str], skip_runs: int = WARMUP_RUNS) -> dict:
    """The section from an ONNX Runtime profile (the JSON list of trace events `end_profiling` writes).

    Node events (cat "Node", name "<node>_kernel_time") carry args.op_name and args.provider; time shares are of
    the summed kernel time. Events inside the first `skip_runs` runs ("model_run" session events) are warm-up and
    left out. A node placed on a provider other than the session's first one (`providers[0]`) fell back: on a
    CUDA session the CPUExecutionProvider nodes; a CPU-only session has nothing to fall back from.
    """
    requested = providers[0] if providers else "CPUExecutionProvider"
    windows = _ort_run_windows(events)
    skipped = windows[:skip_runs] if len(windows) > skip_runs else []
    nodes, seen = [], {}
    for e in events:
        name = str(e.get("name", ""))
        if e.get("cat") != "Node" or not name.endswith("_kernel_time"):
            continue
        ts = float(e.get("ts", 0))
        if any(lo <= ts <= hi for lo, hi in skipped):
            continue
        args = e.get("args") or {}
        provider = str(args.get("provider") or "unknown provider")
        node = name.removesuffix("_kernel_time")
        seen[node] = seen.get(node, 0) + 1
        op = str(args.get("op_name") or node)
        nodes.append((op, provider, provider != requested, node, float(e.get("dur", 0)) * 1e-6))
    if not nodes:
        raise OperatorsUnavailable("the ONNX Runtime profile holds no node kernel events")
    runs = max(seen.values())
    return section(_aggregate(nodes), _ort_source(requested, providers, runs, len(skipped)))


def _ort_source(requested: str, providers: list[str], runs: int, skipped: int) -> str:
    text = (
        f"ONNX Runtime profiling JSON of {runs} run(s) (after {skipped} warm-up run(s) left out)"
        if skipped
        else f"ONNX Runtime profiling JSON of {runs} run(s)"
    )
    text += "; node placement from each node event's provider, time shares of the summed node kernel time"
    if requested == "CPUExecutionProvider":
        text += "; a CPU-only session: every node runs on CPUExecutionProvider, nothing to fall back from"
    else:
        text += (
            f"; fallback: a node placed on a provider other than {requested} (session providers "
            f"{', '.join(providers)}; ONNX Runtime also puts small shape computations on the CPU on purpose); GPU "
            "nodes' times are the host time of their asynchronous launch, so the shares are indicative"
        )
    return text


# ---------------------------------------------------------------------------------------------------------------
# OpenVINO


def openvino_view(runner, artifact: Path | None, cell, runs: int = PROFILED_RUNS) -> dict:
    """The runner's execution graph (layer type and kernel implementation per node), timed by a second compile of
    `artifact` with PERF_COUNT; without the artifact or when that fails, the view has no time shares."""
    compiled = getattr(runner, "compiled", None)
    if compiled is None:
        raise OperatorsUnavailable(
            "no compiled OpenVINO model to read the execution graph of (export-only cell?)"
        )
    device = str(getattr(runner, "device", "cpu")).upper()
    nodes = runtime_nodes(compiled)
    times, status, why = None, None, None
    if artifact is None:
        why = "no artifact to compile a profiling copy from"
    else:
        try:
            times, status = openvino_node_times(Path(artifact), cell, runs)
        except Exception as e:
            why = f"the PERF_COUNT compile failed ({type(e).__name__}: {e})"[:300]
    return openvino_section(nodes, times, status, device, runs, why)


def runtime_nodes(compiled) -> list[dict]:
    """Nodes of a compiled model's execution graph: {name, layer, impl, precision} from each node's rt_info."""
    out = []
    for op in compiled.get_runtime_model().get_ordered_ops():
        rt = op.get_rt_info()
        out.append(
            {
                "name": op.get_friendly_name(),
                "layer": _rt(rt, "layerType") or op.get_type_name(),
                "impl": _rt(rt, "primitiveType") or "unknown",
                "precision": _rt(rt, "runtimePrecision"),
            }
        )
    return out


def _rt(rt_info, key: str) -> str | None:
    if key not in rt_info:
        return None
    value = rt_info[key]
    return str(value.astype(str) if hasattr(value, "astype") else value)


def openvino_node_times(artifact: Path, cell, runs: int) -> tuple[dict[str, float], dict[str, bool]]:
    """Per node name: seconds per run (real_time of `get_profiling_info`, averaged over `runs` inferences after the
    warm-up) and whether it executed, from the artifact compiled as the backend compiles it plus PERF_COUNT."""
    import openvino as ov
    import openvino.properties as props

    from harness.backends.openvino import OV_DEVICE, compile_config

    xml = next(artifact.glob("*.xml")) if artifact.is_dir() else artifact
    core = ov.Core()
    config = {**compile_config(cell), props.enable_profiling(): True}
    compiled = core.compile_model(core.read_model(str(xml)), OV_DEVICE[cell.device], config)
    request = compiled.create_infer_request()
    x = _input_array(cell)
    for _ in range(WARMUP_RUNS):
        request.infer(x)
    times: dict[str, float] = {}
    executed: dict[str, bool] = {}
    for _ in range(runs):
        request.infer(x)
        for info in request.get_profiling_info():
            times[info.node_name] = times.get(info.node_name, 0.0) + info.real_time.total_seconds() / runs
            ran = info.status == ov.ProfilingInfo.Status.EXECUTED
            executed[info.node_name] = executed.get(info.node_name, False) or ran
    return times, executed


def openvino_section(
    nodes: list[dict],
    times: dict[str, float] | None,
    executed: dict[str, bool] | None,
    device: str,
    runs: int,
    why_untimed: str | None = None,
) -> dict:
    """The section from execution-graph nodes and, when profiled, per-node times and executed flags.

    Rows are (layer type, kernel implementation). A `Reference` layer is the fallback: the plugin has no node for
    the operator and OpenVINO core's reference `evaluate` runs it. The plugin's own plain C++ kernels (`ref_*`
    implementations such as Concatenation's copy) are shown as they are, not counted as fallback. Input, Output
    and Const nodes are left out, and, when profiled, the nodes no inference executed (in place, or constant
    paths computed at compile time).
    """
    kept = [n for n in nodes if n["layer"] not in OV_NOT_EXECUTED]
    if executed is not None and not any(n["name"] in executed for n in kept):
        times = executed = None
        why_untimed = "no node of the profiled compile matched the runner's execution graph by name"
    dropped = 0
    if executed is not None:  # nodes absent from the profile run on constant paths, once, at compile time
        ran = [n for n in kept if executed.get(n["name"], False)]
        dropped, kept = len(kept) - len(ran), ran
    rows = _aggregate(
        (
            n["layer"],
            n["impl"],
            n["layer"] == OV_FALLBACK_LAYER,
            n["name"],
            (times.get(n["name"], 0.0) if times is not None else None),
        )
        for n in kept
    )
    source = f"OpenVINO {device} execution graph (compiled.get_runtime_model(): layerType, primitiveType)"
    if times is None:
        source += f"; no time shares: {why_untimed}"
    else:
        matched = sum(times.get(n["name"], 0.0) for n in kept)
        total = sum(times.values())
        source += (
            f"; time shares of the summed node real_time of {runs} PERF_COUNT inference(s) of a second compile "
            f"(after {WARMUP_RUNS} warm-up)"
        )
        if total and matched / total < 0.99:
            source += (
                f"; only {matched / total:.0%} of the profiled time matched the runner's graph by node name"
            )
        if dropped:
            source += (
                f"; {dropped} node(s) that no inference executed (in place, or on constant paths folded at "
                "compile time) left out"
            )
    source += (
        "; fallback: Reference layers (operators the plugin has no node for, run by OpenVINO core's reference "
        "evaluate); the plugin's own ref_* C++ kernels are shown as kernels, not fallback"
    )
    return section(rows, source)


# ---------------------------------------------------------------------------------------------------------------
# ExecuTorch


def executorch_view(backend: str, runner, artifact: Path | None, export_info: dict, cell) -> dict:
    """ETDump of the program run `PROFILED_RUNS` times when the cell has a loaded runner; otherwise (export-only
    targets) or when that fails, the export's delegation counts without time shares."""
    delegate = DELEGATE_ID.get(backend, f"{backend} delegate")
    if runner is None or artifact is None:
        return executorch_static(export_info, delegate, "export-only target: the program is not run here")
    runs = WARMUP_RUNS + PROFILED_RUNS
    try:
        events = etdump_events(Path(artifact), cell, runs)
    except Exception as e:
        log.info("ETDump of %s failed: %s", artifact, e)
        return executorch_static(
            export_info, delegate, f"the ETDump run failed ({type(e).__name__}: {e})"[:300]
        )
    return executorch_section(events, delegate, runs, skip_runs=WARMUP_RUNS)


def _pte_and_data(artifact: Path) -> tuple[Path, Path | None]:
    """The .pte (and the .ptd weights file, for exports that keep data apart) of an artifact file or directory."""
    if artifact.is_dir():
        ptds = sorted(artifact.glob("*.ptd"))
        return next(artifact.glob("*.pte")), (ptds[0] if ptds else None)
    return artifact, None


def etdump_events(artifact: Path, cell, runs: int) -> list[dict]:
    """Run the program `runs` times with ETDump on; its Execute events as {name, delegated, ms: [per run]}."""
    import torch
    from executorch.devtools import Inspector
    from executorch.runtime import Runtime

    pte, data = _pte_and_data(artifact)
    program = Runtime.get().load_program(pte, enable_etdump=True, data_path=data)
    method = program.load_method("forward")
    x = torch.from_numpy(_input_array(cell))
    for _ in range(runs):
        method.execute([x])
    with tempfile.TemporaryDirectory(prefix="etdump-") as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        etdump = Path(tmp) / "run.etdp"
        program.write_etdump_result_to_file(str(etdump), str(Path(tmp) / "debug.bin"))
        inspector = Inspector(etdump_path=str(etdump))
    return [
        {
            "name": e.name,
            "delegated": bool(e.is_delegated_op),
            "ms": list(e.perf_data.raw) if e.perf_data else [],
        }
        for block in inspector.event_blocks
        if block.name == "Execute"
        for e in block.events
    ]


_XNN_INSTANCE = re.compile(r"\s+#\d+$")
_NATIVE = "native_call_"


def _mean_after(samples: list[float], skip: int) -> float | None:
    kept = samples[skip:] if len(samples) > skip else samples
    return sum(kept) / len(kept) if kept else None


def executorch_section(events: list[dict], delegate: str, runs: int, skip_runs: int = WARMUP_RUNS) -> dict:
    """The section from ETDump Execute events {name, delegated, ms: [per run]}.

    Delegated operator events (the delegate's own profiling, e.g. XNNPACK's "Convolution (NHWC, F32) IGEMM #3")
    are rows on the delegate; "native_call_<op>" events are the kernels outside the delegate, the fallback. When
    the delegate reports no operators, each DELEGATE_CALL is one "delegated subgraph" node. Shares are of
    Method::execute; the delegate calls' and the kernel dispatch's own overhead make up the rest.
    """
    mean = {id(e): _mean_after(e["ms"], skip_runs) for e in events}
    delegated = [e for e in events if e["delegated"]]
    # an event block lists each instruction's event once; "#n" restarts in every delegated subgraph
    nodes = [
        (_XNN_INSTANCE.sub("", e["name"]), delegate, False, f"d{i}", mean[id(e)])
        for i, e in enumerate(delegated)
    ]
    if not delegated:
        calls = [e for e in events if e["name"] == "DELEGATE_CALL"]
        nodes = [
            ("delegated subgraph", delegate, False, f"call {i}", mean[id(e)]) for i, e in enumerate(calls)
        ]
    natives = [e for e in events if not e["delegated"] and e["name"].startswith(_NATIVE)]
    nodes += [
        (e["name"].removeprefix(_NATIVE), ET_KERNELS, True, f"k{i}", mean[id(e)])
        for i, e in enumerate(natives)
    ]
    if not nodes:
        raise OperatorsUnavailable("the ETDump holds no delegate or kernel events")
    total = sum(mean[id(e)] or 0.0 for e in events if e["name"] == "Method::execute") or None
    rows = _aggregate(nodes)
    covered = sum(r["time"] or 0.0 for r in rows)
    source = (
        f"ExecuTorch ETDump of {runs} run(s) (first {skip_runs} left out as warm-up): "
        + ("the delegate's per-operator events" if delegated else "one event per delegate call")
        + f" on {delegate}, and the kernels outside it ({ET_KERNELS}, the fallback)"
    )
    if total:
        source += (
            f"; time shares of Method::execute ({total:.3f} ms per run), the rows cover {covered / total:.0%} "
            "(the rest is the delegate calls' and the kernel dispatch's own overhead)"
        )
    return section(rows, source, total_time=total)


def executorch_static(export_info: dict, delegate: str, why: str) -> dict:
    """The export's delegation counts (`info["ops"]`, from get_delegation_info at export): one delegated row,
    one row per operator left outside the delegate (their node counts are only given in total)."""
    ops = (export_info or {}).get("ops")
    if not isinstance(ops, dict) or "delegated" not in ops:
        raise OperatorsUnavailable(f"the export recorded no delegation counts, and {why}")
    names = list(ops.get("fallback_ops") or [])
    rows = [
        {"op": "delegated operators", "where": delegate, "fallback": False, "count": int(ops["delegated"])}
    ]
    rows += [{"op": n, "where": ET_KERNELS, "fallback": True, "count": None} for n in names]
    out = section(rows, "")
    out["fallback_ops"] = int(ops.get("fallback") or 0)
    out["total_ops"] = int(ops["delegated"]) + out["fallback_ops"]
    out["source"] = (
        "export-time delegation counts (executorch.devtools.backend_debug.get_delegation_info): "
        f"{ops.get('delegated_subgraphs', '?')} delegated subgraph(s); the operators outside the delegate are "
        f"listed by name, their nodes counted only in total; no time shares: {why}"
    )
    return out
