"""Lowest memory, on each machine.

Objective: the lowest host peak RSS at batch 1, on the workload where the most backends ran. Constraint: the common
ones only. Figure: the record's host peak RSS (and its process's device peak, where measured). Tie rule: none (one
reading per cell, no interval).
"""

from __future__ import annotations

from harness.decide import figures as fig
from harness.decide.by_scenario import ByScenario, ScenarioCase
from harness.decide.picks import memory_figures
from harness.decide.registry import register_use_case

LOWEST_MEMORY = ScenarioCase(
    key="lowest-memory",
    title="Lowest memory",
    objective="lowest host peak RSS at batch 1",
    constraint="",
    scenario=None,
    value=lambda r: memory_figures(r)[0],
    higher_is_better=False,
    checks=(),
    interval=None,  # one reading per cell: no interval, so no tie
    figure=fig.memory_figure,
    numbers=fig.memory_numbers,
    batch1=True,
)

register_use_case(ByScenario(LOWEST_MEMORY, order=50))
