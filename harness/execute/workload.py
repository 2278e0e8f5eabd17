"""Workloads: the cells that differ only in their backend, timed together, and the export phase ahead of them.

A workload is one model, task, head, device, shape, batch and precision; the workloads of one shape that differ
only in precision (fp32 and int8) are timed as one group, so that an int8 cell's paired ratio to its fp32 cell is
measured side by side too. A group's cells' runners are loaded together and timed interleaved (harness.measure.interleave), so every backend's rounds sample the same machine states, and each
ok cell gets its paired ratio to the workload's reference (torch-eager where it ran ok) and to every other ok cell.
Memory is measured apart: host memory in the probe's fresh process, and a tracker of one runtime's memory
(`Tracker.solo_only`) stops after its runner's warm-up, before the next runner loads.

The export phase runs first (`prepare_all`): every planned cell is planned, exported (or found in the cache) and
probed in a pool of threads, each export and probe being its own process, so the timed rounds later run on a quiet
machine and the cold wall time drops. Each attempt then goes on from its load when its workload is timed.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor

from harness import backends
from harness.core.cell import Cell
from harness.core.record import CellRecord, set_null
from harness.execute.attempt import remedies
from harness.execute.isolate import kill_live_workers
from harness.execute.measuring import time_together
from harness.execute.recording import crashed, finish, start
from harness.execute.screen import screen
from harness.execute.services import RunServices, RunState
from harness.execute.stages import Pipeline, end
from harness.execute.state import Attempt, AttemptState
from harness.execute.usecase import time_e2e_together
from harness.measure.interleave import Interleaved, episode_label

log = logging.getLogger(__name__)

REFERENCE_BACKEND = "torch-eager"


def workload_key(cell: Cell) -> tuple:
    """What the cells of one workload share: everything but the backend."""
    return (cell.size, cell.task, cell.head, cell.device, cell.shape.label, cell.batch, cell.precision)


def timing_key(cell: Cell) -> tuple:
    """What the cells timed together share: everything but the backend and the precision."""
    return workload_key(cell)[:-1]


def workload_label(cell: Cell) -> str:
    """The name of the timing group of `cell` (its progress lines, its shuffle seed, its pytest-xdist group)."""
    return f"{cell.model}-{cell.task}-{cell.head}-{cell.device}-{cell.shape.label}-b{cell.batch}"


def group(cells: list[Cell]) -> list[list[Cell]]:
    """`cells` grouped for timing (harness.execute.workload.timing_key), in the order each group first appears."""
    out: dict[tuple, list[Cell]] = {}
    for c in cells:
        out.setdefault(timing_key(c), []).append(c)
    return list(out.values())


# -- the export phase ----------------------------------------------------------------------------------------------
def prepare_all(
    cells: list[Cell], workers: int, services: RunServices, stages: Pipeline
) -> dict[str, AttemptState]:
    """Plan, export and probe every cell (dynamic ones excepted: their export is a sweep of its own), `workers` at
    once; cell id -> its attempt, stopped before its load."""
    # Longest first (LPT scheduling), so no long export is left running alone at the end of the phase.
    todo = sorted((c for c in cells if not c.shape.dynamic), key=export_cost, reverse=True)
    if todo:
        services.progress(f"export phase: {len(todo)} cells, {workers} at once")
    t0 = time.perf_counter()

    def one(cell: Cell) -> AttemptState:
        s = start(Attempt(cell, cell.id), services.config.run_id, services.config.run_dir)
        try:
            stages.advance(s, until="load")
        except Exception as e:  # a harness bug in one cell must not lose the others
            crashed(s, e)
            stages.over(s)
        s.prep_s = time.perf_counter() - s.t0
        return s

    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="export") as pool:
        try:
            states = list(pool.map(one, todo))
        except BaseException:
            # interrupted (Ctrl-C, SIGTERM): end the running workers, so the pool's threads return now, and start
            # none of the exports still queued (the pool's exit would otherwise run them all first)
            kill_live_workers()
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    if todo:
        services.progress(f"export phase done in {time.perf_counter() - t0:.1f}s")
    return {s.attempt.cell_id: s for s in states}


SIZE_RANK = {"n": 1, "s": 2, "m": 3, "l": 4, "x": 5}
#: backends whose exports take longest (lowering, partitioning): started first
SLOW_EXPORTS = ("executorch", "aoti", "torch-compile", "tensorrt")


def export_cost(cell: Cell) -> float:
    """A rough rank of how long a cell's export and probe take: model size, then slow exporters, then pixels."""
    slow = any(cell.backend.startswith(b) for b in SLOW_EXPORTS)
    area = cell.shape.height * cell.shape.width * cell.batch / (640 * 640)
    return SIZE_RANK.get(cell.size, 3) * 2.0 + (1.5 if slow else 0.0) + min(area, 4.0) * 0.5


