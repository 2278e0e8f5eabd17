"""`check` on what a run's records file itself says: lines the reading rule skipped, and a cell recorded twice.

A line of cells.jsonl that is unreadable or does not fit the record schema (harness.core.results_dir's reading rule:
an unknown status, an axis value the harness does not know, a figure that is text) is skipped by every reader and
named here as a finding, so a run that lost records says so in check's output and exit status as in the report's
notes. A cell recorded more than once (two writers on one run id, an edited file) is named with the figures its
records disagree on: the report and the history each keep one of them, and which figures a reader sees then depends
on the reader.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from harness.check.relations import Finding
from harness.core.record import CellRecord
from harness.core.record_codec import record_to_dict, shown
from harness.core.results_dir import SkippedLine

SKIPPED = "record-skipped"
TWICE = "recorded-twice"
#: the differing figures a finding names (the rest are counted)
SHOWN_DIFFERENCES = 3


def skipped_findings(skipped: list[SkippedLine]) -> list[Finding]:
    """A finding per skipped line: `cells.jsonl:19: record-skipped: <why>; line skipped`."""
    return [Finding(f"{Path(s.path).name}:{s.line}", SKIPPED, f"{s.why}; line skipped") for s in skipped]


def _differences(a: object, b: object, path: str = "") -> list[str]:
    """The dotted paths where two JSON values differ, with both values (objects compared key by key)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in dict.fromkeys([*a, *b]):
            out += _differences(a.get(key), b.get(key), f"{path}.{key}" if path else str(key))
        return out
    return [] if a == b else [f"{path} {shown(a)} vs {shown(b)}"]


def twice_findings(records: list[CellRecord]) -> list[Finding]:
    """A finding per cell id recorded more than once in one run: which figures its records disagree on (or that
    they are identical), the first and the last record compared."""
    by_cell: dict[str, list[CellRecord]] = defaultdict(list)
    for rec in records:
        by_cell[rec.cell_id].append(rec)
    out = []
    for cell_id, recs in by_cell.items():
        if len(recs) < 2:
            continue
        differ = _differences(record_to_dict(recs[0]), record_to_dict(recs[-1]))
        if differ:
            more = len(differ) - SHOWN_DIFFERENCES
            said = "; ".join(differ[:SHOWN_DIFFERENCES]) + (f"; and {more} more" if more > 0 else "")
            detail = f"{len(recs)} records of this cell with different figures (first vs last: {said})"
        else:
            detail = f"{len(recs)} identical records of this cell"
        out.append(Finding(cell_id, TWICE, detail + "; a reader keeps one of them"))
    return out
