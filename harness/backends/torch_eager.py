"""PyTorch eager: the reference runtime. No export step; the artifact is the checkpoint."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from harness.backends import register
from harness.backends.base import Backend, Runner

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


class TorchRunner(Runner):
    """Runs an nn.Module on a device; inputs are moved to the device before timing."""

    def __init__(self, model, device: str, dtype) -> None:
        import torch

        self.model = model
        self.device = torch.device(device)
        self.dtype = dtype
        self.precision_executed = {torch.float32: "fp32", torch.float16: "fp16"}[dtype]
        self.timing_scope = "model"
        self._cuda = self.device.type == "cuda"
        self.torch_stream = (
            self._cuda
        )  # work is enqueued on torch's current stream (CUDA events can split it)

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


@register
class TorchEager(Backend):
    name = "torch-eager"
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

        from harness.models import prepared_model

        model = prepared_model(artifact, cell.head, (cell.shape.height, cell.shape.width))
        dtype = torch.float16 if cell.precision == "fp16" else torch.float32
        model = model.to(cell.device).to(dtype)
        return TorchRunner(model, cell.device, dtype)
