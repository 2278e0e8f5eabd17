"""CUDA exports traced on a fake CUDA device (harness.backends._shared.fake_cuda): tiny models through ExecuTorch's
real CUDA lowering, both ways (a top-k row over the Triton top-k's limit and one within it; seed 001's indexing
and a float index); the records, the claims, `check` against a GPU record, and that no fake record is read as a
GPU measurement (decisions, roofline, history).

The tiny models run ExecuTorch's CudaPartitioner, its passes and AOTInductor's lowering and C++ wrapper on the CPU
build of torch, up to the autotuning block, where the trace stops (`DeviceNeeded`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.backends._shared.fake_cuda import DEFAULT_TARGET, FAKE_LABEL, getitem_by_ops
from harness.check import fake_vs_gpu
from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.record import TRACED_STATUSES, CellRecord, new_record
from harness.core.results_dir import Run, read_records
from harness.decide.index import index_runs
from harness.diagnosis.classify import classify
from harness.report.claims import FAKE_BASIS, evaluate, load_claims

torch = pytest.importorskip("torch")
pytest.importorskip("executorch")
needs_triton = pytest.mark.skipif(
    __import__("importlib.util").util.find_spec("triton") is None, reason="triton is not installed"
)
ROOT = Path(__file__).resolve().parents[1]


class TopK(torch.nn.Module):
    """A convolution, then a top-k over rows of `n` (ExecuTorch's Triton top-k takes rows of at most 4096)."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n
        self.conv = torch.nn.Conv2d(3, 4, 1)

    def forward(self, x):
        return self.conv(x).flatten(1)[:, : self.n].topk(8, dim=1)[0]


class SeedIndexing(torch.nn.Module):
    """Seed 001's pattern: `ori_index[torch.arange(batch)[..., None], index // nc]` (int64 indices), the advanced
    indexing its authors saw reach AOTInductor's lowering as float32."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 1)

    def forward(self, x):
        s = self.conv(x).flatten(1)[:, :256]
        ori = s.topk(16, dim=1)[1]
        _, index = s[:, :64].topk(8, dim=1)
        return ori[torch.arange(s.shape[0])[..., None], index // 4]


class FloatIndex(torch.nn.Module):
    """An aten.index whose second index is float32: the failure seed 001 quotes, made directly."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 1)

    def forward(self, x):
        s = self.conv(x).flatten(1)
        return torch.ops.aten.index.Tensor(s, [torch.zeros(1, 3, dtype=torch.int64), torch.ones(1, 3)])


def trace(model):
    """(trace, info) of a traced lowering, or (the exception, its trace summary) of a failed one."""
    from harness.backends._shared.executorch_cuda_trace import trace_lowering

    info: dict = {}
    try:
        return trace_lowering(model.eval(), (1, 3, 40, 40), DEFAULT_TARGET, info), info
    except Exception as e:
        return e, e.export_info["fake_device"]


# -- tiny models through the real lowering, both ways ----------------------------------------------------------------
@needs_triton
@pytest.mark.slow
@pytest.mark.export
def test_topk_over_4096_rows_fails_as_missing_fallback_kernel_and_within_traces_to_the_gpu_step():
    over, summary = trace(TopK(5000))
    assert isinstance(over, RuntimeError), over
    assert "missing fallback kernels (1 total)" in str(over) and "at::_ops::topk::call" in str(over)
    failure = classify(str(over), exception_type="builtins.RuntimeError")
    assert failure["class"] == "missing_fallback_kernel" and "at::_ops::topk::call" in failure["ops"]
    # the lowering itself ran to the step that needs a GPU; ExecuTorch's check is what fails it
    assert [s["status"].split(":")[0] for s in summary["stages"]] == ["done", "stopped"]
    assert summary["stopped_at"].startswith("autotuning")

    within, info = trace(TopK(1000))
    assert within.stopped_at is not None and within.stopped_at.startswith("autotuning")
    assert info["prediction"]["fails"] is False and info["prediction"]["topk"][0]["row"] == 1000
    assert within.summary()["label"] == FAKE_LABEL and within.summary()["target"]["sm"] == "sm_90"


@needs_triton
@pytest.mark.slow
@pytest.mark.export
def test_seed_001_indexing_traces_here_and_a_float_index_fails_at_export_as_a_dtype_error():
    seed, _ = trace(
        SeedIndexing()
    )  # int64 indices: the seed's float32 lowering error does not reproduce here
    assert not isinstance(seed, Exception), seed
    assert seed.stopped_at.startswith("autotuning")
    bad, summary = trace(FloatIndex())
    assert isinstance(bad, IndexError) and "must be long, int, byte or bool" in str(bad)
    assert [(s["name"], s["status"]) for s in summary["stages"]] == [
        ("torch.export on fake CUDA tensors", "failed: IndexError")
    ]
    assert classify(str(bad), exception_type="builtins.IndexError")["class"] == "dtype_error"


def test_the_prediction_reads_topk_rows_against_the_limit_both_ways():
    from harness.backends._shared.executorch_cuda_trace import predict

    x = torch.zeros(1, 3, 80, 80)
    over = predict(torch.export.export(TopK(5000).eval(), (x,), strict=False))
    within = predict(torch.export.export(TopK(1000).eval(), (x,), strict=False))
    assert over["fails"] is True and "5000 > 4096" in over["why"]
    assert within["fails"] is False and "at most 4096" in within["why"]
    assert over["label"].startswith("prediction")


@pytest.mark.parametrize(
    "key",
    [
        (Ellipsis, None),
        (slice(None), slice(1, 3)),
        (0, Ellipsis, 2),
        (Ellipsis, slice(None, None, 2)),
        (slice(None), torch.tensor([1, 3])),
        (None, 1),
        (Ellipsis, 0, None),
        (torch.tensor([[1], [0]]), torch.tensor([[2, 4], [0, 1]])),
    ],
)
def test_indexing_by_aten_ops_gives_what_python_indexing_gives(key):
    t = torch.arange(2 * 5 * 7, dtype=torch.float32).reshape(2, 5, 7)
    assert torch.equal(getitem_by_ops(t, key), t[key])


# -- records, claims, check ------------------------------------------------------------------------------------------
CELL = Cell("n", "detect", "e2e", "executorch-cuda", "cuda", Shape(640, 640))
TOPK_MISSING = "Method forward missing fallback kernels (1 total):\n  - at::_ops::topk::call\n"


def fake_record(status: str, cell: Cell = CELL, remedy: str | None = None, message: str = "") -> CellRecord:
    r = new_record("fake", cell, "random-init:0")
    r.status, r.reason = status, FAKE_LABEL
    r.fake_device = {"label": FAKE_LABEL, "stopped_at": "autotuning the generated kernels", "stages": []}
    if remedy:
        r.cell_id, r.remedy, r.remedy_of = f"{cell.id}+{remedy}", remedy, cell.id
    if status == "trace_failed":
        r.failure = classify(message or TOPK_MISSING, exception_type="builtins.RuntimeError")
    return r


def verdicts(records: list[CellRecord]) -> dict[str, tuple[str, str]]:
    results = evaluate(index_runs([Run(Path("/x"), "r", {}, records)]), load_claims())
    return {r.id: (r.verdict, r.basis) for r in results}


def test_fake_traces_decide_the_cuda_export_claims_labelled_and_both_ways():
    got = verdicts([fake_record("trace_failed"), fake_record("traced", remedy="backbone-only")])
    assert got["aoti-full-model"] == ("confirmed", FAKE_BASIS)
    assert got["aoti-postprocess-ops"] == ("confirmed", FAKE_BASIS)
    assert got["aoti-backbone-only"] == ("confirmed", FAKE_BASIS)
    assert got["cuda-pte-runs"][0] == "not measurable"  # nothing ran: a trace never says a .pte runs
    other_way = verdicts([fake_record("traced"), fake_record("trace_failed", remedy="backbone-only")])
    assert other_way["aoti-full-model"] == ("refuted", FAKE_BASIS)
    assert other_way["aoti-postprocess-ops"] == ("refuted", FAKE_BASIS)
    assert other_way["aoti-backbone-only"] == ("refuted", FAKE_BASIS)
    # a GPU record decides as measured
    gpu = fake_record("trace_failed")
    gpu.status, gpu.fake_device, gpu.reason = "export_failed", None, "failed"
    assert verdicts([gpu])["aoti-full-model"] == ("confirmed", "measured")


def test_the_claims_evidence_says_trace_not_export():
    results = evaluate(index_runs([Run(Path("/x"), "r", {}, [fake_record("trace_failed")])]), load_claims())
    evidence = next(r.evidence for r in results if r.id == "aoti-full-model")
    assert "[trace failed: export traced on a CPU machine, fake CUDA device]" in evidence


def test_check_names_a_gpu_export_that_disagrees_with_its_fake_trace_and_passes_one_that_agrees():
    fake = fake_record("trace_failed")
    agrees = fake_record("trace_failed")
    agrees.fake_device, agrees.status = None, "export_failed"
    assert fake_vs_gpu.compare([("cpu", [fake]), ("gpu", [agrees])]) == []
    other = fake_record("trace_failed", message="NoValidChoicesError: No choices to select")
    other.fake_device, other.status = None, "export_failed"
    (found,) = fake_vs_gpu.compare([("cpu", [fake]), ("gpu", [other])])
    assert found[0] == "gpu" and found[1].relation == fake_vs_gpu.RELATION
    assert "missing_fallback_kernel" in found[1].detail and "compile_error" in found[1].detail
    # a trace that reached its stop against a GPU export that ran: agree; against a lowering failure: named
    traced = fake_record("traced")
    ran = fake_record("traced")
    ran.fake_device, ran.status = None, "ok"
    assert fake_vs_gpu.compare([("cpu", [traced]), ("gpu", [ran])]) == []
    lowering = fake_record("trace_failed", message="LoweringException: AssertionError: indices must be int64")
    lowering.fake_device, lowering.status = None, "export_failed"
    assert len(fake_vs_gpu.compare([("cpu", [traced]), ("gpu", [lowering])])) == 1


# -- the suite on yolo26n: records, report, decisions, history --------------------------------------------------------
@pytest.fixture(scope="module")
def fake_run(tmp_path_factory, cache_dir) -> Path:
    """yolo26n at 640 on the two CUDA backends with --fake-cuda, as a user runs it: one suite run. At 640 the
    end-to-end head's top-k rows pass 4096 (at 320 every row is shorter and the full model traces too)."""
    results = tmp_path_factory.mktemp("fake-cuda-results")
    cmd = [
        sys.executable, "-m", "pytest", str(ROOT / "suites"), "--benchmark-only", "-q", "-p", "no:randomly",
        "--sizes", "n", "--tasks", "detect", "--heads", "e2e", "--devices", "cuda", "--shapes", "640",
        "--precisions", "fp32", "--backends", "executorch-cuda,aoti", "--fake-cuda",
        "--results-dir", str(results), "--cache-dir", str(cache_dir), "--run-id", "fake", "--no-history",
    ]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1500, env=os.environ)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return results


