"""A backend comparison on one workload: the lowest model-only p50 at batch 1 on a GPU device, across the rendered
machines (shown on the first screen only when answered). Tie rule: the paired p50 ratio's 95% interval for cells
timed interleaved, else overlapping p50 intervals."""

from __future__ import annotations

from harness.decide.by_workload import (
    ByWorkload,
    RankedUseCase,
    is_gpu,
    latency_figure,
    latency_numbers,
    ok_b1,
    runnable,
)
from harness.decide.load import p50
from harness.decide.paired import latency_interval
from harness.decide.registry import register_use_case

GPU_LATENCY = RankedUseCase(
    "gpu-latency", "Backend comparison, GPU: batch-1 latency", "lowest model-only p50 at batch 1 on a GPU device",
    lambda r: is_gpu(r) and runnable(r), ok_b1, p50, False, "GPU", "p50",
    latency_numbers, scoped=True, interval=latency_interval, figure=latency_figure,
)  # fmt: skip

register_use_case(ByWorkload(GPU_LATENCY, order=80))
