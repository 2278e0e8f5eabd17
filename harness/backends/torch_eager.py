"""PyTorch eager: the reference runtime. No export step; the artifact is the checkpoint."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from harness.backends import register
from harness.backends._shared.cuda_streams import per_stream_calls
from harness.backends._shared.precision import torch_dtype_counts, verdict
from harness.backends.base import Backend, Runner, Streams
from harness.core.threads import GPU_CELL_REASON, apply_torch, torch_threads

log = logging.getLogger(__name__)


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


def torch_precision(tensors, device: str) -> tuple[str | None, str, dict]:
    """(precision_executed, precision_source, precision_detail) from the dtypes of a model's parameters.

    On CUDA the detail also carries the TF32 switches as torch reports them at load (fp32 parameters with TF32 on
    would run their matmuls/convolutions in TF32; `set_tf32` turns it off for fp32 cells).
    """
    import torch

    counts = torch_dtype_counts(tensors)
    detail: dict = {"parameters": counts}
    source = "dtypes of the model's parameters as loaded"
    if str(device).startswith("cuda"):
        detail["tf32_matmul"] = bool(torch.backends.cuda.matmul.allow_tf32)
        detail["tf32_cudnn"] = bool(torch.backends.cudnn.allow_tf32)
        source += " (TF32 switches in the detail)"
    executed = verdict(counts)
    if executed is None:
        source = "the model has no floating-point parameters to read a precision from"
    return executed, source, detail


class TorchRunner(Runner):
    """Runs an nn.Module on a device; inputs are moved to the device before timing."""

    #: torch.cuda's stream API for `streams` (None: torch.cuda itself; the CPU tests give a fake)
    cuda_api = None

    def __init__(self, model, device: str, dtype) -> None:
        import torch

        self.model = model
        self.device = torch.device(device)
        self.dtype = dtype
        self.timing_scope = "model"
        self._cuda = self.device.type == "cuda"
        self.torch_stream = (
            self._cuda
        )  # work is enqueued on torch's current stream (CUDA events can split it)
        # an OptimizedModule (torch.compile) yields the parameters of the module it compiled
        self.precision_executed, self.precision_source, self.precision_detail = torch_precision(
            list(model.parameters()), device
        )

    def cpu_threads(self) -> tuple[int | None, str]:
        if self._cuda:
            return None, GPU_CELL_REASON
        return torch_threads()

    def prepare(self, x: np.ndarray):
        import torch

        return torch.from_numpy(np.array(x)).to(self.device, self.dtype)

    def run(self, prepared):
        return self.model(prepared)

    def synchronize(self) -> None:
        if self._cuda:
            import torch

            torch.cuda.synchronize(self.device)

    def outputs(self, result) -> list[np.ndarray]:
        return flatten_outputs(result)

    def stream_call(self, prepared):
        """One call of a scenario stream (several threads at once): the module under inference_mode."""
        import torch

        with torch.inference_mode():
            return self.model(prepared)

    def streams(self, n: int) -> Streams:
        if self._cuda:
            return per_stream_calls(
                self.stream_call,
                self.device,
                n,
                f"{n} CUDA streams, one per thread: each call enqueues on its own stream and waits for it only",
                cuda=self.cuda_api,
            )
        return Streams(
            [self.stream_call] * n,
            f"one nn.Module called from {n} threads at once under inference_mode (PyTorch's CPU kernels release "
            "the GIL; each call uses the intra-op thread pool)",
        )


@register
class TorchEager(Backend):
    name = "torch-eager"
    display_order = 10
    registry_order = 10
    devices = ("cpu", "cuda")
    precisions = {"cpu": ("fp32",), "cuda": ("fp32", "fp16")}
    exports = False
    library = "torch"

    def probe(self, device: str) -> str | None:
        try:
            import torch
        except ImportError as e:
            return f"torch is not installed ({e})"
        if device == "cuda" and not torch.cuda.is_available():
            return "no CUDA device visible to torch"
        return None

    def load(self, artifact: Path, cell, export_info: dict) -> Runner:
        import torch

        from harness.yolo.models import prepared_model

        model = prepared_model(artifact, cell.head, (cell.shape.height, cell.shape.width))
        apply_torch()  # the run's budget, after ultralytics (whatever it set) is imported
        dtype = torch.float16 if cell.precision == "fp16" else torch.float32
        set_tf32(cell.device, dtype)
        model = model.to(cell.device).to(dtype)
        return TorchRunner(model, cell.device, dtype)
