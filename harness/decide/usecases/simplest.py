"""The simplest deployment, across the rendered machines: the backend that ran most of its cells with no remedy, no
operator fallback and the precision asked for (harness.decide.deploy.simplest). Tie rule: backends whose share could
be first once what is not recorded is known. Not on the first screen."""

from __future__ import annotations

from harness.decide.by_workload import Across
from harness.decide.deploy import simplest
from harness.decide.registry import register_use_case

register_use_case(Across("simplest", order=110, answer=simplest))
