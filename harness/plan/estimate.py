"""How long a run has left: its cells priced by the one estimator (harness.plan.price), composed into the run's parts.

A run has four kinds of parts, in this order (harness.pytest_plugin.plugin): the export phase (every timed cell
exported or found in the export cache, and probed, several at once), the timing phase (every workload loaded and
timed in episodes), then each workload's own stages (end to end, parity, scenarios, accuracy, records) and the
cells run alone (dynamic probes, excluded cells), and last the history import and the report. From the cells'
prices (`compose`):

- the export phase: the sum of the cells' export and probe parts at the export phase's share (the recorded
  parallelism, else 1 / export workers), never less than the longest single one;
- the timing phase: the sum of the cells' load and timing parts (with one episode, or --rounds, each workload is
  timed in its own test instead: its cells' load and timing go to the workload);
- each workload: the sum of its cells' stages and scenarios parts;
- each cell run alone, the scenario phase (after the workloads, under --scenarios decision: what an earlier run's
  took, else the table's, at most its budget) and the end (history import and report): recorded, else the
  table's figures.

Remaining time is the sum of the parts not done yet; a cell a re-plan leaves for later takes its share out of them
(`Estimate.drop`, harness.plan.replan). Once parts are done (`Estimate.done` with their actual
seconds), the machine-dependent seconds left (all but the scenarios, whose LoadGen durations are wall-clock) are
rescaled by the done parts' actual over estimated seconds, within RESCALE_RANGE: a run going 1.4x slower than
priced is expected to stay so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from harness.core.cell import Cell
from harness.plan.durations import TIMELINE, TIMELINE_VERSION, Recorded, cache_entry, read_recorded
from harness.plan.price import (
    Known,
    Price,
    alone_price,
    export_share,
    finish_price,
    price_cells,
    scenario_phase_price,
)

__all__ = ["TIMELINE", "TIMELINE_VERSION", "Recorded", "cache_entry", "read_recorded"]

EXPORT_PHASE, TIMING_PHASE, FINISH = "export phase", "timing phase", "history and report"
SCENARIO_PHASE = "scenario phase"
#: the done parts' actual over estimated seconds is kept within this range when it rescales what is left
RESCALE_RANGE = (0.5, 3.0)
#: estimated seconds of done parts below which nothing is rescaled (a few seconds say little of a run)
RESCALE_MIN_S = 20.0


@dataclass(frozen=True)
class Part:
    """One part of the run and its price; `fixed`: the seconds of it that do not scale with the machine."""

    key: str
    seconds: float
    source: str  # "recorded", "history", "export cache", "nearest" or "plan"
    fixed: float = 0.0


@dataclass
class Estimate:
    """The run's parts and their prices; `done` removes a part (and, given its actual seconds, rescales the rest),
    `remaining_s` sums the rest."""

    parts: dict[str, Part]
    workers: int = 1
    cells: dict[str, int] = field(default_factory=dict)  # source -> cells priced from it
    prices: dict[str, Price] = field(default_factory=dict)  # cell id -> its price
    done_estimated_s: float = 0.0  # the machine-dependent seconds of the parts done with an actual figure
    done_actual_s: float = 0.0
    labels: dict[str, str] = field(default_factory=dict)  # cell id -> the key of its workload's part
    #: whether the cells' load and timing are in the timing phase's part (else in their workload's)
    timed_apart: bool = True

    def done(self, key: str, actual_s: float | None = None) -> None:
        part = self.parts.pop(key, None)
        if part is not None and actual_s is not None:
            self.done_estimated_s += part.seconds - part.fixed
            self.done_actual_s += max(0.0, actual_s - part.fixed)

    def ratio(self) -> float:
        """How the run is going: the done parts' actual over estimated seconds (1 until RESCALE_MIN_S are done)."""
        if self.done_estimated_s < RESCALE_MIN_S:
            return 1.0
        return min(max(self.done_actual_s / self.done_estimated_s, RESCALE_RANGE[0]), RESCALE_RANGE[1])

    def remaining_s(self) -> float:
        r = self.ratio()
        return sum((p.seconds - p.fixed) * r + p.fixed for p in self.parts.values())

    def _shares(self, cell_id: str) -> list[tuple[str, float, float]]:
        """(part key, seconds, fixed seconds) of each part not done yet that holds some of the cell's price."""
        price = self.prices.get(cell_id)
        if price is None or price.source == "skip":
            part = self.parts.get(cell_id)  # a cell run alone is a part of its own
            return [(cell_id, part.seconds, part.fixed)] if part is not None else []
        p = price.parts
        load_timing = p.get("load", 0.0) + p.get("timing", 0.0)
        scen = p.get("scenarios", 0.0)
        out = []
        label = self.labels.get(cell_id)
        if label in self.parts:
            own = p.get("stages", 0.0) + scen + (0.0 if self.timed_apart else load_timing)
            out.append((label, own, scen))
        if self.timed_apart and TIMING_PHASE in self.parts:
            out.append((TIMING_PHASE, load_timing, 0.0))
        if cell_id in self.parts:
            out.append((cell_id, self.parts[cell_id].seconds, self.parts[cell_id].fixed))
        return out

    def cell_left_s(self, cell_id: str) -> float:
        """The seconds of the cell's price still ahead (its parts not done yet), rescaled as `remaining_s` is: what
        leaving it for later saves."""
        r = self.ratio()
        return sum((seconds - fixed) * r + fixed for _, seconds, fixed in self._shares(cell_id))

    def drop(self, cell_id: str) -> float:
        """Leave the cell for later: its share of the parts not done yet comes out of them (a part it alone held
        goes); returns the seconds saved (`cell_left_s`)."""
        saved = self.cell_left_s(cell_id)
        for key, seconds, fixed in self._shares(cell_id):
            part = self.parts[key]
            left, left_fixed = part.seconds - seconds, part.fixed - fixed
            if key == cell_id or left <= 1e-9:
                del self.parts[key]
            else:
                self.parts[key] = Part(key, left, part.source, max(0.0, left_fixed))
        self.prices.pop(cell_id, None)
        return saved

    def sources(self) -> dict[str, int]:
        """Cells per source (parts per source where no cell was priced)."""
        if self.cells:
            return dict(self.cells)
        out: dict[str, int] = {}
        for p in self.parts.values():
            out[p.source] = out.get(p.source, 0) + 1
        return out


