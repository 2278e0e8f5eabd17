"""The operator view (harness.diagnosis.operators) on real yolo26n exports at 160 through the real runtimes, the
ONNX Runtime profile parse and the OpenVINO classification on hand-made data, and its report table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness import backends
from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.record import CellRecord, new_record
from harness.diagnosis.operators import (
    OperatorsUnavailable,
    executorch_section,
    openvino_section,
    operator_view,
    parse_ort_profile,
)
from harness.report.operators import render_operators

# the exports tests/test_runner.py and tests/test_threads.py make too (one session cache)
SHAPE = Shape(160, 160)


def _cell(backend: str) -> Cell:
    return Cell("n", "detect", "e2e", backend, "cpu", SHAPE)


@pytest.fixture(scope="module")
def loaded(tmp_path_factory, cache_dir):
    """backend -> (runner, artifact, export info, cell): exports from the session's export cache, loaded once."""
    from harness.execute.runner import CellRunner, RunConfig

    out = tmp_path_factory.mktemp("operators-results")
    cfg = RunConfig(
        run_id="operators", results_dir=out, cache_dir=cache_dir, max_time_s=0.2, block_s=0.02, canary=False
    )
    svc = CellRunner(cfg, progress=lambda m: None)
    got: dict[str, tuple] = {}

    def load(backend: str) -> tuple:
        if backend not in got:
            cell, be = _cell(backend), backends.get(backend)
            outcome = svc.export(be, cell, svc.materialize(cell), out / f"{backend}.log", {})
            assert outcome.status == "ok", outcome.message
            artifact = Path(outcome.artifact)
            got[backend] = (be.load(artifact, cell, outcome.info), artifact, outcome.info, cell)
        return got[backend]

    return load


def _view(loaded, backend: str) -> dict:
    runner, artifact, info, cell = loaded(backend)
    return operator_view(backend, runner, artifact, info, cell)