# -- one workload --------------------------------------------------------------------------------------------------
def run_workload(
    cells: list[Cell], services: RunServices, run: RunState, stages: Pipeline
) -> dict[str, list[CellRecord]]:
    """Load the workload's cells, time them interleaved, check parity, and write their records (then each failed
    cell's remedy attempts, timed alone). Returns cell id -> records. A workload the timing phase (`time_all`)
    already loaded and timed goes on from there."""
    label = workload_label(cells[0])
    loaded = run.timed_workloads.pop(label, None)
    if loaded is not None and {s.attempt.cell_id for s in loaded[0]} == {c.id for c in cells}:
        states, ready = loaded
    else:
        states, ready = _load(cells, services, run, stages)
        if ready:
            _time_together(ready, label, services)
    if ready:
        time_e2e_together(ready, label, services.config, services.progress)
    # the reference backend first: its accuracy pass is the PyTorch fp32 reference the others' reuse
    for s in sorted(states, key=lambda s: s.cell.backend != REFERENCE_BACKEND):
        try:
            stages.advance(s)
        except Exception as e:
            crashed(s, e)
        finally:
            end(s)
    set_paired(states)
    out = {}
    for s in states:
        rec = finish(s, services.writer)
        out[s.attempt.cell_id] = [rec, *remedies(s.cell, rec, services, run, stages)]
    run.check_stop()  # every cell of the workload recorded, then the run stops on a full disk
    return out


def _load(
    cells: list[Cell], services: RunServices, run: RunState, stages: Pipeline
) -> tuple[list[AttemptState], list[AttemptState]]:
    """The workload's attempts taken up to their timed rounds (loaded, first run, warm-up): (all, the ready ones)."""
    states = [_resume(c, services, run) for c in cells]
    ready = []
    for s in states:
        try:
            if stages.advance(s, until="timed_rounds"):
                _stop_solo(s)
                ready.append(s)
        except Exception as e:
            crashed(s, e)
            stages.over(s)
    return states, ready


def time_all(
    cells: list[Cell], episodes: int, services: RunServices, run: RunState, stages: Pipeline
) -> None:
    """The timing phase: every workload of `cells` loaded, then timed interleaved in `episodes` episodes spread over
    the phase (each episode times every workload in turn), so a workload's trials sample machine states minutes
    apart rather than one moment's (harness.measure.interleave.run_interleaved). The loaded, timed attempts wait
    in `run.timed_workloads` for `run_workload` to go on with them (end to end, parity, scenarios, records)."""
    loaded = []
    for cells_of in group(cells):
        states, ready = _load(cells_of, services, run, stages)
        label = workload_label(cells_of[0])
        run.timed_workloads[label] = (states, ready)
        if ready:
            loaded.append((label, ready))
    for k in range(1, episodes + 1):
        for label, ready in loaded:
            _time_together(ready, label, services, episode=(k, episodes))
    run.scenario_screen = screen(s for _, ready in loaded for s in ready)


