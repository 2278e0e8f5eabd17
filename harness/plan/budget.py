"""A night's plan: which cells of a profile run within a time budget, in a stated priority, and which wait.

Priority (each group takes, in its order, every cell whose estimate still fits the budget):
1. cells whose last result regressed, failed, or is missing (the last run planned it and recorded nothing),
   most important first: regressed, then failed, then missing;
2. cells touched by the change since the last run (harness.plan.changes), the longest unmeasured first;
3. a rotating slice: the other cells by when they were last measured (never first, then the oldest), in the
   profile's order among equals, taken in that order until the next one does not fit. Taking them strictly in
   order is what bounds the period: every night measures at least (budget - the largest cell) of the rotation,
   so every cell of the profile is measured at least once every K = ceil(total / (budget - largest)) nights
   while groups 1 and 2 are empty (they take from the same budget when they are not).
Cells that are a skip here cost nothing and are always in the run (their record is the skip, with its reason).
A cell left out is not a record: it is in the plan, under the reason it waits.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from harness.core.axes import SelectionError
from harness.plan.estimate import fmt_duration
from harness.plan.price import CellCost

PRIORITY = ("regressed", "failed", "missing")
GROUP_PRIORITY = "regressed, failed or missing"
GROUP_TOUCHED = "touched by the change"
GROUP_ROTATION = "rotation"
GROUP_FREE = "a skip here (no cost)"
WAIT_SLICE = "rotation: not in tonight's slice"
WAIT_TOO_BIG = "its estimate alone exceeds the budget"
WAIT_FULL = "the budget was spent on higher-priority cells"

_UNITS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}
#: the longest budget: 30 days (a night's plan; what is longer is a typo, and 400 digits would be infinite seconds)
MAX_BUDGET_S = 30 * 86400.0
#: longest budget text read or shown in an error line (`1h30m` is 5 characters; a megabyte is never echoed)
_SHOWN = 40
_LONGEST = 1000


def parse_budget(text: str) -> float:
    """`6h`, `90m`, `1h30m`, `45min`, `3600s`, `3600` (seconds) -> seconds, more than 0 and at most MAX_BUDGET_S
    (30 days); a SelectionError of one line naming `--time-budget` otherwise."""
    raw = str(text)
    t = raw.strip().lower().replace(" ", "")
    shown = repr(raw if len(raw) <= _SHOWN else raw[:_SHOWN] + "...")
    if len(t) > _LONGEST:
        raise SelectionError(f"--time-budget: {shown} is too long to be a duration (6h, 90m, 1h30m, 3600s)")
    if re.fullmatch(r"\d+(\.\d+)?", t):
        seconds = float(t)
    else:
        parts = re.findall(r"(\d+(?:\.\d+)?)(sec|min|s|m|h|d)", t)
        if not parts or "".join(n + u for n, u in parts) != t:
            raise SelectionError(f"--time-budget: {shown} is not a duration (6h, 90m, 1h30m, 3600s)")
        seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if seconds <= 0:
        raise SelectionError(f"--time-budget: {shown} must be more than nothing")
    if not math.isfinite(seconds) or seconds > MAX_BUDGET_S:
        raise SelectionError(
            f"--time-budget: {shown} is out of range (must be > 0 and <= {MAX_BUDGET_S / 86400:g} d, "
            f"{MAX_BUDGET_S:.0f} s)"
        )
    return seconds


@dataclass
class NightPlan:
    """The plan of one night: the selected cells in the profile's order, each group's count, seconds and why,
    the cells left out under their reason, the rotation's period and position."""

    budget_s: float
    selected: list[str]
    groups: dict[str, dict]
    left_out: dict[str, list[str]]
    period_nights: int | None
    rotation: dict
    sources: dict[str, int]
    warning: str | None = None
    profile_cells: int = 0
    extra: dict = field(default_factory=dict)
    #: the cells the plan took, in the order it took them (free ones first): a re-plan leaves the last ones for
    #: later first (harness.plan.replan)
    order: list[str] = field(default_factory=list)

    @property
    def selected_s(self) -> float:
        return sum(g["seconds"] for g in self.groups.values())

    def period_line(self) -> str:
        """`the nightly profile is covered every 9 nights at 6 h`, or why it is not."""
        if self.period_nights is None:
            return (
                f"the profile is never covered at {fmt_duration(self.budget_s)}: {self.rotation.get('why')}"
            )
        nights = "night" if self.period_nights == 1 else f"{self.period_nights} nights"
        never = sum(len(ids) for reason, ids in self.left_out.items() if reason.startswith(WAIT_TOO_BIG))
        return f"the profile is covered every {nights} at {fmt_duration(self.budget_s)}" + (
            f" ({never} cells never fit: {WAIT_TOO_BIG})" if never else ""
        )

    def lines(self, profile: str = "") -> list[str]:
        """What --collect-only prints: the budget, each group, what waits, the period."""
        out = [
            f"plan: {len(self.selected)} of {self.profile_cells} cells in {fmt_duration(self.budget_s)} "
            f"(expected {fmt_duration(self.selected_s)}; estimates from "
            + ", ".join(f"{n} {s}" for s, n in sorted(self.sources.items()))
            + ")"
        ]
        if self.warning:
            out.append(f"plan: WARNING: {self.warning}")
        for name, g in self.groups.items():
            out.append(f"plan:   {name}: {g['cells']} cells, {fmt_duration(g['seconds'])} ({g['why']})")
        for reason, ids in self.left_out.items():
            out.append(f"plan:   left out, {reason}: {len(ids)} cells")
        if self.extra.get("change"):
            out.append(f"plan: change {self.extra['change']}")
        if self.extra.get("planned_in_s") is not None:
            out.append(f"plan: planned in {self.extra['planned_in_s']} s from {self.extra.get('history')}")
        line = self.period_line()
        if self.rotation.get("position"):
            line += f"; tonight's rotation slice is {self.rotation['position']}"
        out.append(f"plan: {line.replace('the profile', f'the {profile} profile') if profile else line}")
        return out

    def to_env(self) -> dict:
        """The plan as env.json records it (`plan`)."""
        return {
            "budget_s": round(self.budget_s, 1),
            "selected": len(self.selected),
            "selected_s": round(self.selected_s, 1),
            "profile_cells": self.profile_cells,
            "groups": self.groups,
            "period_nights": self.period_nights,
            "period": self.period_line(),
            "rotation": self.rotation,
            "sources": self.sources,
            "warning": self.warning,
            "selected_ids": self.selected,
            "left_out": self.left_out,
            **self.extra,
        }


