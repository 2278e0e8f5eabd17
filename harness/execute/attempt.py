"""One cell timed alone, end to end: its attempt through the stages (harness.execute.stages), the remedy ladder for
a failure (harness.execute.ladder), and the shape sweep of a dynamic artifact. Each attempt's record is written as
soon as it finishes (harness.execute.recording). The cells of a workload are timed together instead
(harness.execute.workload), which goes on here for their remedies.
"""

from __future__ import annotations

from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.record import FAILED_STATUSES, REMEDIABLE_STATUSES, CellRecord, set_null
from harness.diagnosis.outcome import ExportOutcome
from harness.execute.ladder import climb
from harness.execute.recording import crashed, finish, start
from harness.execute.services import RunServices, RunState
from harness.execute.stages import Pipeline
from harness.execute.state import Attempt


def run_attempt(a: Attempt, services: RunServices, run: RunState, stages: Pipeline) -> CellRecord:
    """Run the stages of one attempt and write its record; returns it as written."""
    s = start(a, services.config.run_id, services.config.run_dir)
    try:
        stages.run(s)
    except Exception as e:  # a harness bug in one cell must not lose the run
        crashed(s, e)
    rec = finish(s, services.writer)
    run.check_stop()
    return rec


def run_cell_all(
    cell: Cell, skip_reason: str | None, services: RunServices, run: RunState, stages: Pipeline
) -> list[CellRecord]:
    """Every record `cell` produces, timed alone: its own first, then remedy attempts and dynamic sweep shapes."""
    if cell.shape.dynamic and not skip_reason:
        return dynamic(cell, services, run, stages)
    rec = run_attempt(Attempt(cell, cell.id, skip_reason=skip_reason), services, run, stages)
    return [rec, *remedies(cell, rec, services, run, stages)]


def remedies(
    cell: Cell, rec: CellRecord, services: RunServices, run: RunState, stages: Pipeline
) -> list[CellRecord]:
    """The remedy attempts of a cell whose attempt failed (harness.execute.ladder), each timed alone."""
    if rec.status not in REMEDIABLE_STATUSES or not services.config.remedies or run.stop_reason:
        return []

    def try_remedy(a: Attempt) -> tuple[list[CellRecord], bool]:
        r = run_attempt(a, services, run, stages)
        services.progress(f"{rec.cell_id}: remedy {r.remedy}: {r.status}")
        return [r], r.status in ("ok", "traced")

    return climb(cell, rec, try_remedy)


# -- the dynamic probe ----------------------------------------------------------------------------------------------
def dynamic(cell: Cell, services: RunServices, run: RunState, stages: Pipeline) -> list[CellRecord]:
    """Export once with dynamic H/W over the range, then run that one artifact over the shape sweep.

    When the dynamic export fails, the ladder applies matching remedies (32*Dim, raw head, ...) cumulatively,
    and the first remedied artifact that exports is swept instead.
    """
    base = {"dynamic_range": list(services.config.dynamic_range)}
    recs = dynamic_attempt(Attempt(cell, cell.id, export_options=base), services, run, stages)
    # a fake-device trace fails its export as a GPU one would
    export_failed = ("export_failed", "trace_failed")
    if recs[0].status not in export_failed or not services.config.remedies:
        return recs

    def try_remedy(a: Attempt) -> tuple[list[CellRecord], bool]:
        a.export_options = {**base, **a.export_options}
        out = dynamic_attempt(a, services, run, stages)
        return out, out[0].status not in export_failed

    return [*recs, *climb(cell, recs[0], try_remedy, dynamic=True)]


def dynamic_attempt(a: Attempt, services: RunServices, run: RunState, stages: Pipeline) -> list[CellRecord]:
    """The dynamic export of `a` (its own record, summarising the sweep), then one record per sweep shape."""
    s = start(a, services.config.run_id, services.config.run_dir)
    try:
        if not (stages.advance(s, until="probe")):
            rec = finish(s, services.writer)
            run.check_stop()
            return [rec]
    except Exception as e:
        crashed(s, e)
        return [finish(s, services.writer)]
    sweep_recs, shapes = sweep(a, s.outcome, services, run, stages)
    summarise_sweep(s.rec, sweep_recs, shapes)
    return [finish(s, services.writer), *sweep_recs]


#: one sweep shape's line in its dynamic cell's summary: (side, status, how it ran when not directly)
SweepShape = tuple[int, str, str | None]


def sweep(
    a: Attempt, outcome: ExportOutcome | None, services: RunServices, run: RunState, stages: Pipeline
) -> tuple[list[CellRecord], list[SweepShape]]:
    """Run one dynamic artifact at each sweep shape; a shape that is not a multiple of 32 and fails is
    retried letterbox-padded to the next multiple of 32 (the ladder's padding remedy). Returns every record (each
    shape's, then its padded attempts) and each shape's summary line."""
    recs: list[CellRecord] = []
    shapes: list[SweepShape] = []
    for side in services.config.sweep:
        target = a.cell.with_(shape=Shape(side, side, dynamic=True))
        rid = target.id + (f"+{a.remedy}" if a.remedy else "")
        shape_attempt = Attempt(
            target, rid, a.remedy, a.remedy_of, a.export_options, export_cell=a.cell, prebuilt=outcome
        )
        rec = run_attempt(shape_attempt, services, run, stages)
        recs.append(rec)
        line = len(shapes)
        shapes.append((side, rec.status, None))
        if rec.status in FAILED_STATUSES and services.config.remedies and not target.shape.multiple_of_32:

            def try_padded(
                pa: Attempt, line=line, shape_attempt=shape_attempt, side=side
            ) -> tuple[list[CellRecord], bool]:
                pa.remedy = f"{shape_attempt.remedy}+{pa.remedy}" if shape_attempt.remedy else pa.remedy
                pa.export_options, pa.export_cell, pa.prebuilt = a.export_options, a.cell, outcome
                r = run_attempt(pa, services, run, stages)
                shapes[line] = (side, r.status, f"padded to {r.height}")
                return [r], True

            recs += climb(
                target, rec, try_padded, dynamic=True, select=lambda r: "pad_to" in r.change, max_chain=1
            )
    return recs, shapes


def summarise_sweep(rec: CellRecord, sweep: list[CellRecord], shapes: list[SweepShape]) -> None:
    """The dynamic cell's own record: ok when every sweep shape ran (directly, or letterbox-padded)."""
    parts = [f"{s}: {st}{f' ({via})' if via else ''}" for s, st, via in shapes]
    rec.reason = "dynamic artifact swept over " + ", ".join(parts)
    failed = [s for s, st, _ in shapes if st != "ok"]
    rec.status = "ok" if not failed else "run_failed"
    if failed:
        first = next(r for r in sweep if r.status != "ok")
        rec.failure = dict(first.failure or {}, message=f"failed at {failed}: {first.reason}")
    set_null(rec, "latency_ms", "dynamic probe: latency is in the per-shape sweep records")
