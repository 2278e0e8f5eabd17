"""What env.json reads of the machine through psutil, NVML and torch, and the run's thread budget
(harness.core.envinfo.MachineFacts).

The core writes env.json but imports none of these libraries; the caller that collects env.json gathers the facts
here and passes them in.
"""

from __future__ import annotations

from harness import threads as thread_budget
from harness.core.envinfo import MachineFacts


def facts(
    threads: int | None = None, threads_source: str | None = None, speed: bool = True, peaks: bool = True
) -> MachineFacts:
    """This machine's physical cores, RAM, NVML GPUs (with `gpu_env` when there are any, its `idle_baseline` read
    here, harness.measure.energy.take_run_baseline) and torch's CUDA, and the
    run's thread budget: `threads`, chosen by `threads_source` ("--threads", or "physical cores (default)"), both
    by default this process's budget (harness.threads.info); with `speed`, the machine's speed now at that budget
    (harness.measure.machine_speed: well under a second); with `peaks`, its measured compute peaks and memory
    bandwidth at that budget, after the idle baseline (harness.measure.peaks: a few seconds)."""
    import psutil

    from harness.measure import machine_speed
    from harness.measure import peaks as machine_peaks

    gpus, gpu_reason = gpu_info()
    gpu_env = None
    if gpus:  # GPU name, compute capability, driver, CUDA, cuDNN, TensorRT versions, clocks at start
        from harness.measure.energy import take_run_baseline
        from harness.measure.nvml import gpu_env as describe

        gpu_env = describe()
        # the run's one idle baseline, once the GPU has settled (the net energy figures of every cell use it)
        gpu_env["idle_baseline"] = take_run_baseline()
    return MachineFacts(
        cpu_cores_physical=psutil.cpu_count(logical=False),
        ram_bytes=psutil.virtual_memory().total,
        gpus=gpus,
        gpu_reason=gpu_reason,
        gpu_env=gpu_env,
        cuda=torch_cuda(),
        threads=thread_budget.info(threads, threads_source),
        machine_speed=machine_speed.measure(threads or thread_budget.budget()) if speed else None,
        peaks=machine_peaks.measure(threads or thread_budget.budget()) if peaks else None,
    )


def torch_cuda() -> dict | None:
    """torch's CUDA version, cuDNN version and device count when it sees a CUDA device, else None."""
    try:
        import torch

        if torch.cuda.is_available():
            return {
                "version": torch.version.cuda,
                "cudnn": torch.backends.cudnn.version(),
                "device_count": torch.cuda.device_count(),
            }
    except ImportError:
        pass
    return None


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
