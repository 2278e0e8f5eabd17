"""How many cameras this machine serves at --camera-fps (default 30), on each machine.

Two answers, as for the camera: how many cameras the most accurate configuration serves (among those whose
accuracy is known and that serve at least one camera; harness.decide.most_accurate's scale and tie rule), and how
many the configuration serving the most does, with what it gives up against the first. Constraint: the per-query
latency of a LoadGen MultiStream run with one sample per camera (p90 under the short durations, p99 under MLPerf's)
within the frame time, VALID, decided on LoadGen's early-stopping bound; then the common ones. Figure: the
camera-capacity search's interval and its mechanism where it ran (harness.scenarios.capacity; "N, possibly N+1"
where the bound stayed undecided), else bounded by the multi-stream and single-stream figures
(harness.decide.capacity, said so; the scenario phase searches every configuration this answer names,
harness.decide.to_measure, and the fastest per image, the likeliest to serve the most). Order: the most cameras;
at one count a searched configuration before one only bounded, then the lower end-to-end p50 per image (the one
likelier to serve more), then the least host memory.
Configurations with the same interval cannot be told apart. When not one configuration serves one camera: the
nearest miss, never "0 cameras" as a pick.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.decide import host_bound, most_accurate
from harness.decide.candidate_types import Scored
from harness.decide.candidates import SCENARIO, SCREEN, Candidate, Figure, candidates, e2e
from harness.decide.capacity import SEARCH, Capacity, capacity
from harness.decide.entries import constraints_dict
from harness.decide.index import RunIndex, machine_label
from harness.decide.picks import Constraints, Pick, Rejection, UseCaseAnswer, rejected_text
from harness.decide.registry import ALWAYS, Outcome, register_use_case
from harness.decide.words import fmt_num

KEY = "camera-capacity"
OBJECTIVE = (
    "how many cameras the most accurate configuration serves (any size, shape, precision, backend), and how many "
    "the one serving the most does"
)
#: the words of the second answer on the first screen
MOST_WORDS = "most cameras"


def _constraint(cons: Constraints) -> str:
    return f"per-query p99 (p90 under short durations) of one frame per camera within {fmt_num(1000 / cons.camera_fps)} ms"


def _per_image_ms(c: Candidate) -> float:
    p50 = e2e(c.rec, "p50")
    return p50 / max(1, int(c.rec.batch or 1)) if p50 else math.inf


def _order(item: tuple[Candidate, Capacity]) -> tuple:
    c, cap = item
    mem = c.memory_mib()
    return (
        -(cap.lo or 0),
        0 if cap.source == SEARCH else 1,
        -(cap.possibly or 0),
        -(cap.hi or math.inf),
        _per_image_ms(c),
        mem if mem is not None else math.inf,
        str(c.rec.cell_id),
    )


def _scored(c: Candidate, cap: Capacity, fps: float) -> Scored:
    """A configuration's capacity as a figure: the cameras it serves (the search's, else a bound, screened)."""
    iv = None
    source = SCENARIO if cap.source == SEARCH else SCREEN
    why = "" if source == SCENARIO else f"not measured by camera-capacity: {cap.how.split(';')[0]}"
    return Scored(c, Figure(float(cap.lo or 0), iv, cap.text(fps), "", source, cap.how, why=why))


@dataclass(frozen=True)
class CameraCapacity:
    key: str = KEY
    order: int = 25
    first_screen: str = ALWAYS
    scenario: str | None = "camera-capacity"

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
            "most_cameras": None,
            "most_cameras_gives_up": None,
            "fastest_per_image": None,
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
        fps = cons.camera_fps
        caps = {id(c): cap for c, cap in serving}
        ranked = [_scored(c, cap, fps) for c, cap in serving]
        group, scale = most_accurate.most_accurate(ranked)
        most = ranked[0]
        best = group[0] if group else most
        best_cap = caps[id(best.cand)]
        same = [
            s
            for s in (group or ranked)[1:]
            if _interval(caps[id(s.cand)]) == _interval(best_cap) and s.fig.source == best.fig.source
        ]
        chosen = [best, *same]
        order = chosen + [
            s for s in most_accurate.by_accuracy(ranked, scale) if not any(s is t for t in chosen)
        ]
        picks = [self._pick(s.cand, caps[id(s.cand)], machine, fps) for s in order]
        entry["pick"] = self._entry_pick(best.cand, best_cap, fps)
        # the configuration likeliest to serve the most (the fastest per image): the search it needs is asked for
        # (harness.decide.to_measure), so that "the most cameras" is not left to the ones searched for another reason
        quick = min(ranked, key=lambda s: (_per_image_ms(s.cand), str(s.cand.rec.cell_id)))
        entry["fastest_per_image"] = self._entry_pick(quick.cand, caps[id(quick.cand)], fps)
        entry["tied_with"] = [self._entry_pick(s.cand, caps[id(s.cand)], fps) for s in same]
        second, gives_up = None, None
        if not any(most is s for s in chosen):
            second = self._pick(most.cand, caps[id(most.cand)], machine, fps)
            gives_up = most_accurate.gives_up(most, best)
            entry["most_cameras"] = self._entry_pick(most.cand, caps[id(most.cand)], fps)
            entry["most_cameras_gives_up"] = gives_up
        reason = (
            f"the most accurate ({'measured on your data' if scale == 'measured' else 'published COCO mAP at 640'})"
            f" of {len(serving)} configurations serving at least one camera, and the one serving the most"
            if scale
            else f"the most cameras of {len(serving)} configurations serving at least one: none of them has a known "
            "accuracy (measured on your data, or published)"
        )
        entry["reason"] = reason
        extra = {"faster": second, "gives_up": gives_up, "faster_words": MOST_WORDS}
        if same:
            why = "the same camera interval; ordered by the least host memory"
            entry["tie_reason"] = why
            k = 1 + len(same)
            answer = UseCaseAnswer(
                KEY, title, OBJECTIVE, tied=tuple(picks[:k]), tie_reason=why, others=tuple(picks[k:]), **base,
                **extra,
            )  # fmt: skip
        else:
            runner = picks[1] if len(picks) > 1 else None
            answer = UseCaseAnswer(
                KEY, title, OBJECTIVE, picks[0], runner, others=tuple(picks[1:]), **base, **extra
            )
        return Outcome(answer, entry)

    @staticmethod
    def _pick(c: Candidate, cap: Capacity, machine: str, fps: float) -> Pick:
        return Pick(
            str(c.rec.backend), str(c.rec.device), machine, str(c.rec.cell_id),
            f"{cap.text(fps)}: {cap.how}", f"{c.short()} · {cap.text(fps)}",
            c.accuracy.text() + (f"; {c.accuracy.cost}" if c.accuracy.cost else ""),
            host_bound=host_bound.words(c.rec, c.idx), measured=cap.source == SEARCH,
        )  # fmt: skip

    @staticmethod
    def _entry_pick(c: Candidate, cap: Capacity, fps: float) -> dict:
        return {
            "configuration": c.config(),
            "figure": cap.text(fps),
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


def _interval(cap: Capacity) -> tuple:
    return (cap.lo, cap.possibly, cap.hi)


register_use_case(CameraCapacity())