def compose(
    workloads: Mapping[str, list[Cell]],
    prices: Mapping[str, Price],
    *,
    share: float,
    episodes: int,
    alone: Mapping[str, Price] | None = None,
    finish: Price | None = None,
    scenario_phase: Price | None = None,
) -> Estimate:
    """The run's parts from its cells' prices (the module's rule); a cell priced as a skip costs nothing."""
    parts: dict[str, Part] = {}
    runs = {
        label: [prices[c.id] for c in cells if prices[c.id].source != "skip"]
        for label, cells in workloads.items()
    }
    preps = [p for ps in runs.values() for p in ps]
    if preps:
        wall = max(sum(p.prep_s() for p in preps) * share, max(p.prep_s() for p in preps))
        parts[EXPORT_PHASE] = Part(EXPORT_PHASE, wall, _worst(p.source for p in preps))
    timed = []
    for label, ps in runs.items():
        if not ps:  # every cell of the workload is a skip here
            continue
        load_timing = sum(p.parts.get("load", 0.0) + p.parts.get("timing", 0.0) for p in ps)
        own = sum(p.parts.get("stages", 0.0) + p.parts.get("scenarios", 0.0) for p in ps)
        if episodes > 1:
            timed.append(Part(label, load_timing, _worst(p.source for p in ps)))
        else:  # timed in its own test: the timing phase does not run
            own += load_timing
        fixed = sum(p.parts.get("scenarios", 0.0) for p in ps)
        parts[label] = Part(label, own, _worst(p.source for p in ps), fixed)
    if timed:
        parts[TIMING_PHASE] = Part(
            TIMING_PHASE, sum(p.seconds for p in timed), _worst(p.source for p in timed)
        )
    for cid, p in (alone or {}).items():
        parts[cid] = Part(cid, sum(p.parts.values()), p.source)
    if scenario_phase is not None:  # LoadGen's durations are wall-clock: never rescaled
        seconds = sum(scenario_phase.parts.values())
        parts[SCENARIO_PHASE] = Part(SCENARIO_PHASE, seconds, scenario_phase.source, fixed=seconds)
    if finish is not None:
        parts[FINISH] = Part(FINISH, sum(finish.parts.values()), finish.source)
    cells: dict[str, int] = {}
    for p in preps:
        cells[p.source] = cells.get(p.source, 0) + 1
    labels = {c.id: label for label, cs in workloads.items() for c in cs}
    return Estimate(parts, cells=cells, prices=dict(prices), labels=labels, timed_apart=episodes > 1)


def estimate(
    workloads: dict[str, list[Cell]],
    alone: Iterable[Cell],
    known: Known,
    *,
    workers: int,
    episodes: int,
    scenario_cells: Iterable[str] = (),
    cannot_run: Callable[[Cell], bool] = lambda cell: False,
    traced: Callable[[Cell], bool] = lambda cell: False,
    scenario_phase_s: float | None = None,
    phase_out_of_reach: Mapping[str, str] | None = None,
) -> Estimate:
    """Price a run: `workloads` (label -> its cells, timed together), the cells run `alone`, from what is `known`.
    A cell that `cannot_run` here (its backend or device is missing) is a skip: priced at nothing, unless it is
    `traced` on a fake CUDA device (--fake-cuda): then its export alone is priced (harness.plan.price.export_only)."""
    label = {c.id: name for name, cells in workloads.items() for c in cells}
    cells = [c for cs in workloads.values() for c in cs]
    fake = {c.id for c in cells if traced(c)}
    skips = {c.id for c in cells if c.id not in fake and cannot_run(c)}
    prices = price_cells(
        cells, known, skips=skips, scenario_cells=scenario_cells, label_of=lambda c: label[c.id], traced=fake
    )
    est = compose(
        workloads,
        prices,
        share=export_share(workers, known.recorded),
        episodes=episodes,
        alone={c.id: alone_price(c, known) for c in alone},
        finish=finish_price(known),
        scenario_phase=None
        if scenario_phase_s is None
        else scenario_phase_price(known, scenario_phase_s, phase_out_of_reach),
    )
    est.workers = workers
    return est


def _worst(sources: Iterable[str]) -> str:
    """A part's source: the least measured of its cells' ("plan" before "nearest", "export cache", "history")."""
    sources = set(sources)
    return next((s for s in ("plan", "nearest", "export cache", "history") if s in sources), "recorded")


def fmt_duration(seconds: float) -> str:
    """`1 h 05 min`, `12 min 30 s`, `45 s`."""
    s = round(max(0.0, seconds))
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    if s >= 60:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s} s"
