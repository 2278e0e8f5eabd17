"""What every use case's answer is made of: the pick, the answer, the constraints every use case applies
(the accuracy floor, the user's memory cap) and the tie rule on paired ratios and p50 intervals.

harness.decide.by_workload (model-only figures), harness.decide.by_scenario (the scenario records) and
harness.decide.deploy (dynamic shapes, simplest deployment) build their answers from these.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from harness.core.record import CellRecord
from harness.decide import host_bound, paired
from harness.decide.index import RunIndex, machine_label, row_label, row_of, workload_key
from harness.decide.load import finite, null_reason, number, run_shape
from harness.decide.words import fmt_num
from harness.measure.stats import Interval

log = logging.getLogger(__name__)

Cand = tuple[RunIndex, CellRecord]

#: the share of the PyTorch fp32 reference's mAP50-95 a cell must keep to be recommended (where accuracy was scored)
ACCURACY_FLOORS = {"fp32": 0.99, "fp16": 0.99, "int8": 0.95}


@dataclass(frozen=True)
class Pick:
    """A recommended cell: `numbers` the measured figures behind the choice, `figure` the short form of them that
    the report's first screen shows."""

    backend: str
    device: str
    machine: str
    cell_id: str
    numbers: str
    figure: str = ""
    accuracy: str = ""  # the accuracy as known and what the configuration trades (the candidate-based picks)
    #: "" unless the cell is host-bound: then why its figure will move with the host CPU (harness.decide.host_bound)
    host_bound: str = ""
    #: how far from its machine's limit the cell runs, in words (harness.decide.roofline.annotate fills it)
    roofline: str = ""
    #: False where `figure` is not its use case's scenario's measurement (a screen): the first screen then names the
    #: configuration without the figure, which the evidence section gives with why
    measured: bool = True


@dataclass(frozen=True)
class Rejection:
    """A cell that ran and was measured but failed a constraint of the use case: which one, and its figure."""

    backend: str
    device: str
    cell_id: str
    constraint: str  # `accuracy floor`, `frame time`, `memory cap`, ...
    why: str  # the failing figure against the limit, in words

    def text(self) -> str:
        return f"{self.backend}/{self.device}: {self.why}"


@dataclass(frozen=True)
class UseCaseAnswer:
    """One use case: an objective (`criterion`) under constraints, answered by a winner and the runner-ups on the
    compared workload, by tied cells, or by why no cell qualifies (`none_reason`).

    `machine` is set for the use cases answered per machine (what to ship on that machine); None when the cells of
    every rendered machine compete. `measured` is False when no record of the machine has the scenario the use
    case rests on (a run from before the scenarios, or a profile that did not run it).
    """

    key: str
    title: str
    criterion: str
    winner: Pick | None = None
    runner_up: Pick | None = None
    workload: str | None = None
    none_reason: str | None = None
    tied: tuple[Pick, ...] = ()  # no winner: these cannot be told apart (the best first)
    tie_reason: str | None = None
    # qualifying cells left out of the comparison, and why (another timing scope)
    set_aside: str | None = None
    rejected: str | None = None  # the rejections below in one line (the accuracy floor's first)
    constraint: str | None = (
        None  # the use case's own constraint in words (the common ones: Constraints.text)
    )
    machine: str | None = None
    machine_pos: int | None = None
    others: tuple[Pick, ...] = ()  # every qualifying cell after the winner (or the tie), best first
    rejections: tuple[Rejection, ...] = ()
    measured: bool = True
    # nothing qualifies: the closest candidate, what it misses by, and what to measure (harness.decide.nearest)
    nearest_miss: dict | None = None
    screened: str | None = None  # candidates whose figure is a screen from their e2e timing, and how
    # the latency-bound use cases (harness.decide.most_accurate): the fastest candidate meeting the bound where it
    # is not the pick and what it gives up; the pick at the limit, and the next with margin; the size ladder
    faster: Pick | None = None
    gives_up: str | None = None
    #: how the first screen names `faster`: the fastest that meets the bound, or the one serving the most cameras
    faster_words: str = "fastest that meets it"
    #: the task whose cells the answer compared (harness.decide.tasks); None: no cell
    task: str | None = None
    at_limit: str | None = None
    with_margin: Pick | None = None
    ladder_line: str | None = None
    ladder: tuple[dict, ...] = ()
    #: the comparisons an answer rests on, one line each, shown under it on the first screen and in its evidence
    #: (the migration answers: one line per backend and size, harness.decide.migration)
    rows: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        def pick(p: Pick | None) -> dict | None:
            return None if p is None else dict(p.__dict__)

        return {
            "key": self.key,
            "task": self.task,
            "title": self.title,
            "criterion": self.criterion,
            "constraint": self.constraint,
            "machine": self.machine,
            "measured": self.measured,
            "workload": self.workload,
            "winner": pick(self.winner),
            "runner_up": pick(self.runner_up),
            "others": [pick(p) for p in self.others],
            "none_reason": self.none_reason,
            "tied": [pick(p) for p in self.tied],
            "tie_reason": self.tie_reason,
            "set_aside": self.set_aside,
            "rejected": self.rejected,
            "rejections": [dict(r.__dict__) for r in self.rejections],
            "nearest_miss": self.nearest_miss,
            "screened": self.screened,
            "faster": pick(self.faster),
            "faster_words": self.faster_words,
            "gives_up": self.gives_up,
            "at_limit": self.at_limit,
            "with_margin": pick(self.with_margin),
            "ladder_line": self.ladder_line,
            "ladder": list(self.ladder),
            "rows": list(self.rows),
        }


