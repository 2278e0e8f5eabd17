"""The backbone-only ("hybrid") remedy, shared by the backends that offer it (ExecuTorch CUDA, AOTInductor).

`backbone_only(model)` is the seeds' "hybrid" remedy (request option {"remedy": "backbone-only"}): the network up to
the one-to-one head's decoded predictions goes on the device; the top-k selection that follows (where ExecuTorch
CUDA fails on YOLO26: `index_put` lowering, Triton top-k rows > 4096) runs on the host, with ultralytics' own code,
inside the timed call (`HostTopKRunner`).
"""

from __future__ import annotations

import copy

import numpy as np

from harness.backends.base import ExportRequest, Runner

REMEDY_BACKBONE_ONLY = "backbone-only"


def _no_postprocess(preds):
    """Stands in for Detect.postprocess, whose input is [B, anchors, C]: return the raw head's layout [B, C, anchors]."""
    return preds.permute(0, 2, 1)


def backbone_only(model):
    """A copy of `model` (prepared, head e2e) that stops before the head's top-k post-processing.

    Its first output is the one-to-one head's decoded predictions in the raw head's layout, [B, 4 + nc + extra,
    anchors] (boxes xyxy, class scores after sigmoid), in place of [B, max_det, 6 + extra]; other outputs (such as
    segmentation prototypes) are unchanged. `host_postprocess(outputs, postprocess_spec(model))` turns them into the
    full model's outputs. Raises ValueError for a model without a detection head or with the raw head (which has no
    on-device post-processing to move).
    """
    from ultralytics.nn.modules import Detect

    heads = [m for m in model.modules() if isinstance(m, Detect)]
    if not heads:
        raise ValueError("backbone-only applies to models with a detection head (detect, seg, pose, obb)")
    if not heads[-1].end2end:
        raise ValueError(
            "backbone-only applies to head=e2e: the raw head has no top-k post-processing to move"
        )
    model = copy.deepcopy(model)
    head = [m for m in model.modules() if isinstance(m, Detect)][-1]
    head.postprocess = _no_postprocess
    return model


def postprocess_spec(model) -> dict:
    """What the host top-k needs from the model's head (JSON-serialisable, carried in the export info)."""
    from ultralytics.nn.modules import Detect

    head = [m for m in model.modules() if isinstance(m, Detect)][-1]
    return {"nc": int(head.nc), "max_det": int(head.max_det), "agnostic_nms": bool(head.agnostic_nms)}


def host_postprocess(outputs: list, spec: dict) -> list:
    """ultralytics' Detect.postprocess (the one-to-one head's top-k) on the first output, on that tensor's device."""
    from ultralytics.nn.modules import Detect

    class HostTopK:
        """Just the attributes and methods Detect.postprocess uses; no parameters, so it runs on any tensor."""

        _grouped_topk = staticmethod(Detect._grouped_topk)
        _gather = Detect._gather
        get_topk_index = Detect.get_topk_index
        postprocess = Detect.postprocess

        def __init__(self) -> None:
            self.nc = spec["nc"]
            self.max_det = spec["max_det"]
            self.agnostic_nms = spec["agnostic_nms"]
            self.export, self.format, self.dynamic = True, "executorch", False

    # HostTopK holds what Detect.postprocess reads of its head; the checker only sees a self that is not a Detect
    return [HostTopK().postprocess(outputs[0].permute(0, 2, 1)), *outputs[1:]]  # type: ignore[misc]


def export_remedy(req: ExportRequest) -> str | None:
    """The request's remedy option, validated: None or "backbone-only"."""
    remedy = req.options.get("remedy")
    if remedy not in (None, REMEDY_BACKBONE_ONLY):
        raise ValueError(f"{req.backend}: unknown remedy {remedy!r} (known: {REMEDY_BACKBONE_ONLY})")
    return remedy


class HostTopKRunner(Runner):
    """Wraps the runner of a backbone-only artifact: each timed call is the device part, the copy of its raw outputs
    to the host and ultralytics' top-k there (the hybrid pipeline end to end). `outputs` are the raw outputs, which
    the harness compares with `backbone_only(model)` in PyTorch; the host top-k is ultralytics' own code.
    """

    def __init__(self, inner: Runner, spec: dict, device_outputs: bool) -> None:
        self.inner = inner
        self.spec = spec
        self.precision_executed = inner.precision_executed
        self.precision_source = inner.precision_source
        self.precision_detail = inner.precision_detail
        self.compile_s = inner.compile_s
        self.torch_stream = inner.torch_stream
        copy_back = "+d2h" if device_outputs and "d2h" not in inner.timing_scope else ""
        self.timing_scope = f"{inner.timing_scope}{copy_back}+host_topk"

    def cpu_threads(self) -> tuple[int | None, str]:
        return self.inner.cpu_threads()

    def prepare(self, x: np.ndarray):
        return self.inner.prepare(x)

    def run(self, prepared):
        raw = self.inner.run(prepared)
        tensors = list(raw) if isinstance(raw, (list, tuple)) else [raw]
        return raw, host_postprocess([t.cpu() for t in tensors], self.spec)

    def synchronize(self) -> None:
        self.inner.synchronize()

    def outputs(self, result) -> list[np.ndarray]:
        return self.inner.outputs(result[0])

    def close(self) -> None:
        self.inner.close()
