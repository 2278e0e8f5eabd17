"""The end-to-end input path on a device, as ultralytics' predictor takes it.

ultralytics' `BasePredictor.preprocess` letterboxes on the host (`pre_transform`), uploads the letterboxed uint8
BHWC batch and converts it on the device: BHWC -> BCHW (made contiguous), BGR -> RGB (`flip(1)`), uint8 -> the
model's dtype, `/ 255`. Uploading uint8 moves a quarter of the bytes of a float32 tensor, and the conversion is a
few device kernels instead of host loops. The end-to-end pipeline (harness.measure.pipeline) takes this path for a
runner on a device whose `prepare` accepts a torch tensor already there (`Runner.device_input`); the upload reads
a page-locked (pinned) host buffer filled once per call, so the copy is a DMA from it rather than a staged copy of
pageable memory.

`to_model_input` is the conversion alone: the CPU tests run it with device "cpu" against the host path.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

#: the record's `e2e.input_path` for each way the pipeline feeds the model
UINT8_PINNED = "uint8 pinned upload, convert on device"
UINT8_PAGEABLE = "uint8 upload, convert on device"
FLOAT32_HOST = "float32 host"


def to_model_input(u8: Any, dtype: Any) -> Any:
    """A (B, H, W, 3) BGR uint8 torch tensor as the model's (B, 3, H, W) RGB input in `dtype`, scaled to [0, 1],
    on the tensor's own device: ultralytics' predictor's steps, in its order."""
    x = u8.permute(0, 3, 1, 2).contiguous()  # BHWC -> BCHW, dense first for a faster flip
    x = x.flip(1)  # BGR -> RGB
    return x.to(dtype).div_(255)


class Upload:
    """A uint8 host buffer of one batch (pinned on CUDA) and its upload and conversion on `device`.

    `fill` (host, the preprocess stage) copies a letterboxed BGR HWC image into every slot of the batch; `to_device`
    (the h2d stage) uploads the buffer and converts it. The copy is asynchronous from a pinned buffer: the caller
    synchronizes before the next `fill` (the h2d stage does)."""

    def __init__(self, device: Any, dtype: Any, batch: int, height: int, width: int) -> None:
        import torch

        self.device = torch.device(device)
        self.dtype = dtype
        self.pinned = self.device.type == "cuda"
        self.host = torch.empty((batch, height, width, 3), dtype=torch.uint8, pin_memory=self.pinned)
        self.view = self.host.numpy()

    @property
    def path(self) -> str:
        return UINT8_PINNED if self.pinned else UINT8_PAGEABLE

    def fill(self, letterboxed: np.ndarray) -> Any:
        self.view[:] = letterboxed  # broadcast over the batch
        return self.host

    def to_device(self, host: Any) -> Any:
        return to_model_input(host.to(self.device, non_blocking=self.pinned), self.dtype)
