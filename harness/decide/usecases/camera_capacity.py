"""How many cameras this machine serves at --camera-fps (default 30), on each machine.

Objective: the most cameras, any size, shape, precision, backend and way of serving them (one worker taking the
frames in turn, a stream per camera, the thread budget split between runtime instances, one batched call).
Constraint: the per-query latency of a LoadGen MultiStream run with one sample per camera (p90 under the short
durations, p99 under MLPerf's) within the frame time, VALID, decided on LoadGen's early-stopping bound; then the
common ones. Figure: the camera-capacity search's interval and its mechanism where it ran
(harness.scenarios.capacity; "N, possibly N+1" where the bound stayed undecided), else bounded by the multi-stream
and single-stream figures (harness.decide.capacity, said so). Tie rule: configurations with the same interval cannot be told apart; within them, the least host memory
first. When not one configuration serves one camera: the nearest miss, never "0 cameras" as a pick.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.decide import host_bound
from harness.decide.candidates import Candidate, candidates
from harness.decide.capacity import Capacity, capacity
from harness.decide.entries import constraints_dict
from harness.decide.index import RunIndex, machine_label
from harness.decide.picks import Constraints, Pick, Rejection, UseCaseAnswer, rejected_text
from harness.decide.registry import ALWAYS, Outcome, register_use_case
from harness.decide.words import fmt_num

KEY = "camera-capacity"
OBJECTIVE = "most cameras served (any size, shape, precision, backend)"


def _constraint(cons: Constraints) -> str:
    return f"per-query p99 (p90 under short durations) of one frame per camera within {fmt_num(1000 / cons.camera_fps)} ms"


def _order(item: tuple[Candidate, Capacity]) -> tuple:
    c, cap = item
    mem = c.memory_mib()
    return (
        -(cap.lo or 0),
        -(cap.possibly or 0),
        -(cap.hi or math.inf),
        mem if mem is not None else math.inf,
        str(c.rec.cell_id),
    )


@dataclass(frozen=True)
class CameraCapacity:
    key: str = KEY
    order: int = 25
    first_screen: str = ALWAYS
    scenario: str | None = "multi-stream"

    def decide(self, indexes: list[RunIndex], cons: Constraints) -> list[Outcome]:
        return [self.on(idx, indexes, cons) for idx in indexes]

    def on(self, idx: RunIndex, indexes: list[RunIndex], cons: Constraints) -> Outcome:
        machine = machine_label(idx, indexes)
        title = f"Cameras at {cons.camera_fps:g} FPS"
        scored = [(c, cap) for c in candidates(idx) if (cap := capacity(c.rec, cons.camera_fps)) is not None]
        rejections: list[Rejection] = [f for c, _ in scored for f in cons.failures(c.rec)]
        rejected = {r.cell_id for r in rejections}
        kept = [(c, cap) for c, cap in scored if str(c.rec.cell_id) not in rejected]
        serving = sorted(((c, cap) for c, cap in kept if cap.lo), key=_order)
        base = {
            "constraint": _constraint(cons),
            "machine": machine,
            "machine_pos": idx.position,
            "rejected": rejected_text(rejections),
            "rejections": tuple(rejections),
        }
        entry = {
            "use_case": KEY,
            "title": title,
            "machine": machine,
            "objective": OBJECTIVE,
            "constraints": constraints_dict(cons, _constraint(cons)),
            "pick": None,
            "tied_with": [],
            "tie_reason": None,
            "nearest_miss": None,
            "reason": "",
            "screened": [],
        }
        if not scored:
            why = (
                "not measured: no configuration of this machine has a multi-stream or camera-capacity result"
            )
            entry["reason"] = why
            return Outcome(
                UseCaseAnswer(KEY, title, OBJECTIVE, none_reason=why, measured=False, **base), entry
            )
        if not serving:
            miss = min(kept or scored, key=lambda s: (s[1].miss_ms or math.inf, str(s[0].rec.cell_id)))
            nm = {
                "configuration": miss[0].config(),
                "figure": miss[1].text(cons.camera_fps),
                "interval": None,
                "figure_source": miss[1].source,
                "misses_by": miss[1].how,
                "command": None,
                "measure": None,
                "why_no_command": "not one camera: the camera use case's nearest miss names what could meet one",
            }
            why = (
                f"no configuration serves one camera at {cons.camera_fps:g} FPS ({len(scored)} with a figure)"
            )
            entry |= {"nearest_miss": nm, "reason": why}
            return Outcome(
                UseCaseAnswer(KEY, title, OBJECTIVE, none_reason=why, nearest_miss=nm, **base), entry
            )
        best = serving[0]
        same = [
            s
            for s in serving[1:]
            if (s[1].lo, s[1].possibly, s[1].hi) == (best[1].lo, best[1].possibly, best[1].hi)
        ]
        picks = [self._pick(c, cap, machine, cons) for c, cap in serving]
        entry["pick"] = self._entry_pick(*best, cons)
        entry["tied_with"] = [self._entry_pick(c, cap, cons) for c, cap in same]
        reason = f"the most cameras of {len(serving)} configurations serving at least one"
        if not any(c.accuracy.known for c, _ in serving):
            reason += (
                "; none of them has a known accuracy (the camera search runs on the scenario cells: --scenarios "
                "n640 or all measures the 640 ones)"
            )
        entry["reason"] = reason
        if same:
            why = "the same camera interval; ordered by the least host memory"
            entry["tie_reason"] = why
            k = 1 + len(same)
            answer = UseCaseAnswer(
                KEY, title, OBJECTIVE, tied=tuple(picks[:k]), tie_reason=why, others=tuple(picks[k:]), **base
            )
        else:
            runner = picks[1] if len(picks) > 1 else None
            answer = UseCaseAnswer(KEY, title, OBJECTIVE, picks[0], runner, others=tuple(picks[1:]), **base)
        return Outcome(answer, entry)

    @staticmethod
    def _pick(c: Candidate, cap: Capacity, machine: str, cons: Constraints) -> Pick:
        return Pick(
            str(c.rec.backend), str(c.rec.device), machine, str(c.rec.cell_id),
            f"{cap.text(cons.camera_fps)}: {cap.how}", f"{c.short()} · {cap.text(cons.camera_fps)}",
            c.accuracy.text() + (f"; {c.accuracy.cost}" if c.accuracy.cost else ""),
            host_bound=host_bound.words(c.rec, c.idx),
        )  # fmt: skip

    @staticmethod
    def _entry_pick(c: Candidate, cap: Capacity, cons: Constraints) -> dict:
        return {
            "configuration": c.config(),
            "figure": cap.text(cons.camera_fps),
            "value": cap.lo,
            "interval": [cap.lo, cap.hi],
            "interval_how": "last passing to first failing camera count (null: none failed); a count between them "
            "left undecided by LoadGen's early-stopping bound is `possibly`",
            "figure_source": cap.source,
            "figure_note": cap.how,
            "mechanism": cap.mechanism or None,
            "deploy": cap.deploy or None,
            "possibly": cap.possibly,
            "undecided": (
                f"{cap.possibly} cameras undecided at this duration" if cap.possibly is not None else None
            ),
            "memory_mib": c.memory_mib(),
            "host_bound": host_bound.of(c.rec, c.idx),
            "accuracy": c.accuracy.value,
            "accuracy_source": c.accuracy.source,
            "accuracy_words": c.accuracy.text(),
            "accuracy_cost": c.accuracy.cost or None,
        }


register_use_case(CameraCapacity())
