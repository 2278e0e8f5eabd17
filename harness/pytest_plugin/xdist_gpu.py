"""One GPU per pytest process: a tiny plugin that pins parallel test processes to distinct GPUs.

With `--gpus LIST|auto`, each process that runs cells sees exactly one GPU through CUDA_VISIBLE_DEVICES, and no two
processes get the same one, so two timed cells never share a GPU. It covers the two existing ways of running one
suite as several processes (docs/scale-out.md):

- pytest-split: N independent processes `--splits N --group K`; group K takes the K-th GPU. pytest-benchmark keeps
  timing (it is not aware of the split), so this is the way to shard benchmarks timed with its fixture.
- pytest-xdist: `-n auto` starts one worker per GPU; worker gwI takes the I-th GPU. The variables are set in the
  worker's execnet spec, so they are in place before the worker's interpreter imports anything. pytest-benchmark
  switches its timing off under xdist by design, so this mode suits cells the harness times with its own clock.

Each pinned process also gets CUDA_DEVICE_ORDER=PCI_BUS_ID (so CUDA's index is NVML's index) and YOLO26_BENCH_GPU,
the physical GPU it owns, for tools that talk to NVML (which ignores CUDA_VISIBLE_DEVICES); harness/measure/nvml.py needs
no help, it matches devices by PCI address.
"""

from __future__ import annotations

import logging
import os
from collections.abc import MutableMapping

import pytest

log = logging.getLogger(__name__)

PINNED_GPU_ENV = "YOLO26_BENCH_GPU"
_GPUS_KEY = pytest.StashKey[list[str]]()


def detect_gpus(environ: MutableMapping[str, str] = os.environ) -> list[str]:
    """The GPUs this process may use: CUDA_VISIBLE_DEVICES when set, else every device NVML sees."""
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [g.strip() for g in visible.split(",") if g.strip()]
    try:
        import pynvml  # nvidia-ml-py: imported here so the plugin loads on machines without it
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return []
    try:
        return [str(i) for i in range(pynvml.nvmlDeviceGetCount())]
    finally:
        pynvml.nvmlShutdown()


def parse_gpus(spec: str, environ: MutableMapping[str, str] = os.environ) -> list[str]:
    """`--gpus` value: 'auto' (detect), or a comma-separated list of indices or UUIDs ('0,1,3', 'GPU-8f...')."""
    gpus = (
        detect_gpus(environ) if spec.strip() == "auto" else [g.strip() for g in spec.split(",") if g.strip()]
    )
    if not gpus:
        raise pytest.UsageError(f"--gpus {spec}: no GPU found to pin test processes to")
    if len(set(gpus)) != len(gpus):
        raise pytest.UsageError(f"--gpus {spec}: a GPU is listed twice")
    return gpus


def gpu_for_slot(slot: int, slots: int, gpus: list[str]) -> str:
    """The GPU of process `slot` (0-based) out of `slots`; refuses more processes than GPUs."""
    if slots > len(gpus):
        raise pytest.UsageError(
            f"{slots} parallel test processes for {len(gpus)} GPU(s) ({','.join(gpus)}): two timed cells would "
            f"share a GPU; run at most {len(gpus)}"
        )
    if not 0 <= slot < slots:
        raise pytest.UsageError(f"process {slot} is not one of {slots}")
    return gpus[slot]


def pin_environ(gpu: str) -> dict[str, str]:
    """The environment variables that pin a process to one GPU."""
    return {"CUDA_VISIBLE_DEVICES": gpu, "CUDA_DEVICE_ORDER": "PCI_BUS_ID", PINNED_GPU_ENV: gpu}


def pinned_gpu(environ: MutableMapping[str, str] = os.environ) -> str | None:
    """The physical GPU (NVML index or UUID) this process was pinned to, or None when not pinned."""
    return environ.get(PINNED_GPU_ENV)


def split_slot(config: pytest.Config) -> tuple[int, int] | None:
    """(group - 1, splits) under pytest-split, else None."""
    splits = config.getoption("splits", None)
    group = config.getoption("group", None)
    if splits and group:
        return int(group) - 1, int(splits)
    return None


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add `--gpus`."""
    parser.getgroup("yolo26-bench").addoption(
        "--gpus",
        default=None,
        metavar="LIST|auto",
        help="pin each parallel test process (xdist worker or pytest-split group) to its own GPU: "
        "'auto' or a comma-separated list of GPU indices/UUIDs",
    )


def _gpus(config: pytest.Config) -> list[str] | None:
    spec = config.getoption("gpus", None)
    if spec is None:
        return None
    if _GPUS_KEY not in config.stash:
        config.stash[_GPUS_KEY] = parse_gpus(spec)
    return config.stash[_GPUS_KEY]


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` with `--gpus`: one worker per GPU."""
    gpus = _gpus(config)
    return len(gpus) if gpus else None


def _xdist_workers(config: pytest.Config) -> int:
    """How many xdist workers the controller will start (0 when xdist is off)."""
    if config.getoption("dist", "no") == "no" or not config.getoption("tx", None):
        return 0
    import execnet
    from xdist.workermanage import parse_tx_spec_config

    specs = parse_tx_spec_config(config)
    if not all(execnet.XSpec(s).popen for s in specs):
        raise pytest.UsageError("--gpus pins local (popen) xdist workers only")
    return len(specs)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Pin this process (pytest-split group or single process), or check the xdist worker count / worker pin."""
    if config.getoption("gpus", None) is None:
        return
    if hasattr(config, "workerinput"):
        # xdist workers are pinned by the controller, through the environment their spec starts them with.
        if pinned_gpu() is None:
            raise pytest.UsageError(
                f"xdist worker {config.workerinput.get('workerid')} was not pinned to a GPU"
            )
        return
    gpus = _gpus(config) or []
    workers = _xdist_workers(config)
    split = split_slot(config)
    if workers and split:
        raise pytest.UsageError("--gpus: use pytest-split or pytest-xdist, not both")
    if workers:
        gpu_for_slot(workers - 1, workers, gpus)  # refuses more workers than GPUs, before any is started
        return
    slot, slots = split or (0, 1)
    os.environ.update(pin_environ(gpu_for_slot(slot, slots, gpus)))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_setupnodes(config: pytest.Config, specs: list) -> None:
    """Give worker I (gwI, in spec order) the I-th GPU, in the environment it starts with."""
    gpus = _gpus(config)
    if gpus is None:
        return
    for slot, spec in enumerate(specs):
        spec.env.update(pin_environ(gpu_for_slot(slot, len(specs), gpus)))


def pytest_report_header(config: pytest.Config) -> str | None:
    """Say which GPU(s) the run is pinned to."""
    gpus = _gpus(config)
    if gpus is None:
        return None
    gpu = pinned_gpu()
    where = f"this process -> GPU {gpu}" if gpu is not None else "one GPU per xdist worker"
    return f"yolo26-bench GPU pinning: {where} (of {','.join(gpus)})"
