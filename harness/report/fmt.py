"""Display of record values: numbers rounded for reading, and "n/a" that always carries its reason.

A value that was not measured is never shown as 0: it becomes "n/a" with a numbered note whose text is the
record's own `null_reasons` entry (or the status that explains it).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from harness.core.record import CellRecord
from harness.decide.load import finite, null_reason
from harness.decide.words import fmt_bytes as fmt_bytes
from harness.decide.words import fmt_num as fmt_num

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Shown:
    """A value as displayed: `text`, or n/a with `note` (the number of its reason in the report's notes)."""

    text: str
    raw: float | None = None
    note: int | None = None
    reason: str | None = None

    @property
    def na(self) -> bool:
        return self.note is not None


class Notes:
    """The report's numbered reasons for n/a values; each distinct reason is listed once."""

    def __init__(self) -> None:
        self._index: dict[str, int] = {}

    def ref(self, reason: str) -> int:
        if reason not in self._index:
            self._index[reason] = len(self._index) + 1
        return self._index[reason]

    def na(self, reason: str) -> Shown:
        return Shown("n/a", None, self.ref(reason), reason)

    def items(self) -> list[tuple[int, str]]:
        return [(n, reason) for reason, n in self._index.items()]


def field(
    rec: CellRecord, path: str, value: object, notes: Notes, digits: int = 3, suffix: str = ""
) -> Shown:
    """A numeric record field for display: `value`, the record's field at the dotted `path` (`latency_ms.p50`),
    or n/a with the record's reason for that path when it is null or not a finite number."""
    number = finite(value)
    if number is None:
        return notes.na(null_reason(rec, path))
    return Shown(fmt_num(number, digits) + suffix, number)


def derived(
    value: float | None, reason: str | None, notes: Notes, digits: int = 3, suffix: str = ""
) -> Shown:
    """A value computed from record values (a ratio), or n/a with why it could not be computed."""
    if value is None:
        return notes.na(reason or "not computable from the records")
    return Shown(fmt_num(value, digits) + suffix, value)
