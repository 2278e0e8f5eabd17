"""The main job's plan: the default profile within a time budget (by default DEFAULT_BUDGET on the machine it
finds), the cells that decide the report's first screen first.

Order (each group takes, in its order, every cell whose estimate still fits what is left of the budget):
1. the first screen: yolo26n at 640 and 320, every backend, device and precision (the int8 cells, the export-only
   targets, and the cells the scenarios and the camera search run on, whose price holds them), the fastest
   backends first;
2. the size ladder: s, m, l, x at 640, the fastest backend's whole ladder first, then the next backend's;
3. the rest (yolo26n at 1280 and 384x640, other batches, ...) by what each adds per second: every cell counts the
   same, so the cheapest first.
A cell that is a skip here costs nothing and always runs (its record is the skip, with its reason). The fastest
backends: by the p50 of each backend's yolo26n 640 fp32 entry in the price table (prices.yaml, from the cold run
it was generated from), else its smallest entry's; the backends the table lacks after them, in the profile's
order. The budget holds the whole run: the cells get it less the run's end (history import and report) and
RESERVE_SHARE of it (what the cells' prices leave out: collection, the speed probe, the machine's peaks).

A cell left out is not a record and never a failure: it waits in env.json's `plan` under WAIT_BUDGET, and the
plan says in one line what was left for later and the budget that runs it (`--resume` with that budget runs only
what is missing: the cells recorded already cost nothing).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.core.cell import Cell
from harness.plan.budget import GROUP_FREE, NightPlan, parse_budget
from harness.plan.estimate import fmt_duration
from harness.plan.matrix import Selection
from harness.plan.price import CellCost, Table

#: the main job's budget when --time-budget is not given (`--time-budget none` turns it off)
DEFAULT_BUDGET = "15m"
NO_BUDGET = "none"
GROUP_SCREEN = "first screen"
GROUP_LADDER = "size ladder"
GROUP_REST = "the rest"
WAIT_BUDGET = "not run within the budget"
SCREEN_SIZE, SCREEN_SHAPES = "n", ((640, 640), (320, 320))
LADDER = ("s", "m", "l", "x")
#: the share of the budget kept for what the cells' prices leave out (collection, the speed probe, the machine's
#: peaks): the first estimate of the cold runs so far was 0.94-1.13x their wall (docs/nightly-plan.md)
RESERVE_SHARE = 0.05
#: a suggested budget is rounded up to this many seconds
ROUND_S = 300
#: the left-out kinds named in the plan line; the others are counted
SHOWN_KINDS = 6


def group_of(cell: Cell) -> str:
    """The cell's group in the plan (the module's order)."""
    shape = (cell.shape.height, cell.shape.width)
    if cell.shape.dynamic or cell.batch != 1:
        return GROUP_REST
    if cell.size == SCREEN_SIZE and shape in SCREEN_SHAPES:
        return GROUP_SCREEN
    if cell.size in LADDER and shape == (640, 640):
        return GROUP_LADDER
    return GROUP_REST


def speed_rank(table: Table, cells: Sequence[Cell]) -> dict[tuple[str, str], int]:
    """(backend, device) -> its place, fastest first: the p50 of its yolo26n 640 fp32 entry in the table, else of
    its smallest fp32 entry; the pairs the table has no p50 for after them, in the order of `cells`."""
    p50: dict[tuple[str, str], tuple[float, float]] = {}
    for e in table.entries:
        if e.p50_ms is None or e.cell.precision != "fp32":
            continue
        c = e.cell
        exact = c.size == SCREEN_SIZE and (c.shape.height, c.shape.width) == (640, 640) and c.batch == 1
        key, have = (c.backend, c.device), p50.get((c.backend, c.device))
        pixels = c.shape.height * c.shape.width * c.batch * (0 if exact else 1)
        if have is None or (pixels, e.p50_ms) < have:
            p50[key] = (pixels, e.p50_ms)
    order = sorted(p50, key=lambda k: (p50[k][1], k))
    for c in cells:
        if (c.backend, c.device) not in order:
            order.append((c.backend, c.device))
    return {k: i for i, k in enumerate(order)}


def plan_order(
    cells: Sequence[Cell], costs: Mapping[str, CellCost], rank: Mapping[tuple[str, str], int]
) -> list:
    """The cells (not the free ones) in the order the plan takes them: (group, cell) pairs."""
    place = {c.id: i for i, c in enumerate(cells)}

    def key(c: Cell) -> tuple:
        backend = rank.get((c.backend, c.device), len(rank))
        g = group_of(c)
        if g == GROUP_SCREEN:
            return (0, backend, place[c.id])
        if g == GROUP_LADDER:
            return (1, backend, LADDER.index(c.size), place[c.id])
        return (2, costs[c.id].seconds, place[c.id])

    return [(group_of(c), c) for c in sorted((c for c in cells if costs[c.id].seconds > 0), key=key)]


def about(seconds: float) -> str:
    """`24 min`, `1 h 05 min`, `40 s`: a duration rounded to whole minutes from a minute on."""
    if seconds < 60:
        return fmt_duration(seconds)
    return in_words(60 * int(seconds / 60 + 0.5))


def in_words(seconds: float) -> str:
    """`15 min`, `2 min 30 s`, `1 h 00 min`: fmt_duration, without the seconds of a whole number of minutes."""
    text = fmt_duration(seconds)
    return text[: -len(" 00 s")] if text.endswith(" min 00 s") else text


def suggested_budget(seconds: float) -> str:
    """The --time-budget that holds `seconds`: rounded up to ROUND_S, as `45m` or `1h30m`."""
    s = max(ROUND_S, math.ceil(seconds / ROUND_S) * ROUND_S)
    h, m = divmod(s // 60, 60)
    return f"{h}h{m:02d}m" if h and m else f"{h}h" if h else f"{m}m"


def kind_of(cell: Cell) -> str:
    """What a left-out cell is, in the plan line: `yolo26x at 640`, `yolo26n at 640 int8`."""
    shape = "dynamic" if cell.shape.dynamic else f"{cell.shape.height}" if cell.shape.height == cell.shape.width \
        else f"{cell.shape.height}x{cell.shape.width}"  # fmt: skip
    extra = "".join(f" {x}" for x in (cell.precision if cell.precision != "fp32" else "",
                                       f"batch {cell.batch}" if cell.batch != 1 else "",
                                       cell.task if cell.task != "detect" else "") if x)  # fmt: skip
    return f"{cell.family}{cell.size} at {shape}{extra}"


def left_for_later(cells: Sequence[Cell]) -> str:
    """`yolo26x at 640 (4 cells), yolo26n at 1280 (3 cells) and 2 more cells`, in the plan's order."""
    kinds: dict[str, int] = {}
    for c in cells:
        kinds[kind_of(c)] = kinds.get(kind_of(c), 0) + 1
    shown = [f"{k} ({n} cell{'s' if n != 1 else ''})" for k, n in list(kinds.items())[:SHOWN_KINDS]]
    more = sum(list(kinds.values())[SHOWN_KINDS:])
    return ", ".join(shown) + (f" and {more} more cell{'s' if more != 1 else ''}" if more else "")


