"""The machine a run ran on: env.json (CPU, RAM, GPU and driver, library versions, git commit)."""

from __future__ import annotations

import logging
import os
import platform
import socket
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from harness.core import allocator
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


def git_commit(repo: Path | None = None) -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=repo or Path(__file__).resolve().parents[2],
            capture_output=True,
            text=True,
            timeout=5,
        )
        commit = out.stdout.strip() if out.returncode == 0 else None
        if commit:
            dirty = subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"],
                cwd=repo or Path(__file__).resolve().parents[2],
                capture_output=True,
                text=True,
                timeout=5,
            ).stdout.strip()
            return commit + ("-dirty" if dirty else "")
    except (OSError, subprocess.TimeoutExpired):
        pass
    return None


def cuda_device_count() -> int:
    """Number of NVIDIA GPUs NVML sees (0 without a driver), without initialising CUDA."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return pynvml.nvmlDeviceGetCount()
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return 0


def gpu_info() -> tuple[list[dict], str | None]:
    """GPUs through NVML, and the reason when there are none to list."""
    try:
        import pynvml
    except ImportError:
        return [], "nvidia-ml-py is not installed"
    try:
        pynvml.nvmlInit()
    except Exception as e:
        return [], f"NVML unavailable: {e}"
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            cc = pynvml.nvmlDeviceGetCudaComputeCapability(h)
            gpus.append(
                {
                    "index": i,
                    "name": pynvml.nvmlDeviceGetName(h),
                    "compute_capability": f"{cc[0]}.{cc[1]}",
                    "driver": driver,
                    "memory_total_mb": pynvml.nvmlDeviceGetMemoryInfo(h).total / 2**20,
                    "pci_bus_id": pynvml.nvmlDeviceGetPciInfo(h).busId,
                    "sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                    "mem_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
                }
            )
        return gpus, None if gpus else "NVML reports no GPU"
    finally:
        pynvml.nvmlShutdown()


def threads_info(budget: int | None = None, source: str | None = None) -> dict:
    """env.json's `threads`: the run's CPU thread budget, where it came from, and the machine's CPUs."""
    from harness.core import threads

    if budget is None:
        budget = threads.budget()
        if source is None:
            source = f"${threads.ENV}" if os.environ.get(threads.ENV) else threads.DEFAULT_SOURCE
    return {
        "budget": budget,
        "physical_cores": threads.physical_cores(),
        "logical_cpus": threads.logical_cpus(),
        "source": source or threads.DEFAULT_SOURCE,
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
    }


def collect(
    run_id: str,
    started_at: str | None = None,
    threads: int | None = None,
    threads_source: str | None = None,
    gpu_env: Callable[[], dict] | None = None,
) -> dict:
    """The machine, libraries and settings of a run. `threads`: the run's budget; `threads_source`: who chose it
    ("--threads", or "physical cores (default)"); both default to this process's budget (harness.core.threads).
    `gpu_env`: env.json's `gpu_env` when NVML lists a GPU (harness.measure.nvml.gpu_env, given by the caller: the
    core imports nothing above it); None leaves it out.
    """
    import psutil

    gpus, gpu_reason = gpu_info()
    env = {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "started_at": started_at or datetime.now(UTC).isoformat(timespec="seconds"),
        "harness_version": __version__,
        "git_commit": git_commit(),
        "host": {
            "hostname": socket.gethostname(),
            "os": platform.platform(),
            "python": platform.python_version(),
            "cpu_model": cpu_model(),
            "cpu_cores_logical": os.cpu_count(),
            "cpu_cores_physical": psutil.cpu_count(logical=False),
            "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
            "ram_gb": round(psutil.virtual_memory().total / 2**30, 1),
        },
        "threads": threads_info(threads, threads_source),
        "allocator": allocator.info(),
        "gpu": gpus,
        "gpu_reason": gpu_reason,
        "cuda": None,
        "libraries": {name: library_version(name) for name in LIBRARIES},
    }
    # GPU name, compute capability, driver, CUDA, cuDNN, TensorRT versions, clocks at start
    if gpus and gpu_env is not None:
        env["gpu_env"] = gpu_env()
    try:
        import torch

        if torch.cuda.is_available():
            env["cuda"] = {
                **(env["cuda"] or {}),
                "version": torch.version.cuda,
                "cudnn": torch.backends.cudnn.version(),
                "device_count": torch.cuda.device_count(),
            }
    except ImportError:
        pass
    return env


def write(run_dir: Path, env: dict) -> Path:
    """Write run_dir/env.json atomically (harness.core.results_dir.write_env: never empty or half written);
    raises RecordWriteError when it cannot be written."""
    from harness.core.results_dir import write_env

    return write_env(run_dir, env)