def plan_night(
    cells: Iterable[str],
    costs: Mapping[str, CellCost],
    budget_s: float,
    *,
    priority: Mapping[str, str] | None = None,
    touched: Mapping[str, str] | None = None,
    last_measured: Mapping[str, str] | None = None,
) -> NightPlan:
    """Select from `cells` (ids, in the profile's order) within `budget_s`. `priority`: cell id -> regressed,
    failed or missing; `touched`: cell id -> what of the change touches it; `last_measured`: cell id -> when
    (ISO 8601; a cell not in it was never measured)."""
    order = list(cells)
    rank = {c: i for i, c in enumerate(order)}
    priority, touched, last_measured = priority or {}, touched or {}, last_measured or {}
    left = budget_s
    taken: set[str] = set()
    groups: dict[str, dict] = {}
    left_out: dict[str, list[str]] = {}
    sources: dict[str, int] = {}
    for c in order:
        sources[costs[c].source] = sources.get(costs[c].source, 0) + 1

    took: list[str] = []

    def take(group: str, cid: str, why: str) -> None:
        nonlocal left
        g = groups.setdefault(group, {"cells": 0, "seconds": 0.0, "why": why})
        g["cells"] += 1
        seconds = costs[cid].seconds
        g["seconds"] += seconds
        left -= seconds
        taken.add(cid)
        took.append(cid)

    def wait(reason: str, cid: str) -> None:
        left_out.setdefault(reason, []).append(cid)

    free = [c for c in order if costs[c].seconds <= 0]
    for c in free:
        take(GROUP_FREE, c, "their record is the skip")
    too_big = {c for c in order if costs[c].seconds > budget_s}
    for c in order:
        if c in too_big:
            wait(f"{WAIT_TOO_BIG} ({fmt_duration(budget_s)})", c)

    # 1. regressed, failed, missing: most important first
    first = sorted(
        (c for c in order if c in priority and c not in taken and c not in too_big),
        key=lambda c: (PRIORITY.index(priority[c]) if priority[c] in PRIORITY else len(PRIORITY), rank[c]),
    )
    need = sum(costs[c].seconds for c in first)
    warning = None
    if need > budget_s:
        kinds = ", ".join(f"{sum(1 for c in first if priority[c] == k)} {k}" for k in PRIORITY)
        warning = (
            f"the budget {fmt_duration(budget_s)} is too small for the regressed, failed and missing cells alone "
            f"({kinds}: {fmt_duration(need)}); taking the most important first"
        )
    for c in first:
        if costs[c].seconds <= left:
            take(GROUP_PRIORITY, c, "their last result regressed, failed or is missing")
        else:
            wait(WAIT_FULL, c)

    # 2. touched by the change: the longest unmeasured first
    second = sorted(
        (c for c in order if c in touched and c not in taken and c not in too_big and c not in priority),
        key=lambda c: (last_measured.get(c, ""), rank[c]),
    )
    for c in second:
        if costs[c].seconds <= left:
            take(GROUP_TOUCHED, c, "touched: " + ", ".join(sorted({touched[x] for x in second}))[:200])
        else:
            wait(WAIT_FULL, c)

    # 3. the rotation: never measured, then the oldest; strictly in order
    rest = [
        c for c in order if c not in taken and c not in too_big and c not in priority and c not in touched
    ]
    rest.sort(key=lambda c: (last_measured.get(c, ""), rank[c]))
    stop = len(rest)
    for i, c in enumerate(rest):
        if costs[c].seconds > left:
            stop = i
            break
        take(GROUP_ROTATION, c, "the cells measured longest ago (never measured first)")
    for c in rest[stop:]:
        wait(WAIT_SLICE, c)

    runnable = [c for c in order if costs[c].seconds > 0 and c not in too_big]
    total = sum(costs[c].seconds for c in runnable)
    largest = max((costs[c].seconds for c in runnable), default=0.0)
    period: int | None
    if not runnable and too_big:
        period, why = None, "no cell's estimate fits the budget"
    elif not runnable:
        period, why = 1, "nothing to measure"
    elif budget_s - largest <= 0:
        period, why = None, "the budget is no larger than the largest cell"
    else:
        period, why = max(1, math.ceil(total / (budget_s - largest))), ""
    sliced = rest[:stop]
    # where tonight's slice stands in the cycle: the cells measured since its first cell was (all measured ones
    # when it was never measured) are this cycle's nights so far
    first_at = last_measured.get(sliced[0], "") if sliced else ""
    done = sum(1 for c in runnable if last_measured.get(c, "") > first_at) if sliced else 0
    night_no = min(period, 1 + round(done / len(sliced))) if period and sliced else None
    rotation = {
        "position": f"night {night_no} of {period}" if night_no else None,
        "cells_done_this_cycle": done,
        "slice_cells": len(sliced),
        "slice_from": (last_measured.get(sliced[0]) or "never measured") if sliced else None,
        "slice_to": (last_measured.get(sliced[-1]) or "never measured") if sliced else None,
        "never_measured": sum(1 for c in runnable if c not in last_measured),
        "oldest_last_measured": min((last_measured[c] for c in runnable if c in last_measured), default=None),
        "profile_seconds": round(total, 1),
        "largest_cell_s": round(largest, 1),
        "rule": "K = ceil(profile seconds / (budget - largest cell)), while no cell is regressed, failed, "
        "missing or touched",
    }
    if why:
        rotation["why"] = why
    for g in groups.values():
        g["seconds"] = round(g["seconds"], 1)
    selected = [c for c in order if c in taken]
    return NightPlan(
        budget_s,
        selected,
        groups,
        left_out,
        period,
        rotation,
        sources,
        warning,
        profile_cells=len(order),
        order=took,
    )