@dataclass
class ScreenPlan(NightPlan):
    """The main job's plan: NightPlan's fields (no rotation, no period), its one line, what was left for later."""

    later: str = ""  # the left-out cells, in words
    more_s: float = 0.0  # their seconds
    suggested: str = ""  # the --time-budget that holds the whole profile

    def period_line(self) -> str:
        if not self.more_s:
            return "every cell fits the budget"
        return f"the rest runs with --resume and --time-budget {self.suggested}"

    def headline(self) -> str:
        """`N of M cells in 15 min; left for later: ... (about X min more): --time-budget 45m, or --time-budget
        none`; where everything fits, how long it is expected to take."""
        head = f"{len(self.selected)} of {self.profile_cells} cells in {in_words(self.budget_s)}"
        if not self.more_s:
            return f"{head}: every cell fits (expected {fmt_duration(self.selected_s)} of cells)"
        return (
            f"{head}; left for later: {self.later} (about {about(self.more_s)} more): "
            f"--time-budget {self.suggested}, or --time-budget {NO_BUDGET}"
        )

    def lines(self, profile: str = "") -> list[str]:
        out = [f"plan: {self.headline()}"]
        if self.warning:
            out.append(f"plan: WARNING: {self.warning}")
        return out

    def to_env(self) -> dict:
        return {**super().to_env(), "kind": "screen", "left_for_later": self.later, "more_s": round(self.more_s, 1),
                "suggested_budget": self.suggested, "headline": self.headline()}  # fmt: skip


