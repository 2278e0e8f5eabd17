"""The claims table and its predicates, on small hand-built records shaped like the runner's, and on the committed
default run (results/samples/2026-11-22-cpu-2core)."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from pathlib import Path

import pytest

from harness.core.axes import TASKS, Shape
from harness.core.cell import Cell
from harness.core.record import RECORD_FIELDS, CellRecord, Latency, new_record
from harness.core.record_codec import record_to_dict
from harness.core.results_dir import Run, load_run
from harness.decide.index import index_runs
from harness.report.claims import CHECKS, CLAIMS_FILE, VERDICTS, Claim, evaluate, load_claims

REPO = Path(__file__).resolve().parent.parent
DEFAULT_RUN = REPO / "results" / "samples" / "2026-11-22-cpu-2core"
INTEL_VM = {"host": {"cpu_model": "Intel(R) Xeon(R) Processor", "hostname": "vm"}}
CORE_I7 = {"host": {"cpu_model": "12th Gen Intel(R) Core(TM) i7-12700K", "hostname": "desk"}}
AMD = {"host": {"cpu_model": "AMD EPYC 7R13 Processor", "hostname": "amd"}}


def rec(
    backend: str,
    device: str = "cpu",
    status: str = "ok",
    p50: float | None = None,
    shape: str = "640",
    size: str = "n",
    cls: str | None = None,
    message: str = "",
    task: str = "detect",
    samples: list[float] | None = None,
    **extra,
) -> CellRecord:
    r = new_record("t", Cell(size, task, "e2e", backend, device, Shape.parse(shape)), "random-init:0")
    r.status = status
    for k, v in extra.items():
        setattr(r, k, v)
    if samples is not None:
        r.samples_ms = samples
        p50 = sorted(samples)[len(samples) // 2]
    if p50 is not None:
        r.latency_ms = Latency(
            p50=p50,
            p90=p50,
            p99=p50,
            mean=p50,
            min=p50,
            max=p50,
            stdev=0.0,
            rounds=10,
            timing_scope="model only",
        )
    if cls or status not in ("ok", "skipped", "exported"):
        r.failure = {"class": cls, "stage": "export", "message": message, "ops": [], "guards": []}
    return r


def judge(claim: Claim, records: list[CellRecord], env: dict | None = None):
    run = Run(path=Path("/nonexistent"), run_id="t", env=env or {}, records=records)
    (result,) = evaluate(index_runs([run]), [claim])
    return result


def judge_runs(claim: Claim, runs: list[tuple[dict, list[CellRecord]]]):
    """A claim over several machines' runs (as a merged results directory gives them)."""
    built = [Run(Path(f"/r{n}"), f"r{n}", env, recs) for n, (env, recs) in enumerate(runs)]
    (result,) = evaluate(index_runs(built), [claim])
    return result


def claim(
    check: str | None, select: dict, needs: dict | None = None, untestable: str = "", **params
) -> Claim:
    return Claim(
        "c", "000_fda80f2472077657.txt", "a claim", check, select, params, "needs X", needs, untestable
    )


def table(claim_id: str) -> Claim:
    return next(c for c in load_claims() if c.id == claim_id)


def test_claims_table_loads_and_every_claim_names_a_known_check_and_seed():
    claims = load_claims()
    assert len(claims) >= 20
    assert {c.check for c in claims if c.check} <= set(CHECKS)
    assert all(c.check or c.untestable for c in claims)
    for c in claims:
        # a seed document, or the vendor's own published claim (its source named)
        assert re.fullmatch(r"\d{3}_[0-9a-f]{16}\.txt|ultralytics: .+", c.seed), c.seed
        assert c.unmeasurable
    # the four claims the issue names are in the table
    texts = " ".join(c.claim for c in claims)
    for phrase in (
        "prevent full YOLO26 export",
        "Dynamic shapes are blocked",
        "15-20 ms for yolo26n",
        "1-2 ms for yolo26n",
    ):
        assert phrase in texts


