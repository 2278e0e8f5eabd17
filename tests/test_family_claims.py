"""The vendor's YOLO26-against-YOLO11 CPU claims (claims.yaml, harness.report.claim_families) on hand-made records
(synthetic: every figure injected): "up to 43% faster" confirmed where the paired speedup reaches 1.43x and refuted
where it stays below, model-only and end to end read from their own ratios, 8 threads not measurable on a 2-core
machine with that reason, the published size ratios agreeing and not, and no seed claim judging a YOLO11 record."""

from __future__ import annotations

from harness.report.claims import evaluate, load_claims
from tests.family_records import ENV, indexes, pair, record

MODEL, E2E = "yolo26n-vs-yolo11n-cpu-model", "yolo26n-vs-yolo11n-cpu-e2e"
MODEL_8, E2E_8 = "yolo26n-vs-yolo11n-cpu-model-8-threads", "yolo26n-vs-yolo11n-cpu-e2e-8-threads"
SIZES = "yolo26-vs-yolo11-cpu-size-ratios"


def verdicts(*records, env=None) -> dict:
    claims = [c for c in load_claims() if "yolo11" in c.id or c.id == "xnnpack-latency-n"]
    return {r.id: r for r in evaluate(indexes(*records, env=env), claims)}


def test_the_43_percent_claim_confirmed_where_the_speedup_reaches_it_and_refuted_where_not():
    # model-only 1.6x faster on both backends (the claim's 1.43x reached); end to end only 1.1x
    recs = [*pair("onnxruntime", 25.0, 40.0, 30.0, 33.0), *pair("openvino", 20.0, 32.0, 25.0, 27.5)]
    got = verdicts(*recs)
    assert got[MODEL].verdict == "confirmed", got[MODEL].evidence
    assert "1.60× [1.57-1.63]" in got[MODEL].evidence and "Intel Xeon CPU @ 2.00 GHz" in got[MODEL].evidence
    assert got[E2E].verdict == "refuted", got[E2E].evidence
    assert "end to end, YOLO11 with its NMS" in got[E2E].evidence
    # the other way round: one backend reaches it, one does not
    recs = [*pair("onnxruntime", 25.0, 40.0, 30.0, 33.0), *pair("openvino", 30.0, 32.0, 25.0, 27.5)]
    assert verdicts(*recs)[MODEL].verdict == "partly"
    # an interval too wide to tell (it holds both 1 and 1.43x: a loaded machine's few trials) says nothing
    wide = pair("onnxruntime", 25.0, 30.0, 30.0, 33.0, half_width=0.45)
    got = verdicts(*wide)[MODEL]
    assert got.verdict == "not measurable" and "holds 1 too" in got.evidence
    # an interval that reaches the claim around a speedup short of it (1.2x [1.07-1.36]) says nothing either
    short = pair("onnxruntime", 25.0, 30.0, 30.0, 33.0, half_width=0.12)
    got = verdicts(*short)[MODEL]
    assert got.verdict == "not measurable" and "the measured 1.20× is short of it" in got.evidence


def test_eight_threads_are_not_measurable_on_two_cores_and_judged_where_the_records_ran_them():
    recs = pair("onnxruntime", 25.0, 40.0, 30.0, 45.0)
    got = verdicts(*recs)
    assert got[MODEL_8].verdict == got[E2E_8].verdict == "not measurable"
    assert "AMD EPYC has 2 physical cores: 8 threads would oversubscribe it" in got[MODEL_8].evidence
    assert "8 intra-op threads" in got[MODEL_8].evidence
    big = {**ENV, "threads": {"budget": 8, "physical_cores": 16}}
    got = verdicts(*pair("onnxruntime", 25.0, 40.0, 30.0, 45.0, threads=8), env=big)
    assert got[MODEL_8].verdict == "confirmed" and got[E2E_8].verdict == "confirmed"


def test_published_size_ratios_against_this_machines():
    # published n: 38.9 / 56.1 = 0.69x, s: 87.2 / 90.0 = 0.97x
    agree = [
        *pair("onnxruntime", 27.7, 40.0, 30.0, 45.0),
        *pair("onnxruntime", 58.0, 60.0, 62.0, 66.0, size="s"),
    ]
    got = verdicts(*agree)[SIZES]
    assert got.verdict == "confirmed", got.evidence
    assert "sizes not measured here" in got.evidence and "m 1.20×" in got.evidence
    disagree = [
        *pair("onnxruntime", 40.0, 40.0, 45.0, 45.0),
        *pair("onnxruntime", 80.0, 60.0, 90.0, 66.0, size="s"),
    ]
    assert verdicts(*disagree)[SIZES].verdict == "refuted"
    # n measured at 0.69x but +-50%: it holds 1, so it cannot tell that YOLO26n is faster, as published
    wide = pair("onnxruntime", 27.7, 40.0, 30.0, 45.0, half_width=0.5)
    assert verdicts(*wide)[SIZES].verdict == "not measurable"


def test_a_seed_claim_about_yolo26_never_judges_a_yolo11_record():
    alone = record("yolo11", "executorch-xnnpack", 17.0, 20.0)
    assert verdicts(alone)["xnnpack-latency-n"].verdict == "not measurable"
    assert verdicts(alone)[MODEL].verdict == "not measurable"
