"""The stages that measure what a use case experiences, after the model-only timed rounds: end-to-end timing with
its stage breakdown (harness.measure.pipeline), the scenarios (harness.scenarios) and the operator view
(harness.diagnosis.operators). None of them ends an attempt: a failure is a null with its reason.

End-to-end rounds of a workload's runners are timed interleaved, as the model-only rounds are
(`time_e2e_together`, called by harness.execute.workload while the runners are loaded together); an attempt timed
alone (a remedy) times its own in the `end_to_end` stage.
"""

from __future__ import annotations

import functools
import logging
import random
import time
import zlib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from harness.core.record import PERCENTILE_MIN_ROUNDS, CellRecord, set_null
from harness.diagnosis.failure import first_line
from harness.execute import interrupt
from harness.execute.config import DECISION, RunConfig
from harness.execute.services import Progress
from harness.execute.state import AttemptState
from harness.measure.interleave import (
    Contestant,
    Interleaved,
    RoundsPolicy,
    Timing,
    paired_ratio,
    run_interleaved,
)
from harness.measure.pipeline import STAGE_NAMES, E2ETiming, Pipeline, for_runner
from harness.measure.stats import latency_from_samples

if TYPE_CHECKING:
    from harness.scenarios import ScenarioConfig

log = logging.getLogger(__name__)

RAN = ("ok", "parity_failed")
#: the record fields the end-to-end stage writes (null together, with one reason, when it cannot)
E2E_FIELDS = ("latency_e2e_ms", "stages_ms", "e2e", "scenario", "scenario_result")


def single_stream_rule(pairs: int) -> str:
    """The single-stream rule applied to a workload that timed at least `pairs` end-to-end pairs."""
    if pairs >= PERCENTILE_MIN_ROUNDS["p99"]:
        why = "the rounds p99 needs"
    elif pairs >= PERCENTILE_MIN_ROUNDS["p90"]:
        why = "the rounds p90 needs"
    else:
        why = "the stage check's minimum"
    return (
        f">= {pairs} end-to-end calls ({why}), next call when the previous returned, interleaved with the "
        "workload's other backends"
    )


#: pairs the stage check and the e2e p50 rest on at least, where the pairs p90 needs would cost more than
#: `e2e_p90_budget_s`: 6, the fewest whose order-statistic interval of the median covers 95% (the slowest cells,
#: yolo26l and x at 640, whose pair takes a second or more on 2 cores)
MIN_E2E_PAIRS = 6


def e2e_min_pairs(config: RunConfig, pair_ms: float) -> int:
    """Pairs each runner times at least, from the measured cost of one pair (`pair_ms`, the slowest runner's
    decides), not from the device's name: the rounds p99 needs where they fit in `e2e_p99_budget_s` per runner,
    else the rounds p90 needs where they fit in `e2e_p90_budget_s`, else MIN_E2E_PAIRS (the percentiles beyond
    then null, with the reason)."""
    for pct, budget in e2e_budgets(config):
        want = PERCENTILE_MIN_ROUNDS[pct]
        if want * pair_ms / 1000.0 <= budget:
            return want
    return MIN_E2E_PAIRS


def e2e_budgets(config: RunConfig) -> tuple[tuple[str, float], ...]:
    return (("p99", config.e2e_p99_budget_s), ("p90", config.e2e_p90_budget_s))


def pair_cost_ms(timing: E2ETiming) -> float:
    """The measured cost of one pair, from the warm-up pair: twice the faster of its two calls (the whole call comes
    first and may pay for a cold start; the staged one has the stage clocks' synchronizes)."""
    calls = [timing.walls[0], sum(timing.staged[0].values())]
    return max(min(calls), 1e-3) * 2.0


def e2e_policy(config: RunConfig, min_pairs: int | None = None) -> RoundsPolicy:
    """End-to-end rounds: pairs (one whole call, one staged), at least `min_pairs` (default: the rounds p90
    needs)."""
    cfg = config
    return RoundsPolicy(
        min_rounds=min_pairs or PERCENTILE_MIN_ROUNDS["p90"],
        ci_target=cfg.ci_target,
        max_time_s=cfg.e2e_max_time_s,
        block_s=cfg.block_s,
        min_trials=6,
    )


