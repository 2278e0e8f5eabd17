"""The report's "Relations" section: the records whose figures break a relation the harness states, the same
findings `yolo26-bench check` lists (harness.check.relations), per machine."""

from __future__ import annotations

from dataclasses import dataclass

from harness.check.relations import RELATIONS, check_records
from harness.decide.index import RunIndex
from harness.report.matrix import machine_label


@dataclass(frozen=True)
class RelationRow:
    machine: str
    cell_id: str
    relation: str
    detail: str


def relation_rows(indexes: list[RunIndex]) -> list[RelationRow]:
    """One row per record and broken relation, over every cell and remedy attempt of the rendered runs."""
    return [
        RelationRow(machine_label(idx, indexes), f.cell_id, f.relation, f.detail)
        for idx in indexes
        for f in check_records(idx.all_records())
    ]


def relations_section(indexes: list[RunIndex]) -> dict:
    """The section's content: the rows, how many records were checked, and each relation as stated."""
    return {
        "rows": relation_rows(indexes),
        "checked": sum(len(idx.all_records()) for idx in indexes),
        "stated": [(name, text) for name, (text, _) in RELATIONS.items()],
    }