def test_claims_table_rejects_unknown_checks_and_select_keys(tmp_path):
    good = CLAIMS_FILE.read_text()
    bad_check = tmp_path / "a.yaml"
    bad_check.write_text(good.replace("check: fails", "check: vibes", 1))
    with pytest.raises(ValueError, match="unknown check 'vibes'"):
        load_claims(bad_check)
    bad_key = tmp_path / "b.yaml"
    bad_key.write_text(
        good.replace(
            "select: {backend: executorch-cuda, head: e2e, dynamic: false}", "select: {backnd: x}", 1
        )
    )
    with pytest.raises(ValueError, match="unknown select keys"):
        load_claims(bad_key)
    bad_needs = tmp_path / "c.yaml"
    bad_needs.write_text(
        good.replace("needs: {sizes: all, tasks: all}", "needs: {tasks: [detect, segment]}", 1)
    )
    with pytest.raises(ValueError, match=r"needs\.tasks"):
        load_claims(bad_needs)


def test_fails_confirmed_refuted_and_not_measurable():
    c = claim("fails", {"backend": "executorch-cuda"}, expect_any=["index_put"])
    failing = rec(
        "executorch-cuda",
        "cuda",
        "export_failed",
        cls="unsupported_op",
        message="Lowering not implemented for target: aten.index_put.default",
    )
    assert judge(c, [failing]).verdict == "confirmed"
    ok = rec("executorch-cuda", "cuda", "ok", p50=2.5, size="s")
    result = judge(c, [failing, ok])  # one cell agrees, another does not
    assert result.verdict == "partly" and "2.5" in result.evidence
    assert set(result.cells) == {failing.cell_id, ok.cell_id}
    assert judge(c, [ok]).verdict == "refuted"
    other = rec(
        "executorch-cuda", "cuda", "export_failed", cls="compile_error", message="NoValidChoicesError"
    )
    assert judge(c, [other]).verdict == "not measurable"
    missing = rec(
        "executorch-cuda", "cuda", "load_failed", cls="dependency_missing", message="no CUDA runtime"
    )
    assert judge(c, [missing]).verdict == "not measurable"
    skipped = rec("executorch-cuda", "cuda", "skipped", reason="no CUDA device: NVML unavailable")
    result = judge(c, [skipped])
    assert (
        result.verdict == "not measurable"
        and "no CUDA device" in result.evidence
        and "needs X" in result.evidence
    )
    assert judge(c, [rec("onnxruntime")]).verdict == "not measurable"


def test_latency_range_uses_the_claims_margin():
    c = claim(
        "latency_range",
        {"backend": "executorch-xnnpack", "shape": "640x640"},
        lo_ms=15,
        hi_ms=20,
        tolerance_pct=10,
    )
    assert judge(c, [rec("executorch-xnnpack", p50=21.5)]).verdict == "confirmed"
    result = judge(c, [rec("executorch-xnnpack", p50=41.0)])
    assert result.verdict == "refuted" and "41" in result.evidence
    two = judge(c, [rec("executorch-xnnpack", p50=17.0), rec("executorch-xnnpack", p50=41.0, size="s")])
    assert two.verdict == "partly"


def test_hardware_figures_are_judged_only_on_their_hardware_class_cpu_and_gpu():
    i7 = {"label": "Intel Core i7", "cpu_model": r"Core\(TM\) i7|Core i7"}
    c = claim("latency_range", {"backend": "executorch-xnnpack"}, {"hardware": i7}, lo_ms=15, hi_ms=20)
    slow = rec("executorch-xnnpack", p50=41.0)
    on_vm = judge(c, [slow], INTEL_VM)
    assert on_vm.verdict == "not comparable here"
    assert "Intel Core i7" in on_vm.evidence and "Xeon" in on_vm.evidence and "41" in on_vm.evidence
    assert judge(c, [slow], CORE_I7).verdict == "refuted"
    assert judge(c, [rec("executorch-xnnpack", p50=17.0)], CORE_I7).verdict == "confirmed"
    # nothing ran at all: not measurable (no figure to set aside either)
    skipped = rec("executorch-xnnpack", "cpu", "skipped", reason="excluded")
    assert judge(c, [skipped], INTEL_VM).verdict == "not measurable"
    a100 = {"label": "NVIDIA A100", "gpu": "A100"}
    gpu_claim = claim("latency_range", {"backend": "tensorrt"}, {"hardware": a100}, lo_ms=1, hi_ms=2)
    on_h100 = judge(
        gpu_claim, [rec("tensorrt", "cuda", p50=0.9)], {"gpu": [{"name": "NVIDIA H100 80GB HBM3"}]}
    )
    assert (
        on_h100.verdict == "not comparable here" and "H100" in on_h100.evidence and "0.9" in on_h100.evidence
    )
    on_a100 = judge(
        gpu_claim, [rec("tensorrt", "cuda", p50=0.9)], {"gpu": [{"name": "NVIDIA A100-SXM4-40GB"}]}
    )
    assert on_a100.verdict == "refuted"


