"""A backend comparison on one workload: the lowest model-only p50 at batch 1 on the CPU, across the rendered
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

CPU_EDGE = RankedUseCase(
    "cpu-edge", "Backend comparison, CPU: batch-1 latency", "lowest model-only p50 at batch 1 on the CPU",
    lambda r: not is_gpu(r) and runnable(r), ok_b1, p50, False, "CPU", "p50",
    latency_numbers, scoped=True, interval=latency_interval, figure=latency_figure,
)  # fmt: skip

register_use_case(ByWorkload(CPU_EDGE, order=70))
