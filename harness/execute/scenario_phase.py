"""The scenario phase: decide, then measure the decision.

After the workloads have recorded every cell, the decision's own code runs on the run's records and names, per use
case, the configurations whose figures its answers show (harness.decide.to_measure): the most accurate pick and
those tied with it, the fastest beside it, the one with margin, the largest size on the ladder, the configuration
serving the most cameras. Each of those that lacks its use case's scenario is loaded again (its export from the
cache) and measured: single-stream for the camera and the ladder, LoadGen's server scenario (after the offline sweep
it starts from) for the server, offline for offline, the camera-capacity search for the cameras. The record gets the
results in place (harness.core.results_dir.RecordWriter.replace), and the decision is taken again: a candidate that
its scenario rejects (a single-stream p99 over the frame time that its end-to-end rounds kept) leaves the answer, and
the next one is measured in turn. Nothing is measured twice.

The phase spends at most its budget (--scenario-budget; within --time-budget, what the plan set aside): a
measurement starts only when its expected seconds (from the scenarios' durations and the cell's end-to-end p50) fit
in what is left, and one under way finishes. What an answer needs and the budget left out is said in the cell's
record (`null_reasons["scenarios.<name>"]`: "not measured within the budget ...") and shown so by the decision,
never as an estimate; env.json's `scenario_phase` lists what was measured, for which answer, and what was not.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.record import CellRecord
from harness.core.results_dir import load_run, read_env, write_env
from harness.decide.decision import decide
from harness.decide.index import index_runs
from harness.decide.picks import Constraints
from harness.decide.to_measure import Wanted, wanted
from harness.diagnosis.failure import first_line
from harness.execute import interrupt
from harness.execute.recording import start
from harness.execute.services import RunServices
from harness.execute.stages import Pipeline, end
from harness.execute.state import Attempt
from harness.execute.usecase import measure_scenarios, put_scenarios, scenario_config
from harness.scenarios import NEEDS, capacity, with_needs

log = logging.getLogger(__name__)

#: env.json's key for what the phase did
ENV_KEY = "scenario_phase"
#: seconds a load, first run and warm-up take at least, beside the record's own load time
LOAD_MARGIN_S = 1.0


@dataclass
class PhaseLog:
    """What the phase measured and what it left, for env.json and the progress lines."""

    budget_s: float
    spent_s: float = 0.0
    decisions: int = 0
    measured: list[dict] = field(default_factory=list)
    left: list[dict] = field(default_factory=list)

    def to_env(self) -> dict:
        return {
            "budget_s": round(self.budget_s, 1),
            "spent_s": round(self.spent_s, 1),
            "decisions": self.decisions,
            "measured": self.measured,
            "not_measured": self.left,
            "rule": "the decision's own code names the configurations its answers show "
            "(harness.decide.to_measure); each lacking its use case's scenario is measured, then the decision is "
            "taken again, until none lacks one or the budget is spent",
        }


def cell_of(rec: CellRecord) -> Cell | None:
    """The cell a record ran, or None where the phase cannot load it again (a remedy attempt, a dynamic artifact)."""
    if rec.remedy or rec.dynamic or not rec.height or not rec.width:
        return None
    try:
        return Cell(
            str(rec.size), str(rec.task), str(rec.head), str(rec.backend), str(rec.device),
            Shape(int(rec.height), int(rec.width)), int(rec.batch or 1), str(rec.precision_requested),
        )  # fmt: skip
    except ValueError:
        return None


def expected_s(rec: CellRecord, names: tuple[str, ...], services: RunServices) -> float:
    """The seconds measuring `names` (with what they start from) of `rec`'s cell is expected to take: its load,
    then each scenario's minimum duration or query count at its end-to-end p50, the server's rate search at its
    most steps, the camera search at its budgets."""
    cfg = scenario_config(services.config, 1.0)
    d = cfg.durations
    cell = cell_of(rec)
    p50 = (rec.latency_e2e_ms.p50 if rec.latency_e2e_ms else None) or 10.0
    query_s = p50 / 1000.0 * (services.slowdown_factor(cell) if cell is not None else 1.0)
    cost = {
        "single-stream": max(d.single_ms / 1000.0, d.single_queries * query_s),
        "multi-stream": max(d.multi_ms / 1000.0, d.multi_queries * query_s),
        "offline": d.offline_rounds * len(cfg.offline_sweep) * d.offline_ms / 1000.0,
        "server": d.server_steps * max(d.server_ms / 1000.0, d.server_queries * query_s),
        "camera-capacity": capacity.SCREEN_BUDGET_S + capacity.BOUND_BUDGET_S,
        "camera": cfg.camera_s,
    }
    return (rec.load_s or 0.0) + LOAD_MARGIN_S + sum(cost.get(n, 0.0) for n in names)


#: how the phase measures scenarios `names` of a recorded cell: (results, None), or ({}, why not)
Measure = Callable[[CellRecord, tuple[str, ...]], tuple[dict, "str | None"]]


def run_phase(
    services: RunServices,
    stages: Pipeline | None,
    cons: Constraints,
    budget_s: float,
    measure: Measure | None = None,
) -> PhaseLog:
    """Decide on the run's records, measure what the answers lack, decide again; within `budget_s` seconds.
    `measure`: how a cell's scenarios are measured (by default its runner loaded again through `stages`, `_measure`;
    a test gives its own)."""
    cfg, say = services.config, services.progress
    if measure is None:
        assert stages is not None

        def measure(rec: CellRecord, names: tuple[str, ...]) -> tuple[dict, str | None]:
            return _measure(services, stages, rec, names)

    book = PhaseLog(budget_s)
    t0 = time.perf_counter()
    tried: set[tuple[str, str]] = set()
    say(f"scenario phase: the decision's answers measured by their scenarios, within {budget_s:.0f} s")
    while True:
        interrupt.check()
        indexes = index_runs(load_run(cfg.run_dir))
        book.decisions += 1
        todo = [w for w in wanted(decide(indexes, cons), indexes) if (w.cell_id, w.scenario) not in tried]
        if not todo:
            break
        first = todo[0]
        mine = [w for w in todo if w.cell_id == first.cell_id and w.position == first.position]
        rec = indexes[first.position].by_id[first.cell_id]
        names = with_needs({w.scenario for w in mine})
        tried.update((first.cell_id, w.scenario) for w in mine)
        left = budget_s - (time.perf_counter() - t0)
        expect = expected_s(rec, names, services)
        why = _why_not(rec, expect, left, budget_s, cfg.run_id)
        if why:
            _leave(services, rec, mine, why, book)
            continue
        say(
            f"scenario phase: {', '.join(names)} of {rec.cell_id} for "
            + "; ".join(f"{w.use_case} {w.role}" for w in mine)
            + f" (about {expect:.0f} s of {left:.0f} s left)"
        )
        t1 = time.perf_counter()
        results, failed = measure(rec, names)
        seconds = time.perf_counter() - t1
        if failed:
            _leave(services, rec, mine, failed, book)
            continue
        put_scenarios(rec, {n: {**r, "measured_for": _measured_for(n, mine)} for n, r in results.items()})
        services.writer.replace(rec)
        book.measured.append(
            {
                "cell_id": rec.cell_id,
                "scenarios": list(results),
                "for": [f"{w.use_case} {w.role}" for w in mine],
                "seconds": round(seconds, 1),
                "expected_s": round(expect, 1),
            }
        )
    book.spent_s = time.perf_counter() - t0
    say(
        f"scenario phase: {len(book.measured)} configurations measured in {book.spent_s:.0f} s after "
        f"{book.decisions} decisions"
        + (f"; {len(book.left)} left unmeasured (env.json {ENV_KEY})" if book.left else "")
    )
    _write_env(cfg.run_dir, book)
    return book


def _measured_for(name: str, mine: list[Wanted]) -> list[str]:
    """A result's `measured_for`: the answers that asked for it, or the scenario that starts from it."""
    asked = [f"{w.use_case} {w.role}" for w in mine if w.scenario == name]
    return asked or [f"the start of the {n} scenario" for n, needs in NEEDS.items() if name in needs]