def test_speedup_range_pairs_cells_of_the_same_workload_and_device():
    c = claim("speedup_range", {"backend": "openvino", "device": "cpu"}, baseline="torch-eager", lo=1.5)
    fast = rec("openvino", p50=17.0)
    assert judge(c, [fast]).verdict == "not measurable"  # no baseline
    assert (
        judge(c, [fast, rec("torch-eager", p50=80.0, shape="320")]).verdict == "not measurable"
    )  # other shape
    result = judge(c, [fast, rec("torch-eager", p50=80.0)])
    assert result.verdict == "confirmed" and "4.71×" in result.evidence
    assert judge(c, [rec("openvino", p50=70.0), rec("torch-eager", p50=80.0)]).verdict == "refuted"


def test_remedy_selection_and_backbone_claim():
    c = claim(
        "any_succeeds", {"backend": "executorch-cuda", "remedies": "only", "remedy_contains": "backbone"}
    )
    failing = rec("executorch-cuda", "cuda", "export_failed", cls="unsupported_op")
    remedy = copy.deepcopy(rec("executorch-cuda", "cuda", "ok", p50=1.9))
    remedy.cell_id, remedy.remedy, remedy.remedy_of = (
        failing.cell_id + "-remedy",
        "backbone-only",
        failing.cell_id,
    )
    assert judge(c, [failing]).verdict == "not measurable"
    assert judge(c, [failing, remedy]).verdict == "confirmed"
    remedy_failed = dataclasses.replace(
        remedy, status="run_failed", failure={"class": "runtime_error", "message": "boom"}
    )
    assert judge(c, [failing, remedy_failed]).verdict == "refuted"


def test_size_spread_and_fastest_export():
    def exported(backend, size_b, export_s, cache_hit=False):
        return rec(
            backend,
            backend.split("-")[1],
            "exported",
            artifact_bytes=size_b,
            export_s=export_s,
            cache_hit=cache_hit,
        )

    spread = claim("size_spread", {"backend": ["executorch-xnnpack", "executorch-vulkan"]}, max_spread_pct=10)
    fastest = claim(
        "fastest_export",
        {"backend": ["executorch-xnnpack", "executorch-vulkan"]},
        winner="executorch-xnnpack",
    )
    a, b = exported("executorch-xnnpack", 10_000_000, 25.0), exported("executorch-vulkan", 10_500_000, 58.0)
    assert judge(spread, [a, b]).verdict == "confirmed"
    assert judge(fastest, [a, b]).verdict == "confirmed"
    b2 = dataclasses.replace(b, artifact_bytes=14_000_000, export_s=12.0)
    assert judge(spread, [a, b2]).verdict == "refuted"
    assert judge(fastest, [a, b2]).verdict == "refuted"
    # a cache hit's export time is not an export time
    assert judge(fastest, [a, dataclasses.replace(b2, cache_hit=True)]).verdict == "not measurable"
    # another workload (other shape) is not compared
    other = exported("executorch-vulkan", 30_000_000, 5.0)
    other.height, other.width, other.cell_id = 320, 320, other.cell_id.replace("640x640", "320x320")
    assert judge(spread, [a, b, other]).verdict == "confirmed"


