"""The claims table and its predicates, on small hand-built records shaped like the runner's."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.record import RECORD_FIELDS, new_record
from harness.core.results_dir import Run
from harness.report.claims import CHECKS, CLAIMS_FILE, Claim, evaluate, load_claims
from harness.report.index import index_runs

REPO = Path(__file__).resolve().parent.parent
SEED_DIRS = [REPO / "shared" / "seeds", REPO.parent / "shared" / "seeds"]


def rec(
    backend: str,
    device: str = "cpu",
    status: str = "ok",
    p50: float | None = None,
    shape: str = "640",
    size: str = "n",
    cls: str | None = None,
    message: str = "",
    **extra,
) -> dict:
    r = new_record("t", Cell(size, "detect", "e2e", backend, device, Shape.parse(shape)), "random-init:0")
    r.update(status=status, **extra)
    if p50 is not None:
        r["latency_ms"] = {
            "p50": p50,
            "p90": p50,
            "p99": p50,
            "mean": p50,
            "min": p50,
            "max": p50,
            "stdev": 0.0,
            "rounds": 10,
            "timing_scope": "model only",
        }
    if cls or status not in ("ok", "skipped", "exported"):
        r["failure"] = {"class": cls, "stage": "export", "message": message, "ops": [], "guards": []}
    return r


def judge(claim: Claim, records: list[dict], env: dict | None = None):
    run = Run(path=Path("/nonexistent"), run_id="t", env=env or {}, records=records)
    (result,) = evaluate(index_runs([run]), [claim])
    return result


def claim(check: str, select: dict, **params) -> Claim:
    return Claim("c", "000_fda80f2472077657.txt", "a claim", check, select, params, "needs X")


def test_claims_table_loads_and_every_claim_names_a_known_check_and_seed():
    claims = load_claims()
    assert len(claims) >= 20
    assert {c.check for c in claims} <= set(CHECKS)
    for c in claims:
        assert re.fullmatch(r"\d{3}_[0-9a-f]{16}\.txt", c.seed), c.seed
        assert c.unmeasurable
    seeds = next((d for d in SEED_DIRS if d.is_dir()), None)
    if seeds is not None:
        assert {c.seed for c in claims} <= {p.name for p in seeds.iterdir()}
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
        good.replace("select: {backend: executorch-cuda, dynamic: false}", "select: {backnd: x}", 1)
    )
    with pytest.raises(ValueError, match="unknown select keys"):
        load_claims(bad_key)


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
    ok = rec("executorch-cuda", "cuda", "ok", p50=2.5)
    result = judge(c, [failing, ok])
    assert result.verdict == "refuted" and "2.5" in result.evidence
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


def test_latency_range_uses_the_claims_margin_and_hardware():
    c = claim(
        "latency_range",
        {"backend": "executorch-xnnpack", "shape": "640x640"},
        lo_ms=15,
        hi_ms=20,
        tolerance_pct=10,
        hardware="Intel Core i7",
    )
    assert judge(c, [rec("executorch-xnnpack", p50=21.5)]).verdict == "confirmed"
    result = judge(c, [rec("executorch-xnnpack", p50=41.0)], {"host": {"cpu_model": "Xeon 8375C"}})
    assert result.verdict == "refuted" and "41" in result.evidence and "Xeon 8375C" in result.evidence
    gpu_claim = claim("latency_range", {"backend": "tensorrt"}, lo_ms=1, hi_ms=2, gpu_contains="A100")
    on_h100 = judge(
        gpu_claim, [rec("tensorrt", "cuda", p50=0.9)], {"gpu": [{"name": "NVIDIA H100 80GB HBM3"}]}
    )
    assert on_h100.verdict == "not measurable" and "H100" in on_h100.evidence and "0.9" in on_h100.evidence
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
    remedy.update(
        cell_id=failing["cell_id"] + "-remedy", remedy="backbone-only", remedy_of=failing["cell_id"]
    )
    assert judge(c, [failing]).verdict == "not measurable"
    assert judge(c, [failing, remedy]).verdict == "confirmed"
    remedy_failed = dict(remedy, status="run_failed", failure={"class": "runtime_error", "message": "boom"})
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
    b2 = dict(b, artifact_bytes=14_000_000, export_s=12.0)
    assert judge(spread, [a, b2]).verdict == "refuted"
    assert judge(fastest, [a, b2]).verdict == "refuted"
    # a cache hit's export time is not an export time
    assert judge(fastest, [a, dict(b2, cache_hit=True)]).verdict == "not measurable"
    # another workload (other shape) is not compared
    other = exported("executorch-vulkan", 30_000_000, 5.0)
    other.update(height=320, width=320, cell_id=other["cell_id"].replace("640x640", "320x320"))
    assert judge(spread, [a, b, other]).verdict == "confirmed"


def test_every_claim_of_the_table_evaluates_on_empty_and_full_records():
    records = []
    for backend in ("torch-eager", "onnxruntime", "executorch-xnnpack", "tensorrt", "executorch-cuda"):
        records.append(rec(backend, "cuda" if backend in ("tensorrt", "executorch-cuda") else "cpu", p50=5.0))
    for records_ in ([], records):
        results = evaluate(index_runs([Run(Path("/x"), "t", {}, records_)]))
        assert len(results) == len(load_claims())
        assert all(r.verdict in ("confirmed", "refuted", "not measurable") for r in results)
        assert all(r.evidence for r in results)
        json.dumps([r.as_dict() for r in results])
    assert set(RECORD_FIELDS) <= set(records[0])