def plan_screen(
    cells: Sequence[Cell],
    costs: Mapping[str, CellCost],
    budget_s: float,
    rank: Mapping[tuple[str, str], int],
    *,
    reserve_s: float = 0.0,
) -> ScreenPlan:
    """Select from `cells` (in the profile's order) within `budget_s` less `reserve_s` (the run's end), in the
    module's order; `rank`: (backend, device) -> place, fastest first (speed_rank)."""
    left = budget_s - reserve_s
    groups: dict[str, dict] = {}
    taken: set[str] = set()
    out: list[Cell] = []
    sources: dict[str, int] = {}
    for c in cells:
        sources[costs[c.id].source] = sources.get(costs[c.id].source, 0) + 1

    def take(group: str, c: Cell, why: str) -> None:
        nonlocal left
        g = groups.setdefault(group, {"cells": 0, "seconds": 0.0, "why": why})
        g["cells"] += 1
        g["seconds"] += costs[c.id].seconds
        left -= costs[c.id].seconds
        taken.add(c.id)

    for c in cells:
        if costs[c.id].seconds <= 0:
            take(GROUP_FREE, c, "their record is the skip, or the run holds them already")
    order = plan_order(cells, costs, rank)
    screen = [c for g, c in order if g == GROUP_SCREEN]
    need = sum(costs[c.id].seconds for c in screen)
    warning = None
    if need > left:
        warning = (
            f"the budget {fmt_duration(budget_s)} is too small for the first-screen cells ({len(screen)} cells, "
            f"about {fmt_duration(need + reserve_s)}): running what fits of them, the fastest backends first"
        )
    whys = {GROUP_SCREEN: "yolo26n at 640 and 320: what the first screen decides on",
            GROUP_LADDER: "s, m, l, x at 640, the fastest backends first",
            GROUP_REST: "by what each adds per second (the cheapest first)"}  # fmt: skip
    took = [c.id for c in cells if costs[c.id].seconds <= 0]
    for g, c in order:
        if costs[c.id].seconds <= left:
            take(g, c, whys[g])
            took.append(c.id)
        else:
            out.append(c)
    for g in groups.values():
        g["seconds"] = round(g["seconds"], 1)
    more = sum(costs[c.id].seconds for c in out)
    total = sum(costs[c.id].seconds for c in cells) + reserve_s
    return ScreenPlan(
        budget_s,
        [c.id for c in cells if c.id in taken],
        groups,
        {WAIT_BUDGET: [c.id for c in out]} if out else {},
        None,
        {},
        sources,
        warning,
        profile_cells=len(cells),
        extra={"reserve_s": round(reserve_s, 1)},
        order=took,
        later=left_for_later(out),
        more_s=more,
        suggested=suggested_budget(total) if out else "",
    )


@dataclass(frozen=True)
class TimeBudget:
    """--time-budget as the run takes it: its text and seconds (None: no budget), whether it is the main job's
    default (not given), and the plan's order: "screen" for the default profile (harness.plan.screen_budget),
    "night" for the others (harness.plan.budget)."""

    text: str | None
    seconds: float | None
    default: bool
    order: str


def time_budget(opt, profile: str, selection: Selection | None = None, worker: bool = False) -> TimeBudget:
    """--time-budget: a duration, `none` (no budget), or not given: the main job (the default profile as it is, no
    axis option) then plans within DEFAULT_BUDGET. A narrowed selection (--sizes, --backends, ...) or another
    profile is a choice, run whole; so is a pytest-xdist worker's (each would plan on its own speed figures, and
    the workers must collect the same cells). A malformed one is a SelectionError (one line)."""
    text = opt("time_budget")
    order = "screen" if profile == "default" else "night"
    if text is not None and str(text).strip().lower() == NO_BUDGET:
        return TimeBudget(None, None, False, order)
    if text:
        return TimeBudget(text, parse_budget(text), False, order)
    narrowed = selection is not None and any(v is not None for v in vars(selection).values())
    if profile == "default" and not narrowed and not worker:
        return TimeBudget(DEFAULT_BUDGET, parse_budget(DEFAULT_BUDGET), True, order)
    return TimeBudget(None, None, False, order)