@dataclass(frozen=True)
class Constraints:
    """The constraints every use case applies: the accuracy floor per precision and the user's memory cap (MiB)."""

    floors: dict[str, float] | None = None
    memory_cap_mib: float | None = None
    camera_fps: float = 30.0  # the camera use case's frame rate (--camera-fps)
    server_bound_ms: float | None = (
        None  # the server's p99 bound (--server-bound-ms); None: each record's own
    )
    min_shape: int | None = None  # the smallest input side a pick may have (--min-shape)
    #: the share of each latency bound a figure must stay within (--headroom; 1: the bound itself)
    headroom: float = 1.0

    def failures(self, rec: CellRecord) -> list[Rejection]:
        """The constraints `rec` fails, each with its figure (accuracy floor first)."""
        out = []
        why = below_accuracy_floor(rec, self.floors)
        if why:
            out.append(rejection(rec, "accuracy floor", why))
        why = over_memory_cap(rec, self.memory_cap_mib)
        if why:
            out.append(rejection(rec, "memory cap", why))
        why = below_min_shape(rec, self.min_shape)
        if why:
            out.append(rejection(rec, "min shape", why))
        return out

    def text(self) -> str:
        floors = self.floors or ACCURACY_FLOORS
        text = (
            "accuracy floor " + ", ".join(f"{p} {s:g}" for p, s in floors.items()) + " of the reference mAP"
        )
        if self.memory_cap_mib is not None:
            text += f"; memory cap {self.memory_cap_mib:g} MiB"
        if self.min_shape is not None:
            text += f"; input side at least {self.min_shape} px"
        if self.headroom < 1.0:
            text += f"; latency within {self.headroom:.0%} of each bound (--headroom {self.headroom:g})"
        return text


def below_min_shape(rec: CellRecord, min_side: int | None) -> str | None:
    """Why `rec`'s input is smaller than --min-shape allows, or None."""
    h, w = rec.height, rec.width
    if min_side is None or not isinstance(h, int) or not isinstance(w, int) or min(h, w) >= min_side:
        return None
    return f"input {h}x{w} below the {min_side} px --min-shape"


def below_accuracy_floor(rec: CellRecord, floors: dict[str, float] | None = None) -> str | None:
    """Why `rec` fails the accuracy floor of its precision, or None (also when its accuracy was not scored)."""
    ratio = number(rec.accuracy, "ratio")
    floor = (floors or ACCURACY_FLOORS).get(str(rec.precision_requested))
    if ratio is None or floor is None or ratio >= floor:
        return None
    who = f"{rec.backend} {rec.precision_requested}"
    return f"{who} keeps {ratio:.3f} of the reference mAP50-95 (floor {floor:g})"


def over_memory_cap(rec: CellRecord, cap_mib: float | None) -> str | None:
    """Why `rec` does not fit the memory cap: its host peak RSS or its process's device peak above it, or no memory
    measured (not known to fit is not fitting). None without a cap, or when it fits."""
    if cap_mib is None:
        return None
    host, dev = memory_figures(rec)
    cap = f"{cap_mib:g}"
    if host is None and dev is None:
        reason = null_reason(rec, "memory.host_peak_rss_mib")
        return f"memory not measured ({reason}): not known to fit the {cap} MiB cap"
    # four figures: a reading just over the cap must not print as the cap itself
    if host is not None and host > cap_mib:
        return f"host peak RSS {fmt_num(host, 4)} MiB over the {cap} MiB cap"
    if dev is not None and dev > cap_mib:
        return f"device peak {fmt_num(dev, 4)} MiB over the {cap} MiB cap"
    return None


