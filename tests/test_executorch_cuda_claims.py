"""The seed claims about ExecuTorch CUDA (CUDA AOTI) get verdicts from export records, both ways: index_put and
topk not lowerable, the dynamic-shape guard, the backbone-only remedy.

The records are what benchmarks/gpu_check.py writes for the GPU kit's ExecuTorch exports
(harness.execute.export_records: `exported`, or the failure status with the classified failure), built here from
export outcomes whose messages are quoted from the seed documents (tests/data/quoted: the project never reads the
seeds beside the checkout). The claims are the table's own (harness/report/claims.yaml)."""

from __future__ import annotations

import re
from pathlib import Path

from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.results_dir import Run
from harness.decide.index import index_runs
from harness.diagnosis.outcome import ExportOutcome
from harness.execute.export_records import export_record
from harness.report.claims import evaluate, load_claims

QUOTED = Path(__file__).resolve().parent / "data" / "quoted"
CELL = Cell("n", "detect", "e2e", "executorch-cuda", "cuda", Shape(640, 640))
NOT_RUN = "the installed ExecuTorch runtime has no CudaBackend (registered: XnnpackBackend)"


def _seed(prefix: str) -> str:
    (path,) = QUOTED.glob(f"seed_{prefix}_*.txt")
    return path.read_text(encoding="utf-8")


def quoted_block(prefix: str, needle: str) -> str:
    """The fenced block of a quoted seed document that holds `needle`, as the document quotes it."""
    for block in re.findall(r"```[^\n]*\n(.*?)```", _seed(prefix), re.DOTALL):
        if needle in block:
            return block.strip()
    raise AssertionError(f"{needle!r} is not quoted in seed {prefix}")


#: the seeds' index_put lowering error, as quoted (seed 000, "Problem 1")
INDEX_PUT = quoted_block("000", "Lowering not implemented for backend: CudaDevice")
#: the seeds quote no error text for topk, only the operator among those that "fail in CUDA AOTI" (seed 000):
#: the same lowering error with the seed's topk operator in it
TOPK_OP = next(
    line.split()[0] for line in quoted_block("000", "aten.topk.default").splitlines() if "topk" in line
)
TOPK = INDEX_PUT.replace("aten.index_put.default", TOPK_OP)
#: the seeds' dynamic-shape guard error (seed 000, "Problem 2")
GUARD = quoted_block("000", "Constraints violated (height, width)!")
#: Triton autotuning with no valid choice (seed 001), past the index fix
NO_CHOICES = quoted_block("001", "NoValidChoicesError")


def failed(message: str, exc: str) -> ExportOutcome:
    return ExportOutcome(
        "export_failed", 40.0, message=message, exception_type=exc, traceback=message, wall_s=41.0
    )


def exported(ops: dict | None = None) -> ExportOutcome:
    info = {
        "ops": ops or {"delegated": 540, "fallback": 0, "fallback_ops": []},
        "phase_s": {"torch.export": 3.0},
    }
    return ExportOutcome("ok", 120.0, artifact="/nonexistent/model", info=info, wall_s=121.0)


def full(outcome: ExportOutcome, cell: Cell = CELL):
    return export_record(
        cell, outcome, "r", "random-init:0", not_run=NOT_RUN if outcome.status == "ok" else None
    )


def backbone(outcome: ExportOutcome):
    return export_record(
        CELL, outcome, "r", "random-init:0", remedy="backbone-only", remedy_of=CELL.id, not_run=NOT_RUN
    )


def verdicts(records) -> dict[str, str]:
    results = evaluate(index_runs([Run(Path("/x"), "r", {}, records)]), load_claims())
    return {r.id: r.verdict for r in results}


def test_the_quoted_messages_are_the_seeds():
    assert "torch._inductor.exc.LoweringException" in INDEX_PUT and "aten.index_put.default" in INDEX_PUT
    assert TOPK_OP == "aten.topk.default"
    assert "Constraints violated (height, width)!" in GUARD and "NoValidChoicesError" in NO_CHOICES


def test_export_records_carry_the_status_class_and_operators():
    rec = full(failed(INDEX_PUT, "torch._inductor.exc.LoweringException"))
    assert rec.status == "export_failed" and rec.failure["class"] == "unsupported_op"
    assert (
        "aten.index_put.default" in " ".join(map(str, rec.failure.get("ops") or [])) + rec.failure["message"]
    )
    ok = backbone(exported())
    assert ok.status == "exported" and ok.reason == NOT_RUN and ok.ops["delegated"] == 540
    assert (
        ok.cell_id == f"{CELL.id}+backbone-only" and ok.remedy_of == CELL.id and ok.remedy == "backbone-only"
    )


def test_the_claims_confirmed_the_full_model_fails_on_index_put_and_the_backbone_exports():
    got = verdicts([full(failed(INDEX_PUT, "torch._inductor.exc.LoweringException")), backbone(exported())])
    assert got["aoti-full-model"] == "confirmed"
    assert got["aoti-postprocess-ops"] == "confirmed"
    # exported counts: the runtime cannot run it, the claim is about the export
    assert got["aoti-backbone-only"] == "confirmed"
    assert got["cuda-pte-runs"] == "not measurable"  # nothing got past export
    # topk, the seeds' other operator, confirms the operator claim the same way
    topk = verdicts([full(failed(TOPK, "torch._inductor.exc.LoweringException"))])
    assert topk["aoti-postprocess-ops"] == "confirmed"


def test_the_claims_refuted_the_full_model_exports_and_the_backbone_does_not():
    got = verdicts(
        [full(exported()), backbone(failed(NO_CHOICES, "torch._inductor.exc.NoValidChoicesError"))]
    )
    assert got["aoti-full-model"] == "refuted"
    assert got["aoti-postprocess-ops"] == "refuted"
    assert got["aoti-backbone-only"] == "refuted"
    # another failure of the full model (autotuning with no valid choice) says nothing about index_put or topk
    other = verdicts([full(failed(NO_CHOICES, "torch._inductor.exc.NoValidChoicesError"))])
    assert (
        other["aoti-postprocess-ops"] == "not measurable" and other["triton-no-valid-choices"] == "confirmed"
    )


def test_the_dynamic_shape_guard_both_ways_on_aotinductors_dynamic_probe():
    """The guard comes from torch.export, before lowering: the kit's AOTInductor dynamic probe on CUDA meets it."""
    probe = Cell("n", "detect", "e2e", "aoti", "cuda", Shape(0, 0, True))
    blocked = full(failed(GUARD, "torch._dynamo.exc.UserError"), probe)
    assert blocked.failure["class"] == "guard_violation"
    assert verdicts([blocked])["aoti-dynamic-blocked"] == "confirmed"
    assert verdicts([full(exported(), probe)])["aoti-dynamic-blocked"] == "refuted"
    cpu = Cell("n", "detect", "e2e", "aoti", "cpu", Shape(0, 0, True))  # a CPU export is not the claim
    assert verdicts([full(failed(GUARD, "torch._dynamo.exc.UserError"), cpu)])["aoti-dynamic-blocked"] == (
        "not measurable"
    )