def _contestant(s: AttemptState, pipeline_of: PipelineOf, clock: Callable[[], int]) -> Contestant:
    timing = E2ETiming(pipeline_of(s))
    s.e2e = timing
    timing.pair(clock)  # the first pair warms the pre- and post-processing up; its rounds are dropped
    estimate = pair_cost_ms(timing)
    timing.walls.clear()
    timing.staged.clear()
    return Contestant(
        s.attempt.cell_id, functools.partial(timing.pair, clock), estimate, resume=timing.resume
    )


PipelineOf = Callable[[AttemptState], Pipeline]


def runner_pipeline(s: AttemptState) -> Pipeline:
    return for_runner(s.runner, s.cell)


def time_e2e_together(
    states: list[AttemptState],
    label: str,
    config: RunConfig,
    progress: Progress,
    pipeline_of: PipelineOf = runner_pipeline,
    clock: Callable[[], int] = time.perf_counter_ns,
) -> None:
    """End-to-end pairs of the workload's loaded runners, interleaved; each state gets its E2ETiming (or the
    reason in `e2e_error`). `pipeline_of` builds a state's pipeline and `clock` times it (the tests give fakes)."""
    if not config.e2e:
        return
    contestants = []
    for s in states:
        try:
            contestants.append(_contestant(s, pipeline_of, clock))
        except Exception as e:  # one pipeline failing must not lose the others
            log.exception("end-to-end pipeline of %s failed", s.attempt.cell_id)
            s.e2e, s.e2e_error = None, f"end-to-end call failed: {type(e).__name__}: {first_line(str(e))}"
    if not contestants:
        return
    rng = random.Random(zlib.crc32(f"e2e {label}".encode()))
    pairs = e2e_min_pairs(config, max(c.estimate_ms for c in contestants))
    for s in states:
        s.e2e_min_pairs = pairs
    timed = run_interleaved(contestants, e2e_policy(config, pairs), rng=rng, clock=clock)
    for s in states:
        t = timed.timings.get(s.attempt.cell_id)
        if t is not None and t.error is not None:
            s.e2e, s.e2e_error = None, f"end-to-end call failed: {type(t.error).__name__}: {t.error}"
    pair_e2e(states, timed)
    progress(f"{label}: end-to-end, {timed.trials} trials in {timed.elapsed_s:.1f}s ({timed.stop})")


#: how `paired_e2e` ratios are estimated (said in the record)
E2E_ESTIMATOR = (
    "median over trials of (the median of a block's whole end-to-end calls / the other's in the same trial); 95% "
    "order-statistic interval"
)


def wall_blocks(timing: Timing, walls: list[float]) -> Timing:
    """`timing`'s trials with each block's whole end-to-end calls (ms) in place of its pair times: a block of n
    pairs appended n whole calls to `walls`, in order (the untimed call before a cold block appends none)."""
    out = Timing(timing.key, timing.block_rounds)
    at = 0
    for block in timing.blocks:
        if not block:
            out.blocks.append(None)
            continue
        out.blocks.append(walls[at : at + len(block)])
        at += len(block)
    return out


def pair_e2e(states: list[AttemptState], timed: Interleaved) -> None:
    """Each state's end-to-end p50 over every other state's whose end-to-end rounds ran interleaved with it, from
    their whole calls in the trials they shared (`s.e2e_paired`; None where it has no such partner)."""
    blocks = {
        s.attempt.cell_id: wall_blocks(timed.timings[s.attempt.cell_id], s.e2e.walls)
        for s in states
        if s.e2e is not None and s.attempt.cell_id in timed.timings
    }
    for s in states:
        mine = blocks.get(s.attempt.cell_id)
        others = {}
        for key, theirs in blocks.items():
            if mine is None or key == s.attempt.cell_id:
                continue
            p = paired_ratio(mine, theirs)
            if p is not None:
                others[key] = {k: v for k, v in p.to_dict().items() if k != "reference"}
        s.e2e_paired = others or None


