"""The order within a tie: a second objective, stated, so that a tie still tells the user what to do.

Candidates tied on the use case's figure are ordered measured first (a scenario's figure before one screened from
end-to-end timing), then by the least host memory (peak RSS; not measured goes last),
then by the simplest deployment: no remedy needed first, then one artifact for every input shape (a backend whose
export takes dynamic shapes) before one artifact per shape. The advice reads "any of these; X if memory matters",
and names the simplest when it is another.
"""

from __future__ import annotations

import logging
import math

from harness import backends
from harness.core.record import CellRecord
from harness.decide.candidate_types import Scored
from harness.decide.candidates import SCREEN
from harness.decide.words import fmt_num

log = logging.getLogger(__name__)

SECOND_OBJECTIVE = "least host memory, then the simplest deployment (no remedy, one artifact for every shape)"
#: host peak RSS readings closer than this share are not a difference worth advising on (one process's RSS moves
#: by about this much between runs of one configuration)
MEMORY_NOISE = 0.01


def simplicity(rec: CellRecord) -> tuple[int, int]:
    """Lower is simpler: (a remedy was needed, the backend's artifact does not take every shape)."""
    try:
        dynamic = backends.get(str(rec.backend)).supports_dynamic
    except KeyError:  # a record of a backend this checkout does not have: not known to take every shape
        dynamic = False
    return (1 if rec.remedy else 0, 0 if dynamic else 1)


def _memory(s: Scored) -> float:
    mem = s.cand.memory_mib()
    return mem if mem is not None else math.inf


def order(members: list[Scored]) -> list[Scored]:
    """`members` (the pick and those tied with it) by the second objective; the figure's order breaks what is left."""
    at = {id(s): n for n, s in enumerate(members)}
    least = min(_memory(s) for s in members)

    def heavier(s: Scored) -> float:
        # within MEMORY_NOISE of the lightest is as light: the simplest deployment decides among those
        mem = _memory(s)
        return 0.0 if math.isfinite(least) and mem <= least * (1 + MEMORY_NOISE) else mem

    # measured before screened (harness.decide.by_candidates' order): memory never puts an estimate first
    return sorted(
        members, key=lambda s: (s.fig.source == SCREEN, heavier(s), simplicity(s.cand.rec), at[id(s)])
    )


def _name(s: Scored, members: list[Scored]) -> str:
    same = len({m.cand.short() for m in members}) == 1
    return str(s.cand.rec.backend) if same else f"{s.cand.rec.backend} ({s.cand.short()})"


def advice(members: list[Scored]) -> str:
    """`any of these; onnxruntime if memory matters (host peak RSS 329 MiB, the others up to 365)`, for members
    already in `order`."""
    first = members[0]
    mems = [s.cand.memory_mib() for s in members]
    known = [m for m in mems if m is not None]
    lighter = mems[0] is not None and len(known) > 1 and max(known) > mems[0] * (1 + MEMORY_NOISE)
    if lighter:
        said = (
            f"any of these; {_name(first, members)} if memory matters (host peak RSS {fmt_num(mems[0])} MiB, "
            f"the others up to {fmt_num(max(known))})"
        )
    else:
        said = (
            f"any of these; no host-memory difference beyond {MEMORY_NOISE:.0%} known ({len(known)} of "
            f"{len(members)} measured)"
        )
    simplest = min(members, key=lambda s: simplicity(s.cand.rec))
    if simplicity(simplest.cand.rec) < simplicity(first.cand.rec):
        said += f"; {_name(simplest, members)} for the simplest deployment"
    elif not lighter:
        said += f"; {_name(first, members)} for the simplest deployment"
    return said
