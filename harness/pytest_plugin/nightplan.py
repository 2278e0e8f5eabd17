"""`--time-budget`: the collected cells cut to the night's plan (harness.plan.budget) before the run starts.

Runs at the end of collection, after -k/-m deselection and before pytest-split picks its shard (both hooks are
`trylast`; pytest-split's, registered first, runs last), so every shard computes the same plan from the same
history and splits only the selected cells. With `--splits N` the shards run at once, so the plan holds N times
the budget. The cells left out are deselected (pytest counts them as such) and are not records: env.json's `plan`
lists them under their reason.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from pathlib import Path

from harness import threads as thread_budget
from harness.core.envinfo import LIBRARIES
from harness.core.version import library_version
from harness.execute.planning import fake_cuda
from harness.execute.workload import workload_label
from harness.history.store import default_db_path
from harness.plan import changes, durations, phase_answers, price
from harness.plan.budget import NightPlan, plan_night
from harness.plan.matrix import PlannedCell
from harness.plan.screen_budget import NO_BUDGET, RESERVE_SHARE, ScreenPlan, in_words, plan_screen, speed_rank
from harness.pytest_plugin.eta import planned_scenario_cells
from harness.pytest_plugin.preview import skip_reason

log = logging.getLogger(__name__)


def last_run_env(db_path: Path) -> dict | None:
    """The env.json of the newest run in the history database (its commit and libraries), None without one."""
    if not db_path.is_file():
        return None
    try:
        conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        try:
            row = conn.execute(
                "SELECT json_extract(env, '$.git_commit'), json_extract(env, '$.libraries'), run_id FROM runs"
                " ORDER BY started_at DESC LIMIT 1"
            ).fetchone()
        finally:
            conn.close()
    except sqlite3.Error as e:
        log.warning("plan: %s not read (%s)", db_path, e)
        return None
    if row is None:
        return None
    return {"git_commit": row[0], "libraries": json.loads(row[1]) if row[1] else None, "run_id": row[2]}


def estimate_planned(
    planned: list[PlannedCell],
    db: Path,
    cache_dir: Path | None,
    scenarios: str,
    reasons: dict[str, str | None] | None = None,
    *,
    results_dir: Path | None = None,
    speed: dict | None = None,
    fake_target: str | None = None,
) -> tuple[durations.History, dict[str, price.CellCost], set[str]]:
    """The history of `db`, each planned cell's cost (harness.plan.price: the timelines of `results_dir`, the
    history, the export cache, the plan's table scaled by this machine's `speed`, measured here when not given; the
    export and probe at 1 / physical cores, the export workers' default), and the cells that are a skip here
    (priced at nothing); each cell's skip reason (None: it runs here) is put in `reasons` when given. With
    `fake_target` (--fake-cuda) a CUDA cell traced on a fake device here costs its export alone."""
    hist = durations.read_history(db)
    probes: dict[tuple[str, str], str | None] = {}
    reasons = {} if reasons is None else reasons
    for p in planned:
        reasons[p.cell.id] = skip_reason(p, probes, fake_target)
    skips = {p.cell.id for p in planned if reasons[p.cell.id]}
    traced = {p.cell.id for p in planned if fake_cuda(p.cell, fake_target)}  # a skip wins (price_cells)
    cells = [p.cell for p in planned]
    scen = planned_scenario_cells(scenarios, cells, phase=True)
    if speed is None:
        speed = this_machine()
    known = price.Known(
        price.Table.read(),
        speed=speed,
        recorded=durations.read_recorded(results_dir) if results_dir is not None else durations.Recorded(),
        history=hist,
        cached=frozenset(durations.cached_cells(cache_dir)),
    )
    prices = price.price_cells(
        cells, known, skips=skips, scenario_cells=scen, label_of=workload_label, traced=traced
    )
    share = price.export_share(thread_budget.physical_cores(), known.recorded)
    return hist, price.cell_costs(prices, share), skips


def this_machine() -> dict:
    """This machine's speed figures (harness.measure.machine_speed), at the run's thread budget."""
    from harness.measure import machine_speed

    return machine_speed.measure(thread_budget.budget())


def make_plan(
    planned: list[PlannedCell],
    budget_s: float,
    *,
    results_dir: Path,
    cache_dir: Path,
    scenarios: str,
    budget_text: str,
    reasons: dict[str, str | None] | None = None,
    done: frozenset[str] = frozenset(),
    order: str = "night",
    fake_target: str | None = None,
    scenario_budget_s: float | None = None,
    phase_out_of_reach: dict[str, str] | None = None,
) -> NightPlan:
    """The plan of `planned` (the collected cells) within `budget_s`, from the history of `results_dir`; each
    cell's skip reason here is put in `reasons` when given (for the --collect-only preview). `order`: "night"
    (harness.plan.budget) or "screen" (the main job's, harness.plan.screen_budget: a ScreenPlan). `fake_target`:
    --fake-cuda's target (its traced cells cost their export alone). `scenario_budget_s`: the scenario phase's
    budget, where the run has one (the main job's plan holds its price back, harness.plan.price.
    scenario_phase_price, less the answers `phase_out_of_reach`: harness.plan.phase_answers)."""
    if order == "screen":
        return _screen_plan(planned, budget_s, results_dir=results_dir, cache_dir=cache_dir, scenarios=scenarios,
                            budget_text=budget_text, reasons=reasons, done=done, fake_target=fake_target,
                            scenario_budget_s=scenario_budget_s, phase_out_of_reach=phase_out_of_reach)  # fmt: skip
    t0 = time.perf_counter()
    db = default_db_path(results_dir)
    hist, costs, skips = estimate_planned(
        planned, db, cache_dir, scenarios, reasons, results_dir=results_dir, fake_target=fake_target
    )
    for cid in done & costs.keys():  # recorded before this session (--resume): skipped at once
        costs[cid] = price.CellCost(0.0, "skip", "already recorded in this run (--resume)")
        skips.add(cid)
    cells = [p.cell for p in planned]
    ids = [c.id for c in cells]
    priority: dict[str, str] = {}
    for kind, group in (("missing", hist.missing), ("failed", hist.failed), ("regressed", hist.regressed)):
        priority.update({c: kind for c in group})  # the later kind wins: regressed over failed over missing
    last = last_run_env(db)
    touched: dict[str, str] = {}
    change = "no earlier run in the history: nothing to compare"
    if last is not None:
        files, why_not = changes.changed_files(last.get("git_commit"))
        now = {name: library_version(name) for name in LIBRARIES}
        touched = changes.touched([c for c in cells if c.id not in skips], files, last.get("libraries"), now)
        change = (
            f"since run {last['run_id']}: {len(files)} changed file(s)"
            + (f" ({why_not})" if why_not else "")
            + f", {len(touched)} cell(s) touched"
        )
    plan = plan_night(
        ids,
        costs,
        budget_s,
        priority={c: k for c, k in priority.items() if c not in skips},
        touched=touched,
        last_measured={c: m.started_at for c, m in hist.measured.items()},
    )
    plan.extra = {
        "budget": budget_text,
        "history": str(db),
        "history_runs": len({m.run_id for m in hist.measured.values()}),
        "change": change,
        "planned_in_s": round(time.perf_counter() - t0, 1),
    }
    return plan


def _screen_plan(
    planned, budget_s, *, results_dir, cache_dir, scenarios, budget_text, reasons, done, fake_target=None,
    scenario_budget_s=None, phase_out_of_reach=None,
) -> ScreenPlan:  # fmt: skip
    """The main job's plan (harness.plan.screen_budget): make_plan with order="screen"."""
    t0 = time.perf_counter()
    db = default_db_path(results_dir)
    table = price.Table.read()
    recorded = durations.read_recorded(results_dir)
    known = price.Known(table, recorded=recorded)
    end = sum(price.finish_price(known).parts.values())
    phase = 0.0
    if scenario_budget_s is not None:  # the scenario phase, after the workloads
        phase = sum(price.scenario_phase_price(known, scenario_budget_s, phase_out_of_reach).parts.values())
    reserve = (
        end + phase + RESERVE_SHARE * budget_s
    )  # the run's end, the scenario phase, what prices leave out
    _, costs, _ = estimate_planned(
        planned, db, cache_dir, scenarios, reasons, results_dir=results_dir, speed=this_machine(),
        fake_target=fake_target,
    )  # fmt: skip
    for cid in done & costs.keys():  # recorded before this session (--resume): skipped at once
        costs[cid] = price.CellCost(0.0, "skip", "already recorded in this run (--resume)")
    cells = [p.cell for p in planned]
    plan = plan_screen(cells, costs, budget_s, speed_rank(table, cells), reserve_s=reserve)
    plan.extra.update(budget=budget_text, history=str(db), planned_in_s=round(time.perf_counter() - t0, 1),
                      scenario_phase_s=round(phase, 1))  # fmt: skip
    return plan


def apply(config, items: list, planned_of, session, done: frozenset[str] = frozenset()) -> None:
    """Cut `items` (in place) to the plan; the plan on `session.night_plan`, its lines said at once. `done`: the
    cells this run already recorded (--resume skips them: they cost nothing tonight). The default profile takes
    the main job's plan (harness.plan.screen_budget); where its default budget holds every cell, nothing changes
    (no plan in env.json, nothing deselected) but one progress line."""
    budget_s = session.time_budget_s
    splits = getattr(config.option, "splits", None)
    if splits:
        budget_s *= int(splits)
    how = dict(
        results_dir=session.results_dir,
        cache_dir=session.cache_dir,
        scenarios=session.scenarios,
        budget_text=session.time_budget_text
        + (f" x {splits} shards" if splits else "")
        + (" (the main job's default)" if session.default_budget else ""),
        reasons=session.skip_reasons,
        done=done,
        fake_target=session.run_config.fake_cuda,
        scenario_budget_s=session.run_config.scenario_budget_s if session.run_config.scenario_phase else None,
        phase_out_of_reach=phase_answers.for_this_run(session.run_config.camera_fps)
        if session.run_config.scenario_phase
        else None,
    )
    planned = planned_of(items)
    plan = make_plan(planned, budget_s, order=session.budget_order, **how)
    session.plan_order = list(plan.order)  # a re-plan leaves its last cells for later first
    if session.default_budget and not plan.left_out:
        session.progress(
            f"plan: every one of the {len(planned)} cells fits the default budget of {in_words(budget_s)}"
            f" (--time-budget {NO_BUDGET} turns it off)"
        )
        return
    keep = set(plan.selected)
    selected, deselected = [], []
    for item in items:
        p = getattr(getattr(item, "callspec", None), "params", {}).get("cell")
        (deselected if isinstance(p, PlannedCell) and p.cell.id not in keep else selected).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = selected
    session.night_plan = plan
    for line in plan.lines(session.profile):
        session.notice(line)
