"""The nightly workflow's job timeout holds the time budgets it passes (harness.plan.budget), with its margin."""

from __future__ import annotations

import yaml

from harness.plan.budget import parse_budget
from tests.conftest import REPO

NIGHTLY = REPO / ".github" / "workflows" / "nightly-gpu.yml"


def disagreement(wf: dict) -> str | None:
    """Why the bench job's timeout does not hold GPU_BUDGET + CPU_BUDGET + NIGHTLY_MARGIN_MIN, or None."""
    env, job = wf["env"], wf["jobs"]["bench"]
    gpu, cpu = parse_budget(env["GPU_BUDGET"]), parse_budget(env["CPU_BUDGET"])
    need_min = (gpu + cpu) / 60 + int(env["NIGHTLY_MARGIN_MIN"])
    if int(job["timeout-minutes"]) < need_min:
        return f"timeout-minutes {job['timeout-minutes']} < {need_min:.0f} (budgets + margin)"
    runs = "\n".join(step.get("run", "") for step in job["steps"])
    for name in ("GPU_BUDGET", "CPU_BUDGET"):
        if f'--time-budget "${name}"' not in runs:
            return f"no step passes --time-budget ${name}"
    return None


def test_nightly_timeout_holds_the_budgets_it_passes():
    assert disagreement(yaml.safe_load(NIGHTLY.read_text())) is None


def test_a_budget_beyond_the_timeout_or_not_passed_is_found():
    """The other way: the check fails a workflow whose budgets outgrow its timeout, or that passes none."""
    wf = yaml.safe_load(NIGHTLY.read_text())
    wf["env"]["GPU_BUDGET"] = "6h"
    assert "timeout-minutes 360 <" in disagreement(wf)
    wf = yaml.safe_load(NIGHTLY.read_text())
    for step in wf["jobs"]["bench"]["steps"]:
        if "run" in step:
            step["run"] = step["run"].replace('--time-budget "$CPU_BUDGET"', "")
    assert disagreement(wf) == "no step passes --time-budget $CPU_BUDGET"
