"""Which hardware a run ran on, as the claims check needs it: a named hardware class, and the CPU vendor.

Both are read from the run's env.json (`host.cpu_model`, `host.os`, `gpu[].name`); a merged results directory
gives one Run per machine, so a report over several machines answers per machine.
"""

from __future__ import annotations

import logging
import re

from harness.core.results_dir import UNKNOWN, Run

log = logging.getLogger(__name__)

# CPU vendor from the model string (and, for ARM, the OS machine field: aarch64 models are often bare names).
VENDOR_PATTERNS = (
    ("intel", re.compile(r"\bintel\b|genuineintel|\bxeon\b|\bcore\(tm\)", re.I)),
    ("amd", re.compile(r"\bamd\b|\bepyc\b|\bryzen\b|\bthreadripper\b|authenticamd", re.I)),
    (
        "arm",
        re.compile(r"\barm\b|aarch64|arm64|neoverse|cortex-a|graviton|ampere|apple m\d|snapdragon", re.I),
    ),
)
VENDOR_NAMES = {"intel": "Intel", "amd": "AMD", "arm": "ARM"}


def cpu_model(run: Run) -> str:
    """The run's CPU model string, or `unknown`."""
    return str(run.env_value("host", "cpu_model"))


def cpu_vendor(run: Run) -> str | None:
    """`intel`, `amd` or `arm` for the run's CPU; None when env.json does not tell."""
    model, os_name = cpu_model(run), str(run.env_value("host", "os"))
    for vendor, pattern in VENDOR_PATTERNS:
        if model != UNKNOWN and pattern.search(model):
            return vendor
    if re.search(r"aarch64|arm64", os_name, re.I):
        return "arm"
    return None


def gpu_names(run: Run) -> list[str]:
    return [str(g.get("name") or UNKNOWN) for g in run.gpus]


def matches_class(run: Run, spec: dict) -> bool:
    """Whether the run's hardware is of the class a claim names: `gpu` (a regex over GPU names) or `cpu_model`
    (a regex over the CPU model string), case-insensitive."""
    if spec.get("gpu"):
        return any(re.search(str(spec["gpu"]), name, re.I) for name in gpu_names(run))
    if spec.get("cpu_model"):
        return bool(re.search(str(spec["cpu_model"]), cpu_model(run), re.I))
    raise ValueError(f"hardware class {spec!r} names neither gpu nor cpu_model")


def describe(run: Run, spec: dict) -> str:
    """The run's hardware of the kind the class is about: its GPUs for a GPU class, its CPU for a CPU class."""
    if spec.get("gpu"):
        return ", ".join(gpu_names(run)) or "no GPU"
    return cpu_model(run)