def end_to_end(s: AttemptState, config: RunConfig, progress: Progress) -> bool:
    """The record's end-to-end fields: `latency_e2e_ms`, `stages_ms`, `e2e`, and the single-stream scenario."""
    rec = s.rec
    if not config.e2e:
        for f in E2E_FIELDS:
            set_null(rec, f, "end-to-end timing switched off (--no-e2e)")
        return True
    if s.e2e is None and s.e2e_error is None:  # timed alone (a remedy attempt)
        time_e2e_together([s], s.attempt.cell_id, config, progress)
    if s.e2e is None or not s.e2e.walls:
        why = s.e2e_error or "no end-to-end rounds ran"
        for f in E2E_FIELDS:
            set_null(rec, f, why)
        return True
    lat = latency_from_samples(s.e2e.walls, "end-to-end")
    rec.latency_e2e_ms = lat
    for key, why in lat.null_reasons().items():
        set_null(rec, f"latency_e2e_ms.{key}", why)
    stages = s.e2e.stages_ms()
    rec.stages_ms = stages
    for name in STAGE_NAMES:
        if stages[name] is None:
            set_null(rec, f"stages_ms.{name}", s.e2e.pipeline.absent.get(name, "not timed"))
    rec.e2e = e2e = s.e2e.section()
    if s.e2e_paired:
        rec.paired_e2e = {
            "scope": "end-to-end (pre-processing, model, post-processing; decode excluded)",
            "estimator": E2E_ESTIMATOR,
            "others": dict(s.e2e_paired),
        }
    rec.scenario = "single-stream"
    rec.scenario_result = result = {
        "scenario": "single-stream",
        "metric": "p90 end-to-end latency",
        "value": lat.p90,
        "unit": "ms",
        "valid": lat.p90 is not None,
        "rule": single_stream_rule(s.e2e_min_pairs),
        "p50": lat.p50,
        "p90": lat.p90,
        "p99": lat.p99,
        "queries": lat.rounds,
    }
    for pct, budget in e2e_budgets(config):
        if getattr(lat, pct) is None and s.e2e_min_pairs < PERCENTILE_MIN_ROUNDS[pct]:
            set_null(
                rec,
                f"latency_e2e_ms.{pct}",
                f"{lat.rounds} end-to-end calls: the {PERCENTILE_MIN_ROUNDS[pct]} pairs {pct} needs would take "
                f"more than {budget:g} s per backend at the measured cost of a pair, so the workload timed "
                f"{s.e2e_min_pairs}",
            )
    if lat.p90 is None and s.e2e_min_pairs < PERCENTILE_MIN_ROUNDS["p90"]:
        result["reason"] = (
            f"{lat.rounds} end-to-end calls: the {PERCENTILE_MIN_ROUNDS['p90']} pairs p90 needs would take more "
            f"than {config.e2e_p90_budget_s:g} s per backend here, so the workload timed the "
            f"{MIN_E2E_PAIRS} the stage check rests on"
        )
    if not e2e["check"]["held"]:
        gap = e2e["gap"]
        progress(
            f"{s.attempt.cell_id}: end-to-end stage sum {gap:+.1%} off the wall time: work escaped the stage clocks"
        )
    return True


#: why a cell's scenarios are not run in its workload under DECISION (the phase then writes those it measures)
AFTER_DECISION = (
    "the scenarios run after the decision, on the configurations its answers name and for the scenario each "
    "answer reads (--scenarios all runs every scenario on every cell)"
)


def wants_scenarios(mode: str, cell, phase: bool = True) -> str | None:
    """Why the scenarios do not run for `cell` in its workload under `mode` (--scenarios), or None when they do.
    `phase`: whether this run has the scenario phase (not in a pytest-xdist worker, which sees only its share of
    the cells): without it, DECISION runs them on yolo26n at 640, batch 1, as n640 does."""
    if mode == "none":
        return "scenarios switched off (--scenarios none)"
    if mode == "all":
        return None
    if mode == DECISION and phase:
        return AFTER_DECISION
    if cell.size == "n" and cell.shape.height == 640 and cell.shape.width == 640 and cell.batch == 1:
        return None
    if mode == DECISION:
        return (
            "a share of the run (a pytest-xdist worker) has no scenario phase: the scenarios run on yolo26n at 640, "
            "batch 1 (--scenarios all runs them on every cell)"
        )
    return (
        "scenarios run on yolo26n at 640, batch 1 in this profile (--scenarios all runs them on every cell)"
    )


