"""A backend comparison on one workload: the highest model-only images/s on a GPU device, any batch, across the
rendered machines (shown on the first screen only when answered). Tie rule: overlapping images/s intervals (from the
p50's)."""

from __future__ import annotations

from harness.decide.by_workload import (
    ByWorkload,
    RankedUseCase,
    is_gpu,
    runnable,
    throughput,
    throughput_figure,
    throughput_interval,
    throughput_numbers,
)
from harness.decide.registry import register_use_case

GPU_THROUGHPUT = RankedUseCase(
    "gpu-throughput", "Backend comparison, GPU: throughput", "highest model-only images/s on a GPU device, any batch",
    lambda r: is_gpu(r) and runnable(r), lambda r: r.status == "ok", throughput, True,
    "GPU", "throughput", throughput_numbers, group_batch=False, scoped=True, interval=throughput_interval,
    figure=throughput_figure,
)  # fmt: skip

register_use_case(ByWorkload(GPU_THROUGHPUT, order=90))
