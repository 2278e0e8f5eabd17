"""The time budget held while the run goes: a re-plan leaves the lowest-ranked cells not yet started for later.

The plan (harness.plan.screen_budget for the main job, harness.plan.budget for the other profiles) chose what fits
the budget from the prices of the speed probe; a machine slower than its probe (a CPU quota the probe did not see
whole, a neighbour's load that came later, a price table from another machine) runs past it. After the export phase,
the timing phase and each workload, the run's estimate of what is left (harness.plan.estimate, rescaled by how the
parts done so far went) is set against the budget: where the time so far and the estimate run past it, the cells
not yet started are left for later from the lowest-ranked up (the reverse of the order the plan took them), until
what is left fits. They are not records: they are skipped with the reason, listed in env.json's `plan` under
WAIT_REPLAN with the re-plan that left them (`replans`), and `--resume` with a larger budget runs them (the cells
recorded cost nothing there).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from harness.plan.estimate import fmt_duration
from harness.plan.screen_budget import about, in_words

#: env.json `plan.left_out`'s reason for the cells a re-plan left for later
WAIT_REPLAN = "left for later by a re-plan: the run went slower than its estimate"


def choose(order: Sequence[str], seconds: Mapping[str, float], over_s: float) -> list[str]:
    """The cells to leave for later so that `over_s` seconds are saved: the candidates (`seconds`: cell id -> what
    leaving it saves; only cells not yet started) from the lowest-ranked up (the end of `order`, the plan's order),
    until their seconds cover `over_s` (all of them where they cannot). Candidates `order` does not rank go first.
    A cell that saves nothing is never chosen."""
    if over_s <= 0:
        return []
    ranked = [c for c in order if c in seconds]
    unranked = [c for c in seconds if c not in set(ranked)]
    out: list[str] = []
    saved = 0.0
    for c in [*unranked, *reversed(ranked)]:
        if saved >= over_s:
            break
        if seconds[c] > 0:
            out.append(c)
            saved += seconds[c]
    return out


@dataclass
class Replan:
    """One re-plan: when, the time so far, the estimate of what was left, the budget, what it left for later and
    the seconds that saved."""

    after: str
    elapsed_s: float
    left_s: float
    budget_s: float
    ratio: float
    cells: list[str] = field(default_factory=list)
    saved_s: float = 0.0

    @property
    def over_s(self) -> float:
        return self.elapsed_s + self.left_s - self.budget_s

    def line(self, later: str, resume: str) -> str:
        """The one line said at the re-plan."""
        how = (
            f", the parts done took {self.ratio:.2f}x their estimate" if abs(self.ratio - 1.0) >= 0.05 else ""
        )
        return (
            f"re-plan after {self.after}: {fmt_duration(self.elapsed_s)} so far and about "
            f"{fmt_duration(self.left_s)} left would end {fmt_duration(self.over_s)} past the budget of "
            f"{fmt_duration(self.budget_s)}{how}; left for later: {later} (about {fmt_duration(self.saved_s)} of "
            f"this run): {resume} runs them"
        )

    def to_env(self) -> dict:
        return {
            "after": self.after,
            "elapsed_s": round(self.elapsed_s, 1),
            "estimate_left_s": round(self.left_s, 1),
            "budget_s": round(self.budget_s, 1),
            "over_s": round(self.over_s, 1),
            "ratio": round(self.ratio, 3),
            "cells": list(self.cells),
            "saved_s": round(self.saved_s, 1),
        }


def replanned(
    plan: dict | None,
    replan: Replan,
    *,
    kind: str,
    budget_text: str,
    selected_ids: Sequence[str],
    profile_cells: int,
    later: str,
    suggested: str,
) -> dict:
    """env.json's `plan` after `replan`: its cells moved from `selected_ids` to `left_out[WAIT_REPLAN]`, the
    re-plan kept under `replans`; a run whose plan held every cell (no `plan` yet) gets one. `later`: every cell
    left for later, in words; `suggested`: the --time-budget that runs them with --resume."""
    out = dict(plan) if isinstance(plan, dict) else {}
    dropped = set(replan.cells)
    base = out.get("selected_ids") if isinstance(out.get("selected_ids"), list) else list(selected_ids)
    selected = [c for c in base if c not in dropped]
    left = {k: list(v) for k, v in (out.get("left_out") or {}).items() if isinstance(v, list)}
    left.setdefault(WAIT_REPLAN, []).extend(c for c in replan.cells if c not in left.get(WAIT_REPLAN, []))
    more = float(out.get("more_s") or 0.0) + replan.saved_s
    out.update(
        kind=out.get("kind") or ("screen" if kind == "screen" else "night"),
        budget=out.get("budget") or budget_text,
        budget_s=round(replan.budget_s, 1),
        profile_cells=out.get("profile_cells") or profile_cells,
        selected_ids=selected,
        selected=len(selected),
        left_out=left,
        left_for_later=later,
        more_s=round(more, 1),
        suggested_budget=suggested,
        replans=[*(out.get("replans") or []), replan.to_env()],
    )
    if out["kind"] == "screen":
        out["headline"] = (
            f"{len(selected)} of {out['profile_cells']} cells in {in_words(replan.budget_s)}; left for later: "
            f"{later} (about {about(more)} more): --time-budget {suggested}, or --time-budget none"
        )
    return out