#: what each session's plan keeps of its own in a merged plan (the id lists are merged)
_SESSION_KEYS = ("budget", "budget_s", "selected", "selected_s", "groups", "period", "warning", "change")


def merge_plans(old: dict | None, new: dict) -> dict:
    """One run's plan from several sessions (GPU shards, then the CPU cells, all with --resume): the selected
    ids united, a cell left out only where no session selected it, each session's summary under `sessions`."""
    if not old or "selected_ids" not in old:
        return {**new, "sessions": [{k: new.get(k) for k in _SESSION_KEYS}]}
    selected = list(old["selected_ids"]) + [
        c for c in new["selected_ids"] if c not in set(old["selected_ids"])
    ]
    chosen = set(selected)
    left: dict[str, list[str]] = {}
    for plan in (old, new):
        for reason, ids in (plan.get("left_out") or {}).items():
            have = set(left.get(reason, ()))
            left.setdefault(reason, []).extend(c for c in ids if c not in chosen and c not in have)
    seen: set[str] = set()
    for reason in list(left):  # a cell waits under its first reason only
        kept = []
        for c in left[reason]:
            if c not in seen:
                seen.add(c)
                kept.append(c)
        if kept:
            left[reason] = kept
        else:
            del left[reason]
    sessions = list(old.get("sessions") or [{k: old.get(k) for k in _SESSION_KEYS}])
    sessions.append({k: new.get(k) for k in _SESSION_KEYS})
    return {
        **new,
        "selected_ids": selected,
        "selected": len(selected),
        "left_out": left,
        "sessions": sessions,
    }