def scenario_config(config: RunConfig, slowdown: float) -> ScenarioConfig:
    """What the scenarios of one cell run with, from the run's options."""
    from harness.scenarios import ScenarioConfig
    from harness.scenarios.settings import durations

    return ScenarioConfig(
        bound_ms=config.server_bound_ms,
        camera_fps=config.camera_fps,
        threads=config.threads,
        seed=config.seed,
        durations=durations(config.scenario_durations),
        slowdown=slowdown,
    )


def measure_scenarios(
    rec: CellRecord,
    runner,
    cell,
    config: RunConfig,
    slowdown: float,
    names: Iterable[str] | None = None,
) -> dict:
    """The scenarios `names` (every one by default) of the loaded `runner` for `cell` through MLPerf LoadGen,
    starting from what `rec` holds (its e2e p50, a scenario another starts from); LoadGen's logs go under
    results/<run>/loadgen/<cell-id>/<scenario>/. A signal (SIGINT, SIGTERM) is no scenario failure: LoadGen's test
    in progress ends early, its directory is marked incomplete, and KeyboardInterrupt ends the run
    (harness.execute.interrupt; no record claims a result of a cut test). Returns the results that ran."""
    from harness.scenarios import SCENARIOS, run_all

    p50 = rec.latency_e2e_ms.p50 if rec.latency_e2e_ms else None
    log_dir = config.run_dir / "loadgen" / rec.cell_id
    known = rec.scenarios if isinstance(rec.scenarios, dict) else {}
    return run_all(
        runner, cell, scenario_config(config, slowdown), log_dir, config.run_dir, p50, stop=interrupt,
        names=SCENARIOS if names is None else names, known=known,
    )  # fmt: skip


def put_scenarios(rec: CellRecord, results: dict) -> None:
    """`results` into the record's `scenarios` beside those it holds, each value measured or null with why."""
    every = dict(rec.scenarios) if isinstance(rec.scenarios, dict) else {}
    every.update(results)
    rec.scenarios = every
    rec.null_reasons.pop("scenarios", None)
    for name, res in results.items():
        rec.null_reasons.pop(f"scenarios.{name}", None)
        if res.get("value") is None:
            set_null(rec, f"scenarios.{name}.value", res.get("reason") or "the scenario measured nothing")


def scenarios(s: AttemptState, config: RunConfig, slowdown: float, phase: bool, progress: Progress) -> bool:
    """Every scenario of the loaded runner (single-stream, multi-stream, the camera search, offline, server and
    the camera check), where --scenarios runs them in the cell's workload (`wants_scenarios`); under the default
    the scenario phase runs those the decision needs later (harness.execute.scenario_phase)."""
    rec, cfg = s.rec, config
    why = wants_scenarios(cfg.scenarios, s.cell, phase)
    if why is None and rec.status not in RAN:
        why = f"cell did not run ({rec.status})"
    if why is None and s.attempt.remedy:
        why = "a remedy attempt: scenarios run on the plain cell"
    if why:
        set_null(rec, "scenarios", why)
        return True
    progress(
        f"{s.attempt.cell_id}: scenarios through MLPerf LoadGen ({cfg.scenario_durations} durations: single-stream, "
        "multi-stream, cameras served at --camera-fps, offline, server) and the camera check"
    )
    try:
        results = measure_scenarios(rec, s.runner, s.cell, cfg, slowdown)
    except Exception as e:
        log.exception("scenarios of %s failed", s.attempt.cell_id)
        set_null(rec, "scenarios", f"scenarios failed: {type(e).__name__}: {first_line(str(e))}")
        return True
    put_scenarios(rec, results)
    return True


def operators(s: AttemptState) -> bool:
    """The operator view: which operators ran in the delegate and which fell back (outside any timed region)."""
    from harness.diagnosis.operators import OperatorsUnavailable, operator_view

    rec = s.rec
    if rec.status not in RAN or s.runner is None:
        set_null(rec, "operators", f"cell did not run ({rec.status})")
        return True
    try:
        rec.operators = operator_view(s.cell.backend, s.runner, s.artifact, s.export_info, s.cell)
    except OperatorsUnavailable as e:
        set_null(rec, "operators", e.reason)
    except Exception as e:
        log.exception("operator view of %s failed", s.attempt.cell_id)
        set_null(rec, "operators", f"operator view failed: {type(e).__name__}: {first_line(str(e))}")
    return True
