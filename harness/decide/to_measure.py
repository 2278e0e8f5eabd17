"""What the answers show that their scenarios did not measure: the configurations a decision names (the pick, the
configurations tied with it, the fastest beside it, the one with margin, the largest size on the ladder, the one
serving the most cameras, the most accurate one that only a screened figure kept out, and those as accurate as a
measured pick whose screened estimate ranked ahead of it) whose record holds no
result of the scenario their use case reads, each with that scenario.

The scenario phase (harness.execute.scenario_phase) decides on the records it has, measures what `wanted` names,
and decides again, until the answers rest on measurements or its budget is spent: which configurations a use case
favours stays this package's rule (a stage that must know it asks here, never restates it). The roles come in the
order they are measured under a budget: every use case's pick first, then the second answers, the ties, the
margins and the ladder.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from harness.decide.decision import Decision
from harness.decide.index import RunIndex, machine_label
from harness.decide.registry import get
from harness.decide.scenario_results import measured

log = logging.getLogger(__name__)

#: the roles of a configuration in an answer, in the order the scenario phase measures them
ROLES = (
    "pick",
    "more accurate, screened out",
    "better by its estimate",
    "most cameras",
    "fastest",
    "tied",
    "with margin",
    "largest size",
)
#: decision.json's field for each role (a list for ties), and the ladder's rung flag per use case
FIELDS = (("pick", "pick"), ("tied", "tied_with"), ("fastest", "fastest"), ("with margin", "with_margin"),
          ("most cameras", "most_cameras"), ("more accurate, screened out", "screened_out"),
          ("most cameras", "fastest_per_image"), ("better by its estimate", "estimated_better"))  # fmt: skip
LADDER_FLAG = {"camera": "camera", "server": "server"}
#: the ladder's figure is the unloaded e2e p99 at batch 1: single-stream measures it
LADDER_SCENARIO = "single-stream"


@dataclass(frozen=True)
class Wanted:
    """One measurement an answer needs: scenario `scenario` of cell `cell_id` (machine `position`), for use case
    `use_case` as its `role`."""

    position: int
    cell_id: str
    scenario: str
    use_case: str
    role: str

    def words(self) -> str:
        return f"{self.use_case} {self.role}: {self.scenario} of {self.cell_id}"


def _named(entry: dict) -> list[tuple[str, str]]:
    """(role, cell id) of every configuration the entry shows with a figure of its use case."""
    out = []
    for role, key in FIELDS:
        value = entry.get(key)
        for item in value if isinstance(value, list) else [value]:
            cid = (item or {}).get("configuration", {}).get("cell_id") if isinstance(item, dict) else None
            if cid:
                out.append((role, str(cid)))
    return out


def _ladder(entry: dict) -> list[tuple[str, str]]:
    """The largest size keeping the use case's bound on the machine's ladder (its first rung that does)."""
    flag = LADDER_FLAG.get(str(entry.get("use_case")))
    rung = next((r for r in entry.get("ladder") or [] if isinstance(r, dict) and r.get(flag)), None)
    return [("largest size", str(rung["cell_id"]))] if flag and rung and rung.get("cell_id") else []


def wanted(decision: Decision, indexes: list[RunIndex]) -> list[Wanted]:
    """Every measurement the decision's answers need and the records lack, once per cell and scenario, in the
    order of ROLES (then the use cases' page order)."""
    by_machine = {machine_label(idx, indexes): idx for idx in indexes}
    found: dict[tuple[int, str, str], tuple[tuple[int, int], Wanted]] = {}
    for n, entry in enumerate(decision.entries):
        idx = by_machine.get(str(entry.get("machine")))
        key = str(entry.get("use_case"))
        try:
            scenario = get(key).scenario
        except KeyError:
            continue
        if idx is None or scenario is None:
            continue
        named = [(r, c, scenario) for r, c in _named(entry)]
        named += [(r, c, LADDER_SCENARIO) for r, c in _ladder(entry)]
        for role, cid, name in named:
            rec = idx.by_id.get(cid)
            if rec is None or measured(rec, name):
                continue
            rank = (ROLES.index(role), n)
            slot = (idx.position, cid, name)
            if slot not in found or rank < found[slot][0]:
                found[slot] = (rank, Wanted(idx.position, cid, name, key, role))
    return [w for _, w in sorted(found.values(), key=lambda p: p[0])]