def _why_not(rec: CellRecord, expect: float, left: float, budget_s: float, run_id: str) -> str | None:
    """Why the phase does not measure `rec` now, or None."""
    if rec.run_id != run_id:
        return f"recorded by run {rec.run_id}, not this one: the phase measures its own run's cells"
    if rec.status != "ok" or cell_of(rec) is None:
        return f"not a plain cell that ran ({rec.status}): the phase loads plain static-shape cells again"
    if expect > left:
        return (
            f"not measured within the budget: the scenario phase's {budget_s:.0f} s had {max(left, 0):.0f} s left, "
            f"this needed about {expect:.0f} s (--scenario-budget, or a larger --time-budget)"
        )
    return None


def _measure(
    services: RunServices, stages: Pipeline, rec: CellRecord, names: tuple[str, ...]
) -> tuple[dict, str | None]:
    """Load the cell again (its export from the cache), run `names`, close it: (results, None), or ({}, why)."""
    cell = cell_of(rec)
    assert cell is not None
    cfg = services.config
    s = start(Attempt(cell, cell.id), cfg.run_id, cfg.run_dir)
    try:
        if not stages.advance(s, until="timed_rounds"):
            return {}, f"could not be loaded again for its scenarios ({s.rec.status}: {s.rec.reason})"
        results = measure_scenarios(rec, s.runner, cell, cfg, services.slowdown_factor(cell), names)
    except Exception as e:  # one configuration failing must not lose the phase's others
        log.exception("scenario phase: %s failed", rec.cell_id)
        return {}, f"its scenarios failed: {type(e).__name__}: {first_line(str(e))}"
    finally:
        end(s)
    return results, None


def _leave(services: RunServices, rec: CellRecord, mine: list[Wanted], why: str, book: PhaseLog) -> None:
    """Say in the record why each scenario `mine` asks of it was not measured."""
    for w in mine:
        rec.null_reasons[f"scenarios.{w.scenario}"] = why
        book.left.append(
            {"cell_id": rec.cell_id, "scenario": w.scenario, "for": f"{w.use_case} {w.role}", "why": why}
        )
    if rec.run_id == services.config.run_id:
        services.writer.replace(rec)
    services.progress(f"scenario phase: {rec.cell_id} not measured: {why}")


def _write_env(run_dir: Path, book: PhaseLog) -> None:
    env = read_env(run_dir) or {}
    env[ENV_KEY] = book.to_env()
    write_env(run_dir, env)