@needs_triton
@pytest.mark.slow
@pytest.mark.export
@pytest.mark.process
def test_yolo26n_cuda_exports_traced_on_a_fake_device_record_how_far_they_got(fake_run):
    recs = {r.cell_id: r for r in read_records(fake_run / "fake")}
    full = recs["yolo26n-detect-e2e-executorch-cuda-cuda-640x640-b1-fp32"]
    assert full.status == "trace_failed" and full.failure["class"] == "missing_fallback_kernel"
    assert "at::_ops::topk::call" in full.failure["ops"] and FAKE_LABEL in full.reason
    assert full.latency_ms is None and full.fake_device["stages"][0]["status"] == "done"
    backbone = recs["yolo26n-detect-e2e-executorch-cuda-cuda-640x640-b1-fp32+backbone-only"]
    assert backbone.status == "traced" and backbone.fake_device["stopped_at"].startswith("autotuning")
    aoti = recs["yolo26n-detect-e2e-aoti-cuda-640x640-b1-fp32"]
    assert aoti.status == "traced" and aoti.fake_device["target"]["sm"] == "sm_90"
    assert all(r.status in (*TRACED_STATUSES, "skipped") for r in recs.values())


@needs_triton
@pytest.mark.slow
@pytest.mark.export
@pytest.mark.process
def test_no_fake_record_is_read_as_a_gpu_measurement(fake_run, tmp_path):
    """Decisions, roofline and history read a fake trace as what it is: no candidate, no figure, its own status."""
    import sqlite3

    from harness.core.results_dir import load_run
    from harness.decide.candidates import candidates
    from harness.history.cli import main_import

    (run,) = load_run(fake_run / "fake")
    (idx,) = index_runs([run])
    assert candidates(idx) == []  # nothing ran: nothing can be picked, on any device
    assert all(r.latency_ms is None and r.roofline is None for r in run.records)
    decisions = json.loads((fake_run / "reports" / "fake" / "decision.json").read_text())["decisions"]
    assert decisions and all(d["pick"] is None for d in decisions)
    html = (fake_run / "reports" / "fake" / "index.html").read_text()
    assert "trace failed · fake CUDA" in html and "traced · fake CUDA" in html and FAKE_BASIS in html
    summary = (fake_run / "reports" / "fake" / "summary.md").read_text()
    full_model = next(x for x in summary.splitlines() if "prevent full YOLO26 export" in x)
    assert "confirmed" in full_model and FAKE_BASIS in full_model
    db = tmp_path / "h.sqlite"
    assert main_import([str(fake_run / "fake"), "--db", str(db)]) == 0
    rows = sqlite3.connect(db).execute("SELECT cell_id, status, p50 FROM cells").fetchall()
    cuda = [(s, p) for cid, s, p in rows if "-cuda-" in cid]
    assert cuda and all(s in (*TRACED_STATUSES, "skipped") and p is None for s, p in cuda)