def _resume(cell: Cell, services: RunServices, run: RunState) -> AttemptState:
    """The cell's attempt: from the export phase when it ran there, else a fresh one."""
    s = run.prepared.pop(cell.id, None)
    if s is None:
        return start(Attempt(cell, cell.id), services.config.run_id, services.config.run_dir)
    s.t0 = time.perf_counter() - s.prep_s  # duration_s: export phase + this phase
    return s


def _stop_solo(s: AttemptState) -> None:
    """Stop the trackers of one runtime's own quantities (memory) before the next runner loads."""
    for t in [t for t in s.trackers if t.solo_only]:
        try:
            t.stop(0)
            t.fill(s.rec)
        except Exception as e:  # a measurement that fails must not lose the cell
            log.exception("tracker %s failed", type(t).__name__)
            set_null(s.rec, t.field or type(t).__name__, f"tracker failed: {type(e).__name__}: {e}")
        s.trackers.remove(t)


def _time_together(
    ready: list[AttemptState], label: str, services: RunServices, episode: tuple[int, int] = (1, 1)
) -> Interleaved:
    """The interleaved timed rounds of the workload's loaded runners (harness.execute.measuring.time_together); one
    episode of several goes on with the timing of the earlier ones."""
    names = ", ".join(s.cell.backend for s in ready)
    part = f" ({episode_label(episode)})" if episode[1] > 1 else ""
    services.progress(f"{label}: timing {len(ready)} runner(s) interleaved ({names}){part}")
    reference = min(ready, key=_order).attempt.cell_id if len(ready) > 1 else None
    policy = services.config.rounds_policy()
    timed = time_together(ready, label, services.canary, policy, reference, episode)
    services.progress(f"{label}: {timed.trials} trials in {timed.elapsed_s:.1f}s ({timed.stop})")
    return timed


# -- paired ratios -------------------------------------------------------------------------------------------------
def _order(s: AttemptState) -> tuple:
    name = s.cell.backend
    try:
        order = backends.get(name).display_order
    except KeyError:
        order = 999
    return (name != REFERENCE_BACKEND, s.cell.precision != "fp32", order, name, s.cell.precision)


def set_paired(states: list[AttemptState]) -> None:
    """Each ok cell's `paired`: its p50 over the reference's (torch-eager fp32 where it ran ok, else the first ok
    backend in the registry's order, fp32 first), and over every other ok cell timed with it (an int8 cell's fp32
    counterpart among them), from the trials they shared."""
    ok = [s for s in states if s.rec.status == "ok" and s.timed is not None]
    timed = ok[0].timed if ok else None
    if len(ok) < 2 or timed is None or any(s.timed is not timed for s in ok):
        for s in states:
            why = (
                "the only ok backend of its workload in this run"
                if s.rec.status == "ok"
                else f"not an ok cell ({s.rec.status})"
            )
            set_null(s.rec, "paired", why)
        return
    ref = min(ok, key=_order)
    ref_id = ref.attempt.cell_id
    for s in states:
        key = s.attempt.cell_id
        if s not in ok:
            set_null(s.rec, "paired", f"not an ok cell ({s.rec.status})")
            continue
        mine = timed.paired(key, ref_id) if key != ref_id else None
        others = {}
        for o in ok:
            if o is not s:
                p = timed.paired(key, o.attempt.cell_id)
                if p is not None:
                    others[o.attempt.cell_id] = {k: v for k, v in p.to_dict().items() if k != "reference"}
        s.rec.paired = {
            "reference": ref_id,
            "reference_backend": ref.cell.backend,
            "ratio": 1.0 if key == ref_id else (mine.ratio if mine else None),
            "ratio_ci": [1.0, 1.0] if key == ref_id else (mine.to_dict()["ratio_ci"] if mine else None),
            "trials": mine.trials if mine else timed.trials,
            "estimator": "median over trials of (block median / reference block median); 95% order-statistic "
            "interval",
            "others": others,
        }