def test_every_claim_of_the_table_evaluates_on_empty_and_full_records():
    records = []
    for backend in ("torch-eager", "onnxruntime", "executorch-xnnpack", "tensorrt", "executorch-cuda"):
        records.append(rec(backend, "cuda" if backend in ("tensorrt", "executorch-cuda") else "cpu", p50=5.0))
    for records_ in ([], records):
        results = evaluate(index_runs([Run(Path("/x"), "t", {}, records_)]))
        assert len(results) == len(load_claims())
        assert all(r.verdict in VERDICTS for r in results)
        assert all(len(r.records) == len(r.cells) for r in results)
        assert all(r.evidence for r in results)
        json.dumps([r.as_dict() for r in results])
    assert set(RECORD_FIELDS) <= set(record_to_dict(records[0]))


# -- coverage the claims' words require -------------------------------------------------------------------------
def test_all_task_types_needs_every_task_and_all_models_every_size():
    c = table("xnnpack-full")
    assert c.needs == {"sizes": "all", "tasks": "all"}
    detect = [rec("executorch-xnnpack", p50=5.0, size=s) for s in "nsmlx"]
    partly = judge(c, detect)
    assert partly.verdict == "partly"  # eight detect cells do not confirm "all task types"
    assert "covered 5 of 25" in partly.coverage and "seg (every size)" in partly.coverage
    assert "tasks that ran in these runs: detect" in partly.coverage
    everything = [rec("executorch-xnnpack", p50=5.0, size=s, task=t) for s in "nsmlx" for t in TASKS]
    assert judge(c, everything).verdict == "confirmed"
    one_fails = [*everything[:-1], rec("executorch-xnnpack", "cpu", "export_failed", size="x", task="cls")]
    result = judge(c, one_fails)
    assert result.verdict == "partly" and "export_failed" in result.evidence
    failing = [
        rec("executorch-xnnpack", "cpu", "export_failed", size=s, cls="unsupported_op") for s in "nsmlx"
    ]
    assert judge(c, failing).verdict == "refuted"


def test_full_model_needs_zero_fallback_operators_and_unknown_is_not_zero():
    c = table("vulkan-full-model")
    base = dict(cls=None, artifact_bytes=10_000_000, export_s=50.0)

    def vulkan(ops):
        return rec("executorch-vulkan", "vulkan", "exported", ops=ops, **base)

    result = judge(c, [vulkan({"delegated": 491, "fallback": 12, "fallback_ops": ["aten_topk_default"]})])
    assert result.verdict == "refuted" and "12 of 503 ops not delegated" in result.evidence
    assert judge(c, [vulkan({"delegated": 503, "fallback": 0, "fallback_ops": []})]).verdict == "confirmed"
    unknown = judge(c, [vulkan(None)])
    assert unknown.verdict == "not measurable" and "fallback operators unknown" in unknown.evidence


def test_untestable_claims_say_so_whatever_ran():
    portable = table("onnx-portable")
    cells = [rec("onnxruntime", "cpu", p50=20.0), rec("onnxruntime", "cuda", p50=2.0)]
    result = judge(portable, cells)
    assert result.verdict == "untestable" and "own export" in result.evidence
    variant = table("index-dtype-fixed")
    failing = rec(
        "executorch-cuda", "cuda", "export_failed", cls="compile_error", message="NoValidChoicesError"
    )
    result = judge(variant, [failing])
    assert (
        result.verdict == "untestable"
        and "for context" in result.evidence
        and failing.cell_id in result.cells
    )
    # an ad-hoc claim that can be tested is judged: the untestable mark, not the check, makes the difference
    assert judge(claim("succeeds", {"backend": "onnxruntime"}), cells).verdict == "confirmed"
    assert judge(claim(None, {}, untestable="by design"), cells).verdict == "untestable"


def test_first_compile_call_is_judged_on_compile_time_not_first_run():
    c = table("compile-first-call")
    assert c.params["field"] == "compile_s"
    slow = rec("torch-compile", "cuda", p50=3.0, compile_s=44.0, first_run_ms=9.0)
    assert judge(c, [slow]).verdict == "confirmed"
    assert judge(c, [rec("torch-compile", "cuda", p50=3.0, compile_s=0.8)]).verdict == "refuted"
    # first_run_ms is taken after compiling: however large, it is not the compile time
    assert (
        judge(c, [rec("torch-compile", "cuda", p50=3.0, first_run_ms=46_500.0)]).verdict == "not measurable"
    )


