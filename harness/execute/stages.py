"""The stages of one attempt, in order, each handed the run's collaborators it uses; and the walk through them.

plan -> export -> probe -> load -> first run -> warm-up -> timed rounds -> end to end -> parity -> roofline ->
scenarios -> operators -> accuracy. A stage returns True to go on, False when the attempt ends there (the stage has then set the
record's status and reason); the record is written after the last stage that ran (harness.execute.recording).
`pipeline` is the one place that says which run service each stage gets.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from harness.execute.exporting import export, retry_fresh_export
from harness.execute.loading import load, probe
from harness.execute.measuring import accuracy, first_run, parity, stop_trackers, timed_rounds, warmup
from harness.execute.planning import plan
from harness.execute.roofline import RunPeaks, roofline
from harness.execute.services import RunServices, RunState
from harness.execute.state import AttemptState
from harness.execute.usecase import end_to_end, operators, scenarios


@dataclass(frozen=True)
class Stage:
    """One named stage: runs on the attempt's state, True to go on."""

    name: str
    run: Callable[[AttemptState], bool]


@dataclass(frozen=True)
class Pipeline:
    """The stages of every attempt of one run, and the retry of a cached export that fails in the probe or load."""

    stages: tuple[Stage, ...]
    #: (state, the stage that failed) -> whether to export again and go back to the export stage
    retry_export: Callable[[AttemptState, str], bool]

    def index(self, name: str) -> int:
        return next(i for i, st in enumerate(self.stages) if st.name == name)

    def advance(self, s: AttemptState, until: str | None = None) -> bool:
        """Run the attempt's stages from where it stands, up to (not including) the stage named `until`, or to the
        end.

        True when it got there and the attempt goes on; False when a stage ended it (now, or before this call: an
        attempt that is over never reaches `until`). A cached artifact that fails in the probe or the load is
        exported again once and the attempt goes back to the export stage (retry_fresh_export).
        """
        n = len(self.stages)
        if s.next_stage >= n:
            return until is None
        while s.next_stage < n:
            stage = self.stages[s.next_stage]
            if stage.name == until:
                return True
            if stage.run(s):
                s.next_stage += 1
            elif stage.name in ("probe", "load") and self.retry_export(s, stage.name):
                s.next_stage = self.index("export")
            else:
                s.next_stage = n
                return False
        return True

    def run(self, s: AttemptState) -> None:
        """Run the remaining stages in order until one ends the attempt; trackers are stopped whatever happened."""
        try:
            self.advance(s)
        finally:
            end(s)

    def over(self, s: AttemptState) -> None:
        """Mark the attempt as over: no stage runs on it any more."""
        s.next_stage = len(self.stages)


def pipeline(services: RunServices, run: RunState) -> Pipeline:
    """The run's stages, each bound to the collaborators it uses (`run` is read when a stage runs)."""
    cfg, say = services.config, services.progress
    cache, data, refs = services.cache, services.data, services.references

    peaks = RunPeaks(cfg.run_dir, cfg.threads)  # env.json `peaks`, read again beside each workload

    def slowdown(s: AttemptState) -> float:
        return services.slowdown_factor(s.cell)

    stages = (
        Stage("plan", lambda s: plan(s, services.checkpoints, cfg.threads, cfg.fake_cuda)),
        Stage("export", lambda s: export(s, cache, cfg, run, data, say)),
        Stage("probe", lambda s: probe(s, services.memory_cache, cfg, say)),
        Stage("load", lambda s: load(s, run, cfg.memory_rounds, say)),
        Stage("first_run", lambda s: first_run(s, say)),
        Stage("warmup", lambda s: warmup(s, cfg.warmup, slowdown(s), say)),
        Stage(
            "timed_rounds", lambda s: timed_rounds(s, services.canary, cfg.rounds_policy(), slowdown(s), say)
        ),
        Stage("end_to_end", lambda s: end_to_end(s, cfg, say)),
        Stage("parity", lambda s: parity(s, refs, say)),
        Stage("roofline", lambda s: roofline(s, refs, peaks)),
        Stage("scenarios", lambda s: scenarios(s, cfg, slowdown(s), cfg.scenario_phase, say)),
        Stage("operators", operators),
        Stage("accuracy", lambda s: accuracy(s, cfg, data, services.accuracy_refs, refs, say)),
    )
    return Pipeline(stages, lambda s, stage: retry_fresh_export(s, stage, cache, cfg.run_id, say))


def end(s: AttemptState) -> None:
    """The attempt is over: trackers stopped, its runtime closed, and a re-export said in an ok record."""
    stop_trackers(s)
    if s.runner is not None:
        s.runner.close()
        s.runner = None
    if s.reexported and s.rec.status == "ok" and not s.rec.reason:
        s.rec.reason = s.reexported
