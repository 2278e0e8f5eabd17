"""The types of a shipping decision (harness.decide.by_candidates): a use case, a scored candidate, a candidate that
missed a constraint, and one use case's decision on one machine. Apart from shipping.py so that the nearest miss
(harness.decide.nearest), which reads a decision, and shipping.py, which asks for it, do not import each other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from harness.core.record import CellRecord
from harness.decide.candidates import Candidate, Figure
from harness.decide.index import RunIndex
from harness.decide.picks import Constraints, Rejection


@dataclass(frozen=True)
class Scored:
    """A candidate with its figure for the use case."""

    cand: Candidate
    fig: Figure


@dataclass(frozen=True)
class Miss:
    """A candidate that failed a constraint: which, why in words, and by how much (relative, for the nearest miss;
    a constraint the user set to exclude, like --min-shape, counts as far)."""

    scored: Scored
    rejection: Rejection
    shortfall: float


@dataclass(frozen=True)
class CandidateCase:
    key: str
    title: Callable[[Constraints], str]
    objective: str
    constraint: Callable[[Constraints], str]
    # the candidate's figure: (record, constraints, per-machine context)
    figure: Callable[[CellRecord, Constraints, dict], Figure | None]
    own: Callable[[Figure, Constraints], tuple[str, float] | None]  # the own constraint's failure, shortfall
    higher_is_better: bool
    batch1: bool
    scenario: str
    strict_overlap: bool = False  # rate steps: intervals that touch at one end are apart
    # within a tie, order by the second objective (harness.decide.tie_order) and advise; False: the figure's order
    second_objective: bool = True
    #: the use case's own check on the candidate's record, beside its figure's (`own`): None when it passes, else
    #: why in words (or (why, shortfall), the shortfall relative, for the nearest miss): a drone's memory budget,
    #: say, with no figure of its own
    check: Callable[[CellRecord, Constraints], str | tuple[str, float] | None] | None = None
    #: the names the rejections give the two checks (`own` and `check`)
    own_name: str = ""
    check_name: str = "own check"
    #: the latency-bound use cases: the pick is the most accurate candidate meeting the bound among those whose
    #: accuracy is known, and the fastest is named beside it with what it gives up (harness.decide.most_accurate)
    accuracy_first: bool = False
    #: the limit (ms) the figure's interval is held against for headroom (harness.decide.headroom); None: none
    limit_ms: Callable[[Constraints], float] | None = None


@dataclass
class CandidateDecision:
    """One use case on one machine: the pick, those tied with it, the rest ranked, every rejection, and the
    nearest miss when nothing qualifies."""

    case: CandidateCase
    cons: Constraints
    idx: RunIndex
    machine: str
    pick: Scored | None = None
    tied: list[Scored] = field(default_factory=list)  # tied with the pick (the pick not included)
    tie_reason: str = ""
    tie_advice: str = ""  # what to do within the tie (the second objective), first on the page
    others: list[Scored] = field(default_factory=list)
    misses: list[Miss] = field(default_factory=list)
    nearest: dict | None = None
    reason: str = ""
    screened: list[Scored] = field(default_factory=list)  # candidates whose figure is a screen
    unscored: int = 0  # candidates with no figure at all
    #: the accuracy scale the pick was chosen on (measured, published), "" when no candidate's accuracy is known
    accuracy_scale: str = ""
    #: the fastest candidate meeting the bound where it is not the pick, and what it gives up against the pick
    fastest: Scored | None = None
    gives_up: str = ""
    #: the pick sits at the limit (its interval reaches it), in words; and the next candidate with margin
    at_limit: str = ""
    with_margin: Scored | None = None
    #: the machine's size ladder (harness.decide.ladder.Rung) and its largest size keeping this use case's bound
    ladder: list = field(default_factory=list)
    ladder_line: str = ""
    #: the most accurate candidate that only its screened figure keeps from meeting the bound, where more accurate
    #: than the pick: its scenario decides whether it meets it (harness.decide.most_accurate.screened_out)
    screened_out: Scored | None = None
    #: as accurate as the pick, their figures screened (an estimate) better than the pick's measured one: the pick
    #: stays the measured one (an estimate never outranks a measurement); their scenarios decide whether they take it
    estimated_better: list[Scored] = field(default_factory=list)

    @property
    def key(self) -> str:
        return self.case.key

    @property
    def title(self) -> str:
        return self.case.title(self.cons)

    @property
    def constraint(self) -> str:
        return self.case.constraint(self.cons)