def _by_op(view: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for o in view["ops"]:
        out.setdefault(o["op"], []).append(o)
    return out


def _shares(view: dict) -> float:
    return sum(o["time_share"] for o in view["ops"])


@pytest.mark.parametrize("backend", ["torch-eager", "torch-compile", "aoti-cudagraph", "tensorrt"])
def test_runtimes_that_cannot_tell_say_why(backend):
    with pytest.raises(OperatorsUnavailable) as e:
        operator_view(backend, None, None, {}, _cell("torch-eager"))
    assert e.value.reason == str(e.value) and len(e.value.reason) > 40
    if backend == "torch-eager":
        assert "ATen" in e.value.reason and "no delegate" in e.value.reason


@pytest.mark.slow
@pytest.mark.export
def test_onnxruntime_cpu_runs_every_node_on_the_cpu_provider(loaded):
    view = _view(loaded, "onnxruntime")
    conv = _by_op(view)["Conv"]
    assert [(c["where"], c["fallback"]) for c in conv] == [("CPUExecutionProvider", False)]
    assert (
        conv[0]["count"] > 50 and conv[0]["time_share"] > 0.2
    )  # the convolutions are most of yolo26n's time
    assert {o["where"] for o in view["ops"]} == {"CPUExecutionProvider"}
    assert (view["fallback_ops"], view["fallback_time_share"]) == (0, 0.0)
    assert view["total_ops"] == sum(o["count"] for o in view["ops"]) > 100
    assert _shares(view) == pytest.approx(1.0, abs=1e-3)
    assert "CPU-only session" in view["source"] and "3 run(s)" in view["source"]
    shares = [o["time_share"] for o in view["ops"]]
    assert shares == sorted(shares, reverse=True)


@pytest.mark.slow
@pytest.mark.export
def test_openvino_names_each_kernel_and_yolo26n_fp32_has_no_reference_fallback(loaded):
    view = _view(loaded, "openvino")
    ops = _by_op(view)
    assert view["fallback_ops"] == 0 and view["fallback_time_share"] == 0.0
    assert not any(o["fallback"] for o in view["ops"]) and "Reference" not in ops
    # every convolution runs an optimized kernel, named as the CPU plugin names its implementations
    assert all(re.match(r"(brg|jit|gemm)", c["where"]) for c in ops["Convolution"]), ops["Convolution"]
    assert sum(c["time_share"] for c in ops["Convolution"]) > 0.3
    # the plugin's own plain C++ kernels (Concatenation's copy) show as such, not as a fallback
    assert any(c["where"].startswith("ref") for c in ops["Concatenation"])
    assert not {"Input", "Output", "Const"} & set(ops)
    assert _shares(view) == pytest.approx(1.0, abs=1e-3)
    assert "PERF_COUNT" in view["source"]


@pytest.mark.slow
@pytest.mark.export
def test_executorch_counts_delegated_operators_and_times_the_fallback(loaded):
    view = _view(loaded, "executorch-xnnpack")
    delegated = [o for o in view["ops"] if not o["fallback"]]
    fallback = [o for o in view["ops"] if o["fallback"]]
    assert {o["where"] for o in delegated} == {"XnnpackBackend"}
    assert sum(o["count"] for o in delegated) > 100
    assert any(o["op"].startswith("Convolution") for o in delegated)
    assert "topk.values" in {o["op"] for o in fallback}  # the e2e head's top-k is not delegated to XNNPACK
    assert view["ops"][: len(fallback)] == fallback  # fallbacks first
    assert view["fallback_ops"] == sum(o["count"] for o in fallback)
    assert 0 < view["fallback_time_share"] < 1
    assert 0.3 < _shares(view) <= 1.0 + 1e-6  # of Method::execute; the delegate's own overhead is the rest
    assert "ETDump" in view["source"]
    # an export-only target (no runner) gets the export's delegation counts, without time shares
    _, artifact, info, cell = loaded("executorch-xnnpack")
    static = operator_view("executorch-xnnpack", None, artifact, info, cell)
    assert static["ops"][-1] == {
        "op": "delegated operators",
        "where": "XnnpackBackend",
        "fallback": False,
        "count": info["ops"]["delegated"],
        "time_share": None,
    }
    assert static["fallback_ops"] == info["ops"]["fallback"] and static["fallback_time_share"] is None
    assert "aten_topk_default" in {o["op"] for o in static["ops"] if o["fallback"]}


def _event(name: str, ts: int, dur: int, op: str | None = None, provider: str | None = None) -> dict:
    event = {"cat": "Node" if op else "Session", "name": name, "ts": ts, "dur": dur, "ph": "X"}
    event["args"] = {"op_name": op, "provider": provider} if op else {}
    return event


def _cuda_profile() -> list[dict]:
    """SYNTHETIC: a hand-made ONNX Runtime profile of a CUDA session whose NonMaxSuppression and TopK nodes were
    placed on the CPU provider. Two runs; the first is warm-up, its CPU nodes ten times slower."""
    cuda, cpu = "CUDAExecutionProvider", "CPUExecutionProvider"
    nodes = [
        ("conv1", "Conv", cuda, 400),
        ("conv2", "Conv", cuda, 300),
        ("to_host", "MemcpyToHost", cuda, 50),
        ("nms", "NonMaxSuppression", cpu, 150),
        ("topk", "TopK", cpu, 50),
        ("from_host", "MemcpyFromHost", cuda, 50),
    ]
    events = [{"cat": "Synthetic", "name": "hand-made for this test", "ts": 0, "args": {"synthetic": True}}]
    events.append(_event("model_loading_uri", 0, 10))
    for run, start in enumerate((100, 10_000)):
        events.append(_event("model_run", start, 5_000))
        ts = start + 1
        for name, op, provider, dur in nodes:
            took = dur * 10 if run == 0 and provider == cpu else dur
            events.append(_event(f"{name}_kernel_time", ts, took, op, provider))
            ts += took + 1
    return events


def test_ort_profile_nodes_on_the_cpu_provider_of_a_cuda_session_are_fallbacks():
    events = _cuda_profile()
    view = parse_ort_profile(events, ["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert [(o["op"], o["where"], o["fallback"]) for o in view["ops"][:2]] == [
        ("NonMaxSuppression", "CPUExecutionProvider", True),
        ("TopK", "CPUExecutionProvider", True),
    ]
    assert not any(o["fallback"] for o in view["ops"][2:])
    assert (view["fallback_ops"], view["total_ops"]) == (2, 6)
    assert view["fallback_time_share"] == pytest.approx(200 / 1000)  # the warm-up run left out
    conv = next(o for o in view["ops"] if o["op"] == "Conv")
    assert (conv["count"], conv["time_share"]) == (2, pytest.approx(0.7))
    assert "1 run(s)" in view["source"] and "other than CUDAExecutionProvider" in view["source"]
    with_warmup = parse_ort_profile(events, ["CUDAExecutionProvider"], skip_runs=0)
    assert with_warmup["fallback_time_share"] == pytest.approx(2200 / 3800)


def test_ort_profile_without_node_events_cannot_tell():
    with pytest.raises(OperatorsUnavailable, match="no node kernel events"):
        parse_ort_profile([_event("model_run", 0, 5)], ["CPUExecutionProvider"])


def test_openvino_reference_layers_are_the_fallback():
    """SYNTHETIC execution graph: one operator the plugin has no node for runs as a Reference layer."""
    nodes = [
        {"name": "x", "layer": "Input", "impl": "unknown_f32", "precision": "f32"},
        {"name": "conv", "layer": "Convolution", "impl": "brgconv_avx512_f32", "precision": "f32"},
        {"name": "cat", "layer": "Concatenation", "impl": "ref_f32", "precision": "f32"},
        {"name": "odd", "layer": "Reference", "impl": "ref_any_f32", "precision": "f32"},
        {"name": "reshape", "layer": "Reshape", "impl": "unknown_f32", "precision": "f32"},
    ]
    times = {"conv": 0.006, "cat": 0.001, "odd": 0.003, "reshape": 0.0}
    ran = {"conv": True, "cat": True, "odd": True, "reshape": False}
    view = openvino_section(nodes, times, ran, "CPU", runs=3)
    assert [(o["op"], o["fallback"]) for o in view["ops"]] == [
        ("Reference", True),
        ("Convolution", False),
        ("Concatenation", False),
    ]
    assert view["fallback_time_share"] == pytest.approx(0.3) and view["total_ops"] == 3
    assert "1 node(s) that no inference executed" in view["source"]
    untimed = openvino_section(nodes, None, None, "CPU", runs=3, why_untimed="no artifact")
    assert untimed["fallback_time_share"] is None and untimed["total_ops"] == 4
    assert "no time shares: no artifact" in untimed["source"]


def test_executorch_delegate_without_operator_events_counts_its_calls():
    """SYNTHETIC ETDump events of a delegate that reports no operators of its own (one sample per run)."""
    events = [
        {"name": "Method::execute", "delegated": False, "ms": [9.0, 4.0]},
        {"name": "DELEGATE_CALL", "delegated": False, "ms": [6.0, 3.0]},
        {"name": "OPERATOR_CALL", "delegated": False, "ms": [2.0, 0.6]},
        {"name": "native_call_topk.values", "delegated": False, "ms": [1.5, 0.5]},
    ]
    view = executorch_section(events, "VulkanBackend", runs=2)
    assert [(o["op"], o["where"], o["count"], o["time_share"]) for o in view["ops"]] == [
        ("topk.values", "ExecuTorch CPU kernels", 1, pytest.approx(0.125)),
        ("delegated subgraph", "VulkanBackend", 1, pytest.approx(0.75)),
    ]
    assert view["fallback_time_share"] == pytest.approx(0.125)


def _record(backend: str, **extra) -> CellRecord:
    """An ok record of yolo26n detect e2e 160x160 on `backend` (cpu), with `extra` fields set over it."""
    rec = new_record("r", _cell(backend), "random-init:0")
    assert rec.cell_id == f"yolo26n-detect-e2e-{backend}-cpu-160x160-b1-fp32"
    rec.status = "ok"
    for k, v in extra.items():
        setattr(rec, k, v)
    return rec


def test_render_operators_one_table_per_workload_fallbacks_first_and_the_reasons():
    ort = parse_ort_profile(_cuda_profile(), ["CUDAExecutionProvider", "CPUExecutionProvider"])
    et = executorch_section(
        [
            {"name": "Method::execute", "delegated": False, "ms": [2.0, 2.0]},
            {"name": "Convolution (NHWC, F32) IGEMM #1", "delegated": True, "ms": [1.0, 1.0]},
            {"name": "native_call_upsample_nearest2d.vec_out", "delegated": False, "ms": [0.5, 0.5]},
        ],
        "XnnpackBackend",
        runs=2,
    )
    eager_reason = "PyTorch eager runs every operator as an ATen kernel <no delegate>"
    records = [
        _record("onnxruntime", device="cuda", operators=ort),
        _record("executorch-xnnpack", operators=et),
        _record("torch-eager", null_reasons={"operators": eager_reason}),
        _record("onnxruntime", height=640, width=640, operators=ort),
        _record("openvino", height=640, width=640, status="load_failed"),
    ]
    page = render_operators(records)
    assert page.count('<table class="opv">') == 2
    first, second = page.split("</table>")[:2]
    assert "yolo26n detect e2e 160x160 b1 fp32" in first and "640x640" in second
    rows = re.findall(r"<tr( class=\"opv-fb\")?><th>([^<]+)</th>", first)
    names = [name for _, name in rows]
    fallback_rows = [name for cls, name in rows if cls]
    assert fallback_rows == names[:3]  # fallbacks first
    assert set(fallback_rows) == {"NonMaxSuppression", "TopK", "upsample_nearest2d.vec_out"}
    assert names.index("Conv") < names.index("MemcpyToHost")  # then by time share
    assert 'CPUExecutionProvider ×1 <span class="opv-share">15.0%</span>' in first
    assert "2 of 6 nodes, 20.0% of the time" in first
    assert "could not tell" in first and "&lt;no delegate&gt;" in first  # reasons, escaped
    assert "torch-eager" in first and "openvino" not in first
    assert "no operator view recorded (status load_failed)" in second
    assert 'title="ONNX Runtime profiling JSON' in first
