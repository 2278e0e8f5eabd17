"""`check` across runs: a CUDA export traced on a fake device against the same cell's real export on a GPU.

A record traced on a CPU machine (status traced or trace_failed, harness.backends._shared.fake_cuda) stands for the
export of its cell up to the step that needs a GPU. When a GPU run holds the same cell (its id and its remedy), the
two must agree on what the trace covers: a trace that failed names the failure class and operators the GPU export
failed with; a trace that reached its stop means the GPU export got at least that far (it was exported, loaded or
ran, or failed at or after that step). Anything else is named, with both records' words.
"""

from __future__ import annotations

from harness.check.relations import Finding
from harness.core.record import TRACED_STATUSES, CellRecord

RELATION = "fake-vs-gpu"
DESCRIPTION = (
    "a CUDA export traced on a fake device agrees with the same cell's export on a GPU: the same failure class and "
    "operators, or both past the trace's stop"
)
#: failure classes of steps at or after the trace's stop (autotuning and compiling kernels, running them); a
#: compile_error that is a LoweringException happened in the lowering, which the trace covers
AFTER_STOP = ("compile_error", "runtime_error", "timeout", "killed", "crash", "out_of_memory")
#: GPU statuses of an export that got past the trace's stop
PAST_EXPORT = ("ok", "exported", "load_failed", "run_failed", "parity_failed")


def _failure(rec: CellRecord) -> tuple[str | None, tuple[str, ...]]:
    f = rec.failure if isinstance(rec.failure, dict) else {}
    return f.get("class"), tuple(sorted(str(op) for op in (f.get("ops") or [])))


def _words(rec: CellRecord) -> str:
    cls, ops = _failure(rec)
    said = rec.status + (f" ({cls}" + (f": {', '.join(ops)}" if ops else "") + ")" if cls else "")
    return said


def disagreement(fake: CellRecord, gpu: CellRecord) -> str | None:
    """What the GPU export did that the fake trace did not say, or None when they agree."""
    if fake.status == "trace_failed":
        if gpu.status == "export_failed" and _failure(gpu) == _failure(fake):
            return None
        return f"traced on a fake device: {_words(fake)}; on the GPU: {_words(gpu)}"
    if gpu.status in PAST_EXPORT:
        return None
    message = str((gpu.failure or {}).get("message") or "")
    if (
        gpu.status == "export_failed"
        and _failure(gpu)[0] in AFTER_STOP
        and "LoweringException" not in message
    ):
        return None  # failed at or after the step where the trace stops: outside what it covers
    stop = (fake.fake_device or {}).get("stopped_at") or "its stop"
    return f"traced on a fake device up to {stop}; on the GPU: {_words(gpu)} before it"


def compare(runs: list[tuple[str, list[CellRecord]]]) -> list[tuple[str, Finding]]:
    """(GPU run label, finding) for each cell traced on a fake device in one run and exported on a GPU in another,
    where the two disagree."""
    fakes = {(r.cell_id, r.remedy): r for _, records in runs for r in records if r.status in TRACED_STATUSES}
    out = []
    for label, records in runs:
        for gpu in records:
            if gpu.status in (*TRACED_STATUSES, "skipped") or gpu.fake_device is not None:
                continue
            fake = fakes.get((gpu.cell_id, gpu.remedy))
            if fake is None:
                continue
            said = disagreement(fake, gpu)
            if said:
                out.append((label, Finding(gpu.cell_id, RELATION, said)))
    return out
