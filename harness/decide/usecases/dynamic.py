"""Dynamic input sizes, across the rendered machines: one artifact that ran at every swept size (remedies allowed,
and named), the lowest worst-case p50 (harness.decide.deploy.dynamic_inputs). Tie rule: the worst shape's p50
intervals. Not on the first screen."""

from __future__ import annotations

from harness.decide.by_workload import Across
from harness.decide.deploy import dynamic_inputs
from harness.decide.registry import register_use_case

register_use_case(Across("dynamic", order=100, answer=dynamic_inputs))
