"""PyTorch eager: the reference runtime. No export step; the artifact is the checkpoint."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

from harness.backends import register
from harness.backends._shared.cuda_streams import per_stream_calls
from harness.backends._shared.precision import torch_dtype_counts, verdict
from harness.backends._shared.probes import not_installed, torch_cuda_missing
from harness.backends._shared.torch_runtime import (
    TorchDeviceRunner,
    flatten_outputs,
    prepared_on_device,
    set_tf32,
    tf32_switches,
)
from harness.backends.base import Backend, Runner, Streams

log = logging.getLogger(__name__)

#: imported from here by harness.accuracy, harness.measure and the tests (their home is _shared/torch_runtime.py)
__all__ = ["TorchEager", "TorchRunner", "flatten_outputs", "set_tf32", "torch_precision"]


def torch_precision(tensors, device: str) -> tuple[str | None, str, dict]:
    """(precision_executed, precision_source, precision_detail) from the dtypes of a model's parameters.

    On CUDA the detail also carries the TF32 switches as torch reports them at load (fp32 parameters with TF32 on
    would run their matmuls/convolutions in TF32; `set_tf32` turns it off for fp32 cells).
    """
    counts = torch_dtype_counts(tensors)
    detail: dict = {"parameters": counts}
    source = "dtypes of the model's parameters as loaded"
    if str(device).startswith("cuda"):
        detail.update(tf32_switches())
        source += " (TF32 switches in the detail)"
    executed = verdict(counts)
    if executed is None:
        source = "the model has no floating-point parameters to read a precision from"
    return executed, source, detail


class TorchRunner(TorchDeviceRunner):
    """Runs an nn.Module on a device; inputs are moved to the device before timing."""

    def __init__(self, model, device: str, dtype) -> None:
        super().__init__(device, dtype)
        self.model = model
        # an OptimizedModule (torch.compile) yields the parameters of the module it compiled
        self.precision_executed, self.precision_source, self.precision_detail = torch_precision(
            list(model.parameters()), device
        )

    def run(self, prepared):
        return self.model(prepared)

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


class EagerRunner(TorchRunner):
    """A plain nn.Module: it takes any batch, so the camera-capacity search can also send N frames as one call."""

    def batched(self, n: int) -> Streams | None:
        # one stream's call (its own CUDA stream on a GPU), given the n frames as one input
        return replace(
            self.streams(1),
            mechanism=f"one nn.Module call on a batch of {n} frames (the module takes any batch)",
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
        if device == "cuda":
            return torch_cuda_missing("no CUDA device visible to torch")
        return not_installed("torch")

    def load(self, artifact: Path, cell, export_info: dict) -> Runner:
        model, dtype = prepared_on_device(artifact, cell)
        return EagerRunner(model, cell.device, dtype)
