"""What the torch-based backends (torch eager, torch.compile, AOTInductor) share: the dtype of a cell, the TF32
switches, the prepared model on its device, and a runner base for a callable that runs on a torch device.

torch is imported lazily, inside functions: this module is imported on hosts without torch too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from harness.backends.base import Runner
from harness.threads import GPU_CELL_REASON, apply_torch, torch_threads


def torch_dtype(precision: str):
    """The torch dtype a cell of `precision` runs in: float16 for fp16, else float32."""
    import torch

    return torch.float16 if precision == "fp16" else torch.float32


def flatten_outputs(y) -> list[np.ndarray]:
    """Model outputs (tensor, or nested tuple/list of tensors) as a flat list of float32 host arrays."""
    import torch

    if isinstance(y, torch.Tensor):
        return [y.detach().float().cpu().numpy()]
    out: list[np.ndarray] = []
    for item in y:
        out.extend(flatten_outputs(item))
    return out


def set_tf32(device: str, dtype) -> None:
    """Make TF32 an explicit choice on CUDA: off for fp32 cells (fp32 means IEEE fp32 matmuls and convolutions).

    torch's defaults differ between matmul (off) and cuDNN convolutions (on), and a script or library imported
    earlier may have changed either; fp16 cells leave them as they are (their kernels do not use TF32).
    """
    import torch

    if str(device).startswith("cuda") and dtype == torch.float32:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False


def tf32_switches() -> dict[str, bool]:
    """torch's TF32 switches as they stand now: {"tf32_matmul": ..., "tf32_cudnn": ...}."""
    import torch

    return {
        "tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32),
        "tf32_cudnn": bool(torch.backends.cudnn.allow_tf32),
    }


def prepared_on_device(artifact: Path, cell):
    """(model, dtype): the checkpoint prepared for `cell` (ultralytics' own preparation), under the run's thread
    budget, in the cell's dtype on its device, TF32 off for fp32 on CUDA."""
    from harness.yolo.models import prepared_model

    model = prepared_model(artifact, cell.head, (cell.shape.height, cell.shape.width))
    # the run's budget, after ultralytics (whatever it set) is imported and before anything compiles (Inductor's
    # CPU kernels use torch's OpenMP threads)
    apply_torch()
    dtype = torch_dtype(cell.precision)
    set_tf32(cell.device, dtype)
    return model.to(cell.device).to(dtype), dtype


class TorchDeviceRunner(Runner):
    """A callable on a torch device: inputs are placed on the device in `prepare`, outside the timed region; on
    CUDA the work is enqueued on torch's current stream (`torch_stream`), and `synchronize` waits for the device.
    Subclasses say what `run` calls."""

    #: torch.cuda's stream API for `streams` (None: torch.cuda itself; the CPU tests give a fake)
    cuda_api = None

    def __init__(self, device: str, dtype) -> None:
        import torch

        self.device = torch.device(device)
        self.dtype = dtype
        self.timing_scope = "model"
        self._cuda = self.device.type == "cuda"
        # work is enqueued on torch's current stream (CUDA events can split it)
        self.torch_stream = self._cuda

    def cpu_threads(self) -> tuple[int | None, str]:
        if self._cuda:
            return None, GPU_CELL_REASON
        return torch_threads()

    def prepare(self, x: np.ndarray):
        import torch

        if isinstance(x, torch.Tensor):  # converted on the device already (device_input): a no-op there
            return x.to(self.device, self.dtype)
        return torch.from_numpy(np.array(x)).to(self.device, self.dtype)

    def device_input(self) -> tuple[Any, Any] | None:
        return self.device, self.dtype

    def synchronize(self) -> None:
        if self._cuda:
            import torch

            torch.cuda.synchronize(self.device)

    def outputs(self, result) -> list[np.ndarray]:
        return flatten_outputs(result)
