"""Which paired ratios a run's records hold stand: a pair is two cells timed in one interleaved timing session.

A record's `paired` (its p50 over its workload's reference's, and over each other cell of its timing, under
`others`) is measured from blocks of rounds that ran side by side (harness.measure.interleave). Its partner's
record is another line of the same cells.jsonl, and need not come from that timing: a run killed after one cell's
record was written, then `--resume`d, re-times the missing cells in another process, and the kept record's ratio
then names a partner whose record holds other rounds altogether (ONNX Runtime 1.151 x OpenVINO by the killed
run's timing, against p50s of 29.66 and 15.53 ms in the records, 0.524 the other way).

Each interleaved timing has its own id, `timing.session` in the records of its cells
(harness.measure.interleave.Interleaved.session). When records are read (harness.core.results_dir.read_records),
an entry whose partner's record in the same file holds another session is no pair: it is dropped, with why under
`null_reasons`, and readers compare those two cells by their separate p50s, as any cells not timed together
(harness.decide.paired). A partner with no record in the file (a cell killed before its record was written) leaves
the entry as it is: nothing contradicts it. Records written before sessions existed hold none: two such records
stand as paired (what they recorded), one with a session and one without do not.
"""

from __future__ import annotations

from typing import Any

from harness.core.record import CellRecord, set_null

#: why an entry of `paired` was dropped when the records were read
NOT_A_PAIR = (
    "{partner} was timed in another interleaved timing session than this cell (timing.session differs: a --resume "
    "re-timed one of them in another process): their rounds did not run side by side, so the ratio is no pair; "
    "compared by their separate p50s"
)


def timing_session(rec: CellRecord) -> str | None:
    """The id of the interleaved timing the record's rounds came from (`timing.session`), or None (timed before
    sessions were recorded, or not timed)."""
    timing = rec.timing
    session = timing.get("session") if isinstance(timing, dict) else None
    return session if isinstance(session, str) else None


def timed_together(a: CellRecord, b: CellRecord) -> bool:
    """Whether the two records' rounds come from one interleaved timing (both from before sessions: taken as so)."""
    return timing_session(a) == timing_session(b)


def _stands(rec: CellRecord, partner: Any, sessions: dict[str, set[str | None]]) -> bool:
    """Whether `rec`'s entry for `partner` is a pair: the partner is itself, has no record here, or has one of
    its timing session."""
    mine = timing_session(rec)
    return partner == rec.cell_id or mine in sessions.get(str(partner), {mine})


def _drop_e2e(records: list[CellRecord], sessions: dict[str, set[str | None]]) -> None:
    """The same for `paired_e2e` (the end-to-end rounds ran in the same process as the model-only ones, right
    after them: the timing session stands for both): an entry whose partner holds another session goes, with why,
    and the section when none is left."""
    for r in records:
        p = r.paired_e2e
        others = p.get("others") if isinstance(p, dict) else None
        if not isinstance(others, dict):
            continue
        broken = [k for k in others if not _stands(r, k, sessions)]
        if not broken:
            continue
        kept = {k: v for k, v in others.items() if k not in broken}
        r.paired_e2e = {**p, "others": kept} if kept else None
        for k in broken:
            set_null(r, f"paired_e2e.others.{k}", NOT_A_PAIR.format(partner=k))


def drop_cross_session_pairs(records: list[CellRecord]) -> None:
    """Drop from each record's `paired` (and `paired_e2e`) every entry whose partner's records in `records` all
    hold another timing session (in place; the reason under `null_reasons`). The reference's ratio becomes null;
    an entry of `others` goes; `paired` itself becomes null when nothing of it stands."""
    sessions: dict[str, set[str | None]] = {}
    for r in records:
        sessions.setdefault(r.cell_id, set()).add(timing_session(r))
    _drop_e2e(records, sessions)
    for r in records:
        p = r.paired
        if not isinstance(p, dict):
            continue
        reference, others = p.get("reference"), p.get("others")
        broken_ref = p.get("ratio") is not None and not _stands(r, reference, sessions)
        broken = [k for k in others if not _stands(r, k, sessions)] if isinstance(others, dict) else []
        if not broken_ref and not broken:
            continue
        kept = {**p}
        reasons = {}
        if broken_ref:
            kept.update(ratio=None, ratio_ci=None)
            reasons["paired.ratio"] = NOT_A_PAIR.format(partner=f"the reference {reference}")
        if broken:
            kept["others"] = {k: v for k, v in others.items() if k not in broken}
            reasons.update({f"paired.others.{k}": NOT_A_PAIR.format(partner=k) for k in broken})
        if not kept.get("others") and (kept.get("ratio") is None or reference == r.cell_id):
            # nothing stands but, for the reference, its ratio of 1 to itself
            r.paired = None
            set_null(r, "paired", NOT_A_PAIR.format(partner="every cell it was paired with"))
            continue
        r.paired = kept
        for key, why in reasons.items():
            set_null(r, key, why)