def test_a_step_the_cpu_build_cannot_trace_says_nothing_about_the_export():
    """A CUDA device guard no stand-in covers ends the trace as device_missing: no verdict on the GPU export, where
    a lowering's own failure decides the claims."""
    from harness.backends._shared.fake_cuda import CannotTrace, Trace

    t = Trace(DEFAULT_TARGET)
    with pytest.raises(CannotTrace) as caught, t.stage("torch.export on fake CUDA tensors"):
        raise RuntimeError("PyTorch is not linked with support for cuda devices")
    assert t.stages[0]["status"].startswith("cannot trace") and t.notes
    limit = fake_record("trace_failed", message=str(caught.value))
    assert limit.failure["class"] == "device_missing"
    got = verdicts([limit])
    assert (
        got["aoti-full-model"][0] == "not measurable" and got["aoti-postprocess-ops"][0] == "not measurable"
    )
    # the same stage failing in the lowering itself is a verdict
    with pytest.raises(ValueError), t.stage("lowering"):
        raise ValueError("LoweringException: boom")
    assert t.stages[1]["status"] == "failed: ValueError"


@needs_triton
@pytest.mark.slow
@pytest.mark.export
def test_a_dynamic_export_on_fake_cuda_tensors_meets_the_strided_convolution_guards(tmp_path):
    """With symbolic shapes the in-place ops decompose to Tensor.copy_ (a CUDA device guard): through aten.copy_
    the export reaches torch.export's own verdict, the guards the seeds quote, as on a GPU."""
    from harness.backends.aoti import Aoti
    from harness.backends.base import ExportRequest

    req = ExportRequest(
        "aoti", "cuda", str(ROOT / "weights" / "standin" / "yolo26n-detect.pt"), "n", "detect", "e2e", 0, 0, True,
        1, "fp32", str(tmp_path), {"fake_cuda": DEFAULT_TARGET, "dynamic_range": [320, 1280]},
    )  # fmt: skip
    with pytest.raises(Exception, match=r"Constraints violated \(height, width\)") as caught:
        Aoti().export(req)
    stages = caught.value.export_info["fake_device"]["stages"]
    assert stages == [dict(stages[0], status="failed: UserError")]
    assert (
        caught.value.export_info["fake_device"]["shims"]["Tensor.copy_ of a fake CUDA tensor -> aten.copy_"]
        > 0
    )
    assert classify(str(caught.value))["class"] == "guard_violation"


def test_the_expected_status_file_never_lists_a_fake_trace(tmp_path):
    """--update-expected records failures to expect; a trace is no failure (its cell is a skip with its status),
    while a real export failure of the same cell is listed."""
    from harness.plan.expected import ExpectedStatus

    exp = ExpectedStatus(tmp_path / "expected.yaml")
    exp.update([fake_record("trace_failed"), fake_record("traced", remedy="backbone-only")])
    assert exp.entries == {}
    assert exp.judge(fake_record("trace_failed"), "cmd").outcome == "pass"
    real = fake_record("trace_failed")
    real.status, real.fake_device = "export_failed", None
    exp.update([real])
    assert exp.entries[real.cell_id]["status"] == "export_failed"
    assert exp.judge(real, "cmd").outcome == "xfail"
