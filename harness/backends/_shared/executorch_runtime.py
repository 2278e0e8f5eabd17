"""The ExecuTorch Python runtime side shared by its backends: the delegates its runtime registers, and a runner of
a loaded method (the precision is the export-time dtypes, `executorch_precision`)."""

from __future__ import annotations

import numpy as np

from harness.backends._shared.executorch_export import executorch_precision
from harness.backends.base import Runner


def runtime_backends() -> list[str]:
    """The delegates the installed ExecuTorch runtime registers (e.g. "XnnpackBackend", "CudaBackend")."""
    from executorch.runtime import Runtime

    return list(Runtime.get().backend_registry.registered_backend_names)


class ExecuTorchMethodRunner(Runner):
    """A loaded ExecuTorch method, called with host tensors; the runtime returns host (or device) tensors."""

    def __init__(self, method, export_info: dict | None = None) -> None:
        self.method = method
        self.precision_executed, self.precision_source, self.precision_detail = executorch_precision(
            export_info or {}
        )
        self.timing_scope = "model"

    def prepare(self, x: np.ndarray):
        import torch

        return [torch.from_numpy(np.array(x, dtype=np.float32))]

    def run(self, prepared):
        return self.method.execute(prepared)

    def outputs(self, result) -> list[np.ndarray]:
        return [
            np.asarray(r.float().cpu().numpy() if hasattr(r, "numpy") else r, dtype=np.float32)
            for r in result
        ]
