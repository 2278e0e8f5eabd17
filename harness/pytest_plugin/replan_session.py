"""The re-plan of a running session (harness.plan.replan): after the export phase, the timing phase and each
workload, where the time so far and the estimate of what is left run past --time-budget (the main job's 15 minutes
by default), the lowest-ranked cells not yet started are left for later.

The plugin calls `check` after each of those parts (plugin.tick). The cells left for later are kept on the session
(`left_for_later`: cell id -> the skip reason their tests give; they are not timed, not recorded), their share comes
out of the estimate (harness.plan.estimate.Estimate.drop), env.json's `plan` lists them (harness.plan.replan.
replanned) and one line says so. Never raises: a re-plan that fails leaves the run as it was.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Protocol

import pytest

from harness.core.results_dir import read_env, write_env
from harness.plan import replan as rp
from harness.plan.screen_budget import left_for_later, suggested_budget

if TYPE_CHECKING:
    from harness.execute.config import RunConfig
    from harness.pytest_plugin.eta import RunClock

log = logging.getLogger(__name__)

#: the parts of the run after which a re-plan may happen (plugin.tick's events), and their words
AFTER = {"export_phase_done": "the export phase", "timing_phase_done": "the timing phase"}
WORKLOAD_DONE = "workload_done"


class Session(Protocol):
    """What the re-plan reads of the plugin's session (harness.pytest_plugin.plugin.BenchSession)."""

    time_budget_s: float | None
    time_budget_text: str | None
    budget_order: str
    t0: float
    clock: RunClock
    plan_order: list[str]
    left_for_later: dict[str, str]
    selected: list
    planned: list
    recorded: dict
    rerun: dict
    run_id: str
    run_config: RunConfig

    def notice(self, msg: str) -> None: ...


def after_words(event: str, args: tuple) -> str | None:
    """`the export phase`, `the timing phase`, `yolo26n-detect-e2e-cpu-640x640-b1`, or None (no re-plan after it)."""
    if event in AFTER:
        return AFTER[event]
    if event == WORKLOAD_DONE and args:
        return str(args[0])
    return None


def candidates(session: Session) -> dict[str, float]:
    """Cell id -> the seconds leaving it for later saves, for every selected cell not yet started."""
    est = session.clock.estimate
    pending = session.clock.pending
    out: dict[str, float] = {}
    for p in session.selected:
        cid = p.cell.id
        if cid in session.left_for_later or (cid in session.recorded and cid not in session.rerun):
            continue
        alone = p.excluded or p.cell.shape.dynamic
        if alone and cid not in est.parts:
            continue  # run already
        if not alone and est.labels.get(cid) not in pending:
            continue  # its workload ran
        out[cid] = est.cell_left_s(cid)
    return out


def check(session: Session, event: str, *args) -> rp.Replan | None:
    """After `event` (plugin.tick's): leave for later what the budget cannot hold any more, and say so."""
    after = after_words(event, args)
    clock = getattr(session, "clock", None)
    if after is None or clock is None or session.time_budget_s is None or not session.plan_order:
        return None
    try:
        return _check(session, after)
    except pytest.exit.Exception:  # the run's own stop (a full results disk while env.json took the plan)
        raise
    except Exception:  # a re-plan never stops a run
        log.exception("re-plan after %s failed", after)
        return None


def _check(session: Session, after: str) -> rp.Replan | None:
    est = session.clock.estimate
    budget = float(session.time_budget_s)
    elapsed = time.perf_counter() - session.t0
    left = est.remaining_s()
    if elapsed + left <= budget:
        return None
    plan = rp.Replan(after, elapsed, left, budget, est.ratio())
    chosen = rp.choose(session.plan_order, candidates(session), plan.over_s)
    if not chosen:
        return None
    labels = {cid: est.labels.get(cid) for cid in chosen}
    for cid in chosen:
        plan.saved_s += est.drop(cid)
    plan.cells = chosen
    for label in set(labels.values()) - {None}:
        if label in session.clock.pending and label not in est.parts:
            session.clock.pending.discard(label)  # every cell of it left for later: it never runs
            session.clock.workloads -= 1
    run_dir = session.run_config.run_dir
    try:
        env = read_env(run_dir) or {}
    except (OSError, ValueError):
        env = {}
    old = env.get("plan") if isinstance(env.get("plan"), dict) else None
    cells = {p.cell.id: p.cell for p in session.planned}
    waiting = [
        c for ids in ((old or {}).get("left_out") or {}).values() if isinstance(ids, list) for c in ids
    ]
    later_cells = [cells[c] for c in [*waiting, *chosen] if c in cells]
    more = float((old or {}).get("more_s") or 0.0) + plan.saved_s
    suggested = suggested_budget(budget + more)
    later = left_for_later(later_cells)
    resume = f"--resume --run-id {session.run_id} --time-budget {suggested}"
    env["plan"] = rp.replanned(
        old,
        plan,
        kind=session.budget_order,
        budget_text=str(session.time_budget_text or f"{budget:.0f}s"),
        selected_ids=[p.cell.id for p in session.selected],
        profile_cells=len(session.planned),
        later=later,
        suggested=suggested,
    )
    try:
        write_env(run_dir, env)
    except (OSError, ValueError) as e:
        log.warning("re-plan: env.json not written (%s)", e)
    why = (
        f"left for later by the re-plan after {after} (the run went slower than its estimate; not a record): "
        f"{resume} runs it"
    )
    session.left_for_later.update(dict.fromkeys(chosen, why))
    session.notice(plan.line(left_for_later([cells[c] for c in chosen if c in cells]), resume))
    return plan
