"""Workloads: the cells that differ only in their backend, timed together, and the export phase ahead of them.

A workload is one model, task, head, device, shape, batch and precision; the workloads of one shape that differ
only in precision (fp32 and int8) are timed as one group, so that an int8 cell's paired ratio to its fp32 cell is
measured side by side too. A group's cells' runners are loaded together and timed interleaved (harness.measure.interleave), so every backend's rounds sample the same machine states, and each
cell ok when the timing ended gets its paired ratio to the workload's reference (torch-eager where it was ok) and to
every other such cell (`set_paired`), before any cell's later stages; each cell's record is then written as soon as
its own stages end, so a run killed midway keeps every cell it finished.
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
from harness.core.axes import DEFAULT_FAMILY
from harness.core.cell import Cell
from harness.core.record import PENDING, CellRecord, set_null
from harness.execute.attempt import remedies
from harness.execute.isolate import kill_live_workers
from harness.execute.measuring import time_together
from harness.execute.recording import crashed, finish, start
from harness.execute.services import RunServices, RunState
from harness.execute.stages import Pipeline, end
from harness.execute.state import Attempt, AttemptState
from harness.execute.usecase import time_e2e_together
from harness.measure.interleave import Interleaved, episode_label

log = logging.getLogger(__name__)

REFERENCE_BACKEND = "torch-eager"
#: the first stage after the timed rounds: a workload pairs its cells before any of them runs it
AFTER_TIMING = "end_to_end"


def workload_key(cell: Cell) -> tuple:
    """What the cells of one workload share: everything but the backend."""
    return (
        cell.size,
        cell.task,
        cell.head,
        cell.device,
        cell.shape.label,
        cell.batch,
        cell.precision,
        cell.family,
    )


def timing_key(cell: Cell, families: bool = False) -> tuple:
    """What the cells timed together share: everything but the backend and the precision. In a run that holds
    another model family (`families`), also but the head and the family: the YOLO26 cells and the YOLO11 (or
    YOLOv8) cells of one size, task, device, shape and batch are timed in one interleaved group, so that each pair
    has a paired ratio (YOLO11 has the one-to-many head only; YOLO26's e2e head is what it migrates to)."""
    if families:
        return (cell.size, cell.task, cell.device, cell.shape.label, cell.batch)
    return (cell.size, cell.task, cell.head, cell.device, cell.shape.label, cell.batch, cell.family)


def holds_families(cells: list[Cell]) -> bool:
    """Whether `cells` hold a model family other than YOLO26 (their groups then pair the families)."""
    return any(c.family != DEFAULT_FAMILY for c in cells)


def workload_label(cell: Cell) -> str:
    """The name of the timing group of `cell` (its progress lines, its shuffle seed, its pytest-xdist group)."""
    return f"{cell.model}-{cell.task}-{cell.head}-{cell.device}-{cell.shape.label}-b{cell.batch}"


def group_label(cells: list[Cell]) -> str:
    """The name of one timing group: its workload's (`workload_label`) where its cells are of one model and head,
    else the models and heads it pairs (`yolo26n+yolo11n-detect-e2e+raw-cpu-640x640-b1`)."""
    first = cells[0]
    models = list(dict.fromkeys(c.model for c in cells))
    heads = list(dict.fromkeys(c.head for c in cells))
    if len(models) == 1 and len(heads) == 1:
        return workload_label(first)
    return (
        f"{'+'.join(models)}-{first.task}-{'+'.join(heads)}-{first.device}-{first.shape.label}-b{first.batch}"
    )


def group(cells: list[Cell]) -> list[list[Cell]]:
    """`cells` grouped for timing (harness.execute.workload.timing_key, pairing the families where `cells` hold
    another), in the order each group first appears."""
    families = holds_families(cells)
    out: dict[tuple, list[Cell]] = {}
    for c in cells:
        out.setdefault(timing_key(c, families), []).append(c)
    return list(out.values())


def mates_of(cell: Cell, cells: list[Cell]) -> list[Cell]:
    """The cells of `cells` timed in one group with `cell` (itself included; [cell] where it is not among them)."""
    return next((g for g in group(cells) if cell in g), [cell])


def group_labels(cells: list[Cell]) -> dict[str, str]:
    """Cell id -> the name of its timing group (its pytest-xdist group: a group's cells run on one worker)."""
    return {c.id: group_label(g) for g in group(cells) for c in g}


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
    """Load the workload's cells, time them interleaved, pair them, then take each cell through its later stages and
    write its record as soon as they end (then each failed cell's remedy attempts, timed alone, once every runner
    of the workload is closed). Returns cell id -> records. A workload the timing phase (`time_all`) already loaded
    and timed goes on from there.

    A record is written whole the moment its cell's stages end, so a run killed midway (even by SIGKILL, which
    nothing can catch) keeps every cell it finished: the paired ratios, the one thing a record takes from its
    workload's other cells, come from the interleaved timed rounds, and are set (`set_paired`) once every cell's
    timing has been read, before any cell's later stages (end to end, parity, scenarios, operators, accuracy)."""
    label = group_label(cells)
    loaded = _timed_for(cells, run)
    if loaded is not None and {c.id for c in cells} <= {s.attempt.cell_id for s in loaded[0]}:
        states, ready = _only(loaded, {c.id for c in cells})
    else:
        states, ready = _load(cells, services, run, stages)
        if ready:
            _time_together(ready, label, services)
    if ready:
        time_e2e_together(ready, label, services.config, services.progress)
    # the reference backend first: its accuracy pass is the PyTorch fp32 reference the others' reuse
    order = sorted(states, key=lambda s: s.cell.backend != REFERENCE_BACKEND)
    out: dict[str, list[CellRecord]] = {}
    try:
        timed_ok = [s for s in order if _read_timing(s, stages)]
        set_paired(states, timed_ok)
        for s in order:
            _finish_stages(s, stages)
            out[s.attempt.cell_id] = [finish(s, services.writer)]
    finally:  # a write that fails (or an interrupt) leaves no runner of the workload loaded
        for s in states:
            end(s)
    for s in order:
        out[s.attempt.cell_id] += remedies(s.cell, out[s.attempt.cell_id][0], services, run, stages)
    run.check_stop()  # every cell of the workload recorded, then the run stops on a full disk
    return {c.id: out[c.id] for c in cells if c.id in out}


def _timed_for(cells: list[Cell], run: RunState) -> tuple[list[AttemptState], list[AttemptState]] | None:
    """The timing phase's loaded workload that holds every one of `cells` (taken out of `run`), or None. Found by
    its cells, not its name: a re-plan may have left some of a group's cells for later since, and a group pairing
    the families is named after the models it holds."""
    ids = {c.id for c in cells}
    for key, (states, _ready) in list(run.timed_workloads.items()):
        if ids <= {s.attempt.cell_id for s in states}:
            return run.timed_workloads.pop(key)
    return None


def _only(loaded: tuple[list[AttemptState], list[AttemptState]], ids: set[str]) -> tuple[list, list]:
    """A workload the timing phase loaded, less its cells a re-plan left for later since (harness.plan.replan):
    their runners are closed now, their attempts never recorded (--resume runs them)."""
    states, ready = loaded
    for s in states:
        if s.attempt.cell_id not in ids:
            end(s)
    return [s for s in states if s.attempt.cell_id in ids], [s for s in ready if s.attempt.cell_id in ids]


def _read_timing(s: AttemptState, stages: Pipeline) -> bool:
    """The attempt's stages up to the end of its timed rounds (their latency read from the workload's timing);
    whether it was ok when its timing ended. A crash ends it here."""
    try:
        if stages.advance(s, until=AFTER_TIMING):
            return True
    except Exception as e:  # a harness bug in one cell must not lose the others
        crashed(s, e)
        stages.over(s)
    end(s)
    return False


def _finish_stages(s: AttemptState, stages: Pipeline) -> None:
    """The attempt's remaining stages (end to end, parity, scenarios, operators, accuracy), its runner closed after
    them; a cell that was paired but ends non-ok here loses its own ratio, said why (`unpair`)."""
    try:
        stages.advance(s)
    except Exception as e:  # a harness bug in one cell must not lose the others
        crashed(s, e)
    finally:
        end(s)
    if s.rec.paired is not None and s.rec.status != "ok":
        unpair(s)
    if s.rec.status != "ok":  # an end-to-end ratio is an ok cell's, as its model-only one is
        s.rec.paired_e2e = None


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
        label = group_label(cells_of)
        run.timed_workloads[label] = (states, ready)
        if ready:
            loaded.append((label, ready))
    for k in range(1, episodes + 1):
        for label, ready in loaded:
            _time_together(ready, label, services, episode=(k, episodes))


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
    # YOLO26 first: a group pairing the families is judged (and referenced) on YOLO26's torch-eager
    return (
        s.cell.family != DEFAULT_FAMILY,
        name != REFERENCE_BACKEND,
        s.cell.precision != "fp32",
        order,
        name,
        s.cell.precision,
    )


def set_paired(states: list[AttemptState], timed_ok: list[AttemptState]) -> None:
    """Each cell's `paired`, from its workload's interleaved timed rounds; `timed_ok`: the cells among `states` that
    were ok when timing ended (their timed rounds read, no failure so far). Set before any cell's later stages, so
    each record is whole when written (harness.execute.workload.run_workload).

    A cell of `timed_ok` gets its p50 over the reference's and over every other cell of `timed_ok` timed with it (an
    int8 cell's fp32 counterpart among them, and in a group pairing the families its YOLO26 or YOLO11 counterpart),
    from the trials they shared. The reference is torch-eager fp32 of the cell's own model and head where it was ok
    when timing ended, else the first such backend in the registry's order, fp32 first (`_order`): a YOLO11 cell's
    `ratio` is to YOLO11's torch-eager, as a YOLO26 cell's is to YOLO26's.

    A cell that fails later (parity, a crash in a later stage) loses its own ratio (`unpair`: null, with why). The
    others' records keep theirs to it (as the reference, or under `others`): the ratio of rounds that ran side by
    side is a timing fact whatever that cell's outputs were, and their records may be on disk before it failed.
    Its own record says it failed, so a reader comparing with it reads that status (harness.decide compares only
    ok cells). Cells outside `timed_ok` get a null with the reason."""
    ok = [s for s in timed_ok if s.timed is not None]
    ok_ids = {s.attempt.cell_id for s in ok}
    timed = ok[0].timed if ok else None
    if len(ok) < 2 or timed is None or any(s.timed is not timed for s in ok):
        for s in states:
            set_null(s.rec, "paired", ALONE if s.attempt.cell_id in ok_ids else _not_ok(s))
        return
    refs: dict[tuple, AttemptState] = {}
    for o in sorted(ok, key=_order):
        refs.setdefault(_model_of(o), o)
    for s in states:
        key = s.attempt.cell_id
        if key not in ok_ids:
            set_null(s.rec, "paired", _not_ok(s))
            continue
        ref = refs[_model_of(s)]
        ref_id = ref.attempt.cell_id
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


def _model_of(s: AttemptState) -> tuple:
    """What a cell's reference shares with it: the model (family) and the head."""
    return (s.cell.family, s.cell.head)


#: the null reason of the `paired` of a cell with no ok partner in its timing
ALONE = (
    "the only ok backend of its workload in this run: its workload's other backends were not timed with it (they "
    "failed or were not selected, or a --resume found them recorded already)"
)


def _not_ok(s: AttemptState) -> str:
    if s.rec.status == PENDING:  # over before timing without a verdict of its own (not expected)
        return "not timed with its workload"
    return f"not an ok cell ({s.rec.status})"


def unpair(s: AttemptState) -> None:
    """A cell paired at the end of timing that ended non-ok in a later stage: its own `paired` is null, with why
    (the other cells' ratios to it stay: set_paired)."""
    s.rec.paired = None
    set_null(
        s.rec,
        "paired",
        f"not an ok cell ({s.rec.status}): it was ok when its workload's timing ended, and the other cells' "
        "records keep their ratios to it",
    )