def _rounds(center: float, n: int = 25) -> list[float]:
    return [round(center * (1 + 0.01 * ((k * 7) % 11 - 5) / 5), 4) for k in range(n)]


def test_openvino_intel_only_needs_both_vendors():
    c = table("openvino-intel-only")

    def pair(ov: float, ort: float) -> list[CellRecord]:
        return [rec("openvino", samples=_rounds(ov)), rec("onnxruntime", samples=_rounds(ort))]

    holds = judge_runs(c, [(INTEL_VM, pair(15.0, 20.0)), (AMD, pair(30.0, 20.0))])
    assert holds.verdict == "confirmed" and "covered 2 of 2" in holds.coverage
    assert {r["run"] for r in holds.records} == {0, 1}
    # a tie on AMD (overlapping intervals) also agrees: OpenVINO does not benefit there
    assert judge_runs(c, [(INTEL_VM, pair(15.0, 20.0)), (AMD, pair(20.0, 20.05))]).verdict == "confirmed"
    benefits_amd_too = judge_runs(c, [(INTEL_VM, pair(15.0, 20.0)), (AMD, pair(12.0, 20.0))])
    assert benefits_amd_too.verdict == "partly" and "openvino faster" in benefits_amd_too.evidence
    reversed_ = judge_runs(c, [(INTEL_VM, pair(25.0, 20.0)), (AMD, pair(12.0, 20.0))])
    assert reversed_.verdict == "refuted"
    only_intel = judge_runs(c, [(INTEL_VM, pair(15.0, 20.0))])
    assert only_intel.verdict == "not measurable" and "only Intel CPUs were measured" in only_intel.evidence
    too_few = judge_runs(
        c,
        [
            (INTEL_VM, [*pair(15.0, 20.0)[:1], rec("onnxruntime", samples=[20.0] * 3)]),
            (AMD, pair(30.0, 20.0)),
        ],
    )
    assert too_few.verdict == "partly"  # the Intel pair cannot be told apart with 3 rounds: not covered


def test_every_verdict_links_to_its_records():
    c = claim("any_succeeds", {"backend": "executorch-cuda", "remedies": "include"})
    failing = rec("executorch-cuda", "cuda", "export_failed", cls="unsupported_op")
    remedy = copy.deepcopy(rec("executorch-cuda", "cuda", "ok", p50=1.9))
    remedy.cell_id = failing.cell_id + "+backbone-only"
    remedy.remedy, remedy.remedy_of = "backbone-only", failing.cell_id
    result = judge(c, [failing, remedy])
    assert result.verdict == "confirmed" and result.cells == (remedy.cell_id,)
    (link,) = result.records
    # a remedy attempt is shown in the entry of the cell it remedies
    assert link == {"run": 0, "cell_id": remedy.cell_id, "anchor": f"cell-0-{failing.cell_id}"}


# -- the committed default run --------------------------------------------------------------------------------
def test_default_run_claims_no_longer_mislead():
    assert DEFAULT_RUN.is_dir(), f"the committed default run is missing: {DEFAULT_RUN}"
    results = {r.id: r for r in evaluate(index_runs(load_run(DEFAULT_RUN)))}
    # eight detect-only xnnpack cells do not confirm "all models, all task types"
    assert results["xnnpack-full"].verdict == "partly" and "seg" in results["xnnpack-full"].coverage
    # 12 undelegated nodes (topk, max, remainder) are not "the full model"
    vulkan = results["vulkan-full-model"]
    assert vulkan.verdict == "refuted" and "12 of 503 ops not delegated" in vulkan.evidence
    # an Intel Core i7 figure is not refuted by a shared 2-core Xeon VM
    for cid in ("xnnpack-latency-n", "xnnpack-latency-s", "xnnpack-latency-m"):
        assert results[cid].verdict == "not comparable here", (cid, results[cid].evidence)
        assert "Xeon" in results[cid].evidence
    assert results["onnx-portable"].verdict == "untestable"
    assert results["openvino-intel-only"].verdict == "not measurable"
    assert all(r.cells for r in results.values() if r.verdict in ("confirmed", "partly", "refuted"))
