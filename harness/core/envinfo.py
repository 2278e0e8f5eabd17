"""The machine a run ran on: env.json (CPU, its cgroup CPU quota, RAM, GPU and driver, library versions, git
commit)."""

from __future__ import annotations

import logging
import os
import platform
import socket
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from harness.core import allocator, cpu_quota
from harness.core.version import SCHEMA_VERSION, __version__, library_version

log = logging.getLogger(__name__)

LIBRARIES = (
    "torch",
    "torchvision",
    "ultralytics",
    "onnx",
    "onnxslim",
    "onnxruntime",
    "openvino",
    "executorch",
    "torchao",
    "tensorrt",
    "nvidia-ml-py",
    "pytest-benchmark",
    "numpy",
)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


#: the file scripts/kit_commit.sh writes at the repository's root before the code is sent to a GPU machine: one
#: line, the commit (with "-dirty" when the tracked files differed from it)
KIT_COMMIT_FILE = "KIT_COMMIT"
#: the variable benchmarks/gpu_once.sh sets from KIT_COMMIT for the runs it starts: the copy on a GPU machine may
#: carry a .git of an older commit (the device tool's snapshot) or none (then git climbs to another repository)
KIT_COMMIT_ENV = "YOLO26_BENCH_GIT_COMMIT"
_REPO = Path(__file__).resolve().parents[2]


def _git(repo: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git_commit_info(repo: Path | None = None) -> tuple[str | None, str]:
    """(commit, how it was read) of the project's code, or (None, why not).

    The GPU kit's commit first ($YOLO26_BENCH_GIT_COMMIT, which benchmarks/gpu_once.sh sets from KIT_COMMIT), then
    `git rev-parse HEAD` only where its top level is `repo` itself: a copy without a .git of its own must not name
    the commit of whatever repository contains it."""
    kit = os.environ.get(KIT_COMMIT_ENV, "").strip()
    if kit:
        return kit[
            :80
        ], f"${KIT_COMMIT_ENV} (the GPU kit, from {KIT_COMMIT_FILE} written when the code was packed)"
    repo = (repo or _REPO).resolve()
    top = _git(repo, "rev-parse", "--show-toplevel")
    if top is not None and Path(top).resolve() == repo:
        commit = _git(repo, "rev-parse", "HEAD")
        if commit:
            dirty = _git(repo, "status", "--porcelain", "--untracked-files=no")
            return commit + ("-dirty" if dirty else ""), "git rev-parse HEAD in the project's repository"
    if top is not None:
        return (
            None,
            f"the code at {repo} has no git repository of its own (the nearest, {top}, is another one's)",
        )
    return None, f"the code at {repo} is not in a git repository"


def git_commit(repo: Path | None = None) -> str | None:
    """The project's commit (git_commit_info), or None."""
    return git_commit_info(repo)[0]


@dataclass(frozen=True)
class MachineFacts:
    """What env.json reads through libraries the core does not import (psutil, NVML, torch), gathered by the
    caller (harness.measure.machine.facts) and passed to `collect`."""

    cpu_cores_physical: int | None
    ram_bytes: int
    #: the GPUs NVML lists, and the reason when it lists none
    gpus: list[dict]
    gpu_reason: str | None
    #: env.json's `gpu_env` (harness.measure.nvml.gpu_env) when NVML lists a GPU, else None (left out)
    gpu_env: dict | None = None
    #: torch's CUDA (version, cudnn, device_count) when torch sees a CUDA device, else None
    cuda: dict | None = None
    #: env.json's `threads`: the run's CPU thread budget, who chose it, the machine's CPUs (harness.threads.info)
    threads: dict | None = None
    #: env.json's `machine_speed`: the machine's speed at the run's start (harness.measure.machine_speed), which
    #: the estimate scales the plan's prices by; None: left out
    machine_speed: dict | None = None
    #: env.json's `peaks`: the machine's measured compute peaks per precision and memory bandwidth, CPU and CUDA
    #: (harness.measure.peaks), which each cell's roofline is read against; None: left out
    peaks: dict | None = None


def collect(run_id: str, started_at: str | None = None, *, facts: MachineFacts) -> dict:
    """The machine, libraries and settings of a run. `facts`: what the layers above the core report of the machine
    and the run's thread budget (harness.measure.machine.facts()).
    """
    commit, commit_source = git_commit_info()
    quota = cpu_quota.read_quota()
    env = {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "started_at": started_at or datetime.now(UTC).isoformat(timespec="seconds"),
        "harness_version": __version__,
        "git_commit": commit,
        "git_commit_source": commit_source,
        "host": {
            "hostname": socket.gethostname(),
            "os": platform.platform(),
            "python": platform.python_version(),
            "cpu_model": cpu_model(),
            "cpu_cores_logical": os.cpu_count(),
            "cpu_cores_physical": facts.cpu_cores_physical,
            "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
            # the container's CPU limit, which the counts above do not show (harness.core.cpu_quota)
            "cpu_quota": quota.to_env(),
            "ram_gb": round(facts.ram_bytes / 2**30, 1),
        },
        "threads": facts.threads,
        # the quota's throttle counters now; the run's end adds its own (cpu_quota.env_at_end)
        cpu_quota.ENV_KEY: cpu_quota.env_at_start(quota),
        "allocator": allocator.info(),
        "gpu": facts.gpus,
        "gpu_reason": facts.gpu_reason,
        "cuda": facts.cuda,
        "libraries": {name: library_version(name) for name in LIBRARIES},
    }
    # GPU name, compute capability, driver, CUDA, cuDNN, TensorRT versions, clocks at start
    if facts.gpus and facts.gpu_env is not None:
        env["gpu_env"] = facts.gpu_env
    if facts.machine_speed is not None:
        env["machine_speed"] = facts.machine_speed
    if facts.peaks is not None:
        env["peaks"] = facts.peaks
    return env


def write(run_dir: Path, env: dict) -> Path:
    """Write run_dir/env.json atomically (harness.core.results_dir.write_env: never empty or half written);
    raises RecordWriteError when it cannot be written."""
    from harness.core.results_dir import write_env

    return write_env(run_dir, env)
