"""Mobile and embedded targets (export-only), across the rendered machines: the exported artifact with the largest
share of operators delegated to the target (no runtime here, so the memory cap is not checked). Tie rule: none (op
counts are exact)."""

from __future__ import annotations

from harness.decide.by_workload import (
    ByWorkload,
    RankedUseCase,
    delegated_fraction,
    export_figure,
    export_numbers,
    runnable,
)
from harness.decide.registry import ALWAYS, register_use_case

MOBILE_EMBEDDED = RankedUseCase(
    "mobile-embedded", "Mobile and embedded targets (export-only)",
    "exported artifact with the largest share of operators delegated to the target (no runtime here)",
    lambda r: r.status == "exported" or not runnable(r), lambda r: r.status == "exported",
    delegated_fraction, True, "export-only", "delegation count", export_numbers, figure=export_figure,
    capped=False,
)  # fmt: skip

register_use_case(ByWorkload(MOBILE_EMBEDDED, order=60, first_screen=ALWAYS))
