"""Compatibility regressions: the expected-status file of known failing cells.

A cell listed there that fails with the listed status and failure class is an xfail with the reason; a listed cell
that now passes is a strict XPASS (the test fails and prints the command that updates the file); a failing cell
that is not listed fails its test.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import yaml

from harness.core.record import TRACED_STATUSES, CellRecord

log = logging.getLogger(__name__)

HEADER = """\
# Known failing cells of the benchmark matrix, with their failure class (see harness/plan/expected.py).
# A listed cell that fails as listed is an xfail; one that now passes is a strict XPASS; an unlisted failure
# fails. Regenerate entries with: pytest suites/ --benchmark-only <selection> --update-expected
"""


@dataclass(frozen=True)
class Verdict:
    """How a finished cell maps to a test outcome: pass, xfail, fail or xpass, with the message."""

    outcome: str
    message: str


class ExpectedStatus:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        data = {}
        if self.path.exists():
            data = yaml.safe_load(self.path.read_text()) or {}
        self.entries: dict[str, dict] = dict(data.get("expected") or {})

    def judge(self, rec: CellRecord, update_command: str) -> Verdict:
        exp = self.entries.get(rec.cell_id)
        status = rec.status
        klass = (rec.failure or {}).get("class")
        failed = status not in ("ok", "skipped", "exported", *TRACED_STATUSES)
        if failed:
            if exp and exp.get("status") == status and exp.get("class") in (None, klass):
                return Verdict(
                    "xfail", f"known failure: {status} ({klass}): {exp.get('reason') or rec.reason}"
                )
            if exp:
                return Verdict(
                    "fail",
                    f"{status} ({klass}) but {self.path.name} expects {exp.get('status')} "
                    f"({exp.get('class')}): {rec.reason}\nto accept: {update_command}",
                )
            return Verdict("fail", f"{status} ({klass}): {rec.reason}")
        if exp and status == "ok":
            return Verdict(
                "xpass",
                f"XPASS(strict): {rec.cell_id} now passes but {self.path.name} expects "
                f"{exp.get('status')} ({exp.get('class')}); update it with:\n  {update_command}",
            )
        return Verdict("pass", "")

    def update(self, records: list[CellRecord]) -> tuple[int, int]:
        """Record the failures of `records` and drop cells that now pass; skipped cells are left as they are."""
        added = removed = 0
        for rec in records:
            cid, status = rec.cell_id, rec.status
            if status in ("ok", "exported"):
                removed += self.entries.pop(cid, None) is not None
            elif status != "skipped" and status not in TRACED_STATUSES:  # a fake-device trace is no failure
                f = rec.failure or {}
                new = {"status": status, "class": f.get("class"), "reason": (rec.reason or "")[:200]}
                if self.entries.get(cid) != new:
                    added += 1
                self.entries[cid] = new
        self.path.parent.mkdir(parents=True, exist_ok=True)
        body = yaml.safe_dump({"expected": dict(sorted(self.entries.items()))}, sort_keys=False, width=110)
        self.path.write_text(HEADER + body)
        return added, removed