def memory_figures(rec: CellRecord) -> tuple[float | None, float | None]:
    """The record's host peak RSS and its process's device peak (MiB), each None when not measured."""
    mem = rec.memory
    if mem is None:
        return None, None
    return finite(mem.host_peak_rss_mib), finite(mem.device_peak_process_mib)


def rejection(rec: CellRecord, constraint: str, why: str) -> Rejection:
    return Rejection(str(rec.backend), str(rec.device), str(rec.cell_id), constraint, why)


def rejected_text(rejections: tuple[Rejection, ...] | list[Rejection]) -> str | None:
    """The rejections in one line, grouped by constraint (the accuracy floor first, as the report always had it)."""
    if not rejections:
        return None
    by: dict[str, list[str]] = {}
    for r in rejections:
        text = r.why if r.constraint == "accuracy floor" else r.text()
        by.setdefault(r.constraint, []).append(text)
    order = sorted(by, key=lambda c: (c != "accuracy floor", c))
    label = {"accuracy floor": "below the accuracy floor"}
    return "; ".join(f"{label.get(c, 'failed the ' + c)}: " + "; ".join(sorted(set(by[c]))) for c in order)


def entrant(idx: RunIndex, rec: CellRecord) -> tuple:
    return (idx.position, rec.device, rec.backend)


def make_pick(
    idx: RunIndex, rec: CellRecord, indexes: list[RunIndex], numbers: str, figure: str = ""
) -> Pick:
    return Pick(
        str(rec.backend),
        str(rec.device),
        machine_label(idx, indexes),
        str(rec.cell_id),
        numbers,
        figure,
        host_bound=host_bound.words(rec, idx),
    )


def workload_label(rec: CellRecord) -> str:
    key = workload_key(rec)
    return f"{row_label(row_of(key))} · {run_shape(rec)}" + (" (dynamic artifact)" if rec.dynamic else "")


def pool_reason(pool: list[Cand], what: str, lacking: int = 0, metric_name: str = "") -> str:
    """Why no cell qualifies: none of the kind ran, or what those that ran lacked."""
    if not pool:
        return f"no {what} cell was in this run"
    statuses: dict[str, int] = {}
    for _, rec in pool:
        statuses[str(rec.status)] = statuses.get(str(rec.status), 0) + 1
    if set(statuses) == {"skipped"}:  # none ran: "88 ran: 88 skipped" read as a contradiction
        return f"no {what} cell ran here: all {len(pool)} were skipped (see the skip reasons)"
    counts = ", ".join(f"{n} {s}" for s, n in sorted(statuses.items()))
    why = f"; {lacking} otherwise qualifying cells have no {metric_name} recorded" if lacking else ""
    return f"no measured {what} cell qualifies on this machine ({len(pool)} planned: {counts}{why})"


def split_ties(
    ranked: list[Cand], interval: Callable[[CellRecord], Interval | None] | None
) -> tuple[list[Cand], str | None]:
    """The entrants that cannot be told apart from the first of `ranked` (itself included), and why.

    Two cells timed together (one workload, interleaved) are tied when the 95% interval of their paired p50 ratio
    holds 1 (harness.decide.paired); cells that were not timed together are tied when their p50 intervals overlap,
    or either has too few rounds for an interval (unknown, so not separable). One entrant alone is never a tie.
    """
    if interval is None or len(ranked) < 2:
        return ranked[:1], None
    first = interval(ranked[0][1])
    tied, unknown, by_pair, by_overlap = [ranked[0]], False, False, False
    for cand in ranked[1:]:
        r = paired.ratio(cand[1], ranked[0][1])
        if r is not None and r.paired and r.ci is not None:
            if r.relation() == "tied":
                tied.append(cand)
                by_pair = True
            continue
        ci = interval(cand[1])
        if first is None or ci is None or ci.overlaps(first):
            tied.append(cand)
            unknown |= first is None or ci is None
            by_overlap = True
    if len(tied) < 2:
        return tied, None
    reasons = []
    if by_pair:
        reasons.append("the 95% interval of their paired p50 ratio (timed interleaved) holds 1")
    if by_overlap and unknown:
        reasons.append(
            "their p50s cannot be told apart: an interval needs at least 6 timed rounds, and some have fewer"
        )
    elif by_overlap:
        reasons.append("their p50 95% confidence intervals overlap (not timed together)")
    return tied, "; ".join(reasons)
