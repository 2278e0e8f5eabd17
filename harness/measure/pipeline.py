"""End-to-end timing: what one image costs from decoded pixels to final detections, stage by stage.

Model-only latency (`latency_ms`) leaves out what every deployment also pays: the letterbox and normalisation of
the input, the host-device copies, and the post-processing that turns outputs into detections (top-k of the
end-to-end head, NMS for the raw head, mask and keypoint decoding). Here one call of the pipeline is

    preprocess -> h2d -> model -> d2h -> postprocess

on the image decoded once (decode is excluded: it depends on the source, not the backend). Preprocess is
ultralytics' LetterBox plus BGR->RGB, HWC->CHW and /255; postprocess is ultralytics' own `non_max_suppression`
(`end2end=True` filters the end-to-end head's top-k rows by score, as its predictor does; the raw head gets the NMS)
and `scale_boxes` back to the image's pixels, with `process_mask` for seg, `scale_coords` for pose and
`regularize_rboxes` for obb; cls takes its top 5. On the CPU there is no host-device copy: the runner's own
conversions (`prepare`, `outputs`) count in preprocess and postprocess, and h2d/d2h are null with that reason; on a
device they are the h2d and d2h stages, unless the runtime's call copies inside itself (`timing_scope`
"model+h2d+d2h").

On a device, a runner that takes a torch tensor already there (`Runner.device_input`: the torch-based runners and
TensorRT) is fed as ultralytics' predictor feeds its model (harness.measure.device_input): preprocess is the
letterbox on the host into a pinned uint8 buffer, h2d the uint8 upload and the conversion on the device (BHWC ->
BCHW, BGR -> RGB, dtype, /255). Other device runners (ONNX Runtime's CUDA providers, ExecuTorch) take the float32
host tensor of the CPU path, copied in h2d. The record's `e2e.input_path` says which ran.

Rounds come in pairs: one call timed whole, one timed stage by stage (the order alternating), so the check that the
stage sum matches the wall time of the whole call compares two calls a few milliseconds apart, on the same machine
state. A stage sum more than CHECK_TOLERANCE off the wall time means work escaped the stage clocks (a missing
synchronize, an untimed step): the record says the check failed.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.measure import device_input
from harness.measure.stats import median

STAGE_NAMES = ("preprocess", "h2d", "model", "d2h", "postprocess")
CHECK_TOLERANCE = 0.05
CHECK_RULE = (
    f"median over paired rounds of (sum of stage times / wall time of a whole call) within "
    f"+-{CHECK_TOLERANCE:.0%} of 1"
)
CONF = 0.25  # ultralytics predict's default confidence threshold
IOU = 0.7  # ultralytics predict's default NMS IoU
MAX_DET = 300
KPT_SHAPE = (17, 3)  # YOLO26 pose: 17 keypoints of (x, y, visibility)
NO_COPY_CPU = "no host-device copy on CPU: the runner's input and output conversions count in preprocess and postprocess"
COPY_INSIDE = (
    "the runtime's call copies between host and device itself (timing_scope model+h2d+d2h): in model"
)

POSTPROCESS_CALLS = {
    "detect": "ultralytics.utils.nms.non_max_suppression + ultralytics.utils.ops.scale_boxes",
    "seg": "ultralytics.utils.nms.non_max_suppression + ops.process_mask(upsample=True) + ops.scale_boxes",
    "pose": "ultralytics.utils.nms.non_max_suppression + ops.scale_boxes + ops.scale_coords",
    "obb": "ultralytics.utils.nms.non_max_suppression(rotated=True) + ops.regularize_rboxes + "
    "ops.scale_boxes(xywh=True)",
    "cls": "numpy argsort of the class scores (top 5), as ultralytics' Probs.top5",
}


@functools.lru_cache(maxsize=4)
def decoded(name: str = "bus.jpg") -> np.ndarray:
    """The ultralytics asset `name` decoded once (BGR, HWC uint8); read-only."""
    import cv2

    from harness.yolo.inputs import asset_path

    img = cv2.imread(str(asset_path(name)))
    if img is None:
        raise FileNotFoundError(f"cannot decode {name}")
    img.setflags(write=False)
    return img


def preprocess(image: np.ndarray, height: int, width: int, batch: int) -> np.ndarray:
    """Letterbox (harness.yolo.inputs.letterbox_image: ultralytics' LetterBox), BGR->RGB, HWC->CHW, float32 /255,
    `batch` copies."""
    from harness.yolo.inputs import letterbox_image

    x = np.ascontiguousarray(letterbox_image(image, height, width), dtype=np.float32) / 255.0
    return np.ascontiguousarray(np.broadcast_to(x, (batch, *x.shape)))


def postprocess(
    outputs: list[np.ndarray], task: str, head: str, imgsz: tuple[int, int], orig: tuple[int, int]
) -> list[Any]:
    """Final results per image of the batch, from the model's outputs, with ultralytics' own operations."""
    import torch
    from ultralytics.utils import ops
    from ultralytics.utils.nms import non_max_suppression

    first = torch.from_numpy(np.ascontiguousarray(outputs[0]))
    if task == "cls":
        probs = first.reshape(first.shape[0], -1)
        return [torch.argsort(p, descending=True)[:5] for p in probs]
    end2end = head == "e2e"
    if end2end:
        nc = 0
    else:
        extra = {
            "detect": 0,
            "seg": int(outputs[1].shape[1]) if len(outputs) > 1 else 32,
            "pose": KPT_SHAPE[0] * KPT_SHAPE[1],
            "obb": 1,
        }[task]
        nc = first.shape[1] - 4 - extra
    preds = non_max_suppression(
        first, CONF, IOU, max_det=MAX_DET, nc=nc, rotated=task == "obb", end2end=end2end
    )
    out = []
    for i, pred in enumerate(preds):
        if task == "seg":
            proto = torch.from_numpy(np.ascontiguousarray(outputs[1][i]))
            masks = (
                ops.process_mask(proto, pred[:, 6:], pred[:, :4], imgsz, upsample=True) if len(pred) else None
            )
            pred[:, :4] = ops.scale_boxes(imgsz, pred[:, :4], orig)
            out.append((pred[:, :6], masks))
        elif task == "pose":
            kpts = ops.scale_coords(imgsz, pred[:, 6:].view(pred.shape[0], *KPT_SHAPE), orig)
            pred[:, :4] = ops.scale_boxes(imgsz, pred[:, :4], orig)
            out.append((pred[:, :6], kpts))
        elif task == "obb":
            rboxes = ops.regularize_rboxes(torch.cat([pred[:, :4], pred[:, -1:]], dim=-1))
            rboxes[:, :4] = ops.scale_boxes(imgsz, rboxes[:, :4], orig, xywh=True)
            out.append(torch.cat([rboxes, pred[:, 4:6]], dim=-1))
        else:
            pred[:, :4] = ops.scale_boxes(imgsz, pred[:, :4], orig)
            out.append(pred[:, :6])
    return out


Stage = tuple[str, Callable[[Any], Any]]


@dataclass
class Pipeline:
    """One runner's end-to-end call as named stages; each stage takes what the one before returned."""

    stages: list[Stage]
    #: stage name -> why it has no time of its own (it does not exist on this device, or runs inside another)
    absent: dict[str, str]
    postprocess_call: str
    image: str = "bus.jpg"
    #: how the input reaches the model (harness.measure.device_input: UINT8_PINNED, UINT8_PAGEABLE, FLOAT32_HOST)
    input_path: str = device_input.FLOAT32_HOST
    #: one untimed call's count of what the post-processing was given (`census`), or None
    census: Callable[[], dict] | None = None

    def whole(self) -> Any:
        """One call, untimed inside."""
        value = None
        for _, fn in self.stages:
            value = fn(value)
        return value

    def staged(self, clock: Callable[[], int] = time.perf_counter_ns) -> dict[str, float]:
        """One call with each stage timed (ms)."""
        out, value = {}, None
        for name, fn in self.stages:
            t0 = clock()
            value = fn(value)
            out[name] = (clock() - t0) / 1e6
        return out


def for_runner(runner, cell, image: str = "bus.jpg", call: Callable[[Any], Any] | None = None) -> Pipeline:
    """The pipeline of `runner` for `cell`: preprocess, (h2d,) model, (d2h,) postprocess. `call` runs the model
    on one of the runner's streams (harness.backends.base.Runner.streams); default: its run plus synchronize."""
    img = decoded(image)
    h, w, batch = cell.shape.height, cell.shape.width, cell.batch
    orig = img.shape[:2]

    def model(p):
        if call is not None:
            return call(p)
        r = runner.run(p)
        runner.synchronize()
        return r

    def post(outputs):
        return postprocess(outputs, cell.task, cell.head, (h, w), orig)

    def census_of(stages: list[Stage], outputs_of: Callable[[Any], Any]) -> Callable[[], dict]:
        def census() -> dict:
            value = None
            for _, fn in stages[:-1]:
                value = fn(value)
            outputs = outputs_of(value)
            return postprocess_census(outputs, cell.task, cell.head, post(outputs))

        return census

    on_device = cell.device != "cpu"
    copies_inside = runner.timing_scope != "model"
    if not on_device or copies_inside:
        why = NO_COPY_CPU if not on_device else COPY_INSIDE
        stages: list[Stage] = [
            ("preprocess", lambda _: runner.prepare(preprocess(img, h, w, batch))),
            ("model", model),
            ("postprocess", lambda r: post(runner.outputs(r))),
        ]
        census = census_of(stages, runner.outputs)
        return Pipeline(stages, {"h2d": why, "d2h": why}, POSTPROCESS_CALLS[cell.task], image, census=census)
    upload = device_upload(runner, h, w, batch)

    def pre(_):
        if upload is None:
            return preprocess(img, h, w, batch)
        return upload.fill(letterbox_hwc(img, h, w))

    def h2d(x):
        p = runner.prepare(x if upload is None else upload.to_device(x))
        runner.synchronize()  # the copy (asynchronous from pinned memory) and any conversion are done
        return p

    stages = [
        ("preprocess", pre),
        ("h2d", h2d),
        ("model", model),
        ("d2h", runner.outputs),
        ("postprocess", post),
    ]
    path = device_input.FLOAT32_HOST if upload is None else upload.path
    return Pipeline(stages, {}, POSTPROCESS_CALLS[cell.task], image, path, census_of(stages, lambda v: v))


def postprocess_census(outputs: list[np.ndarray], task: str, head: str, results: list[Any]) -> dict:
    """What the post-processing of the first image was given and gave: the boxes whose best class score is above
    CONF (what NMS sorts and suppresses for the raw head; the top-k rows kept for the end-to-end head) and the
    detections it returned. NMS's cost grows with the first: a random-init model passes far fewer boxes than a
    trained one on a real image, so the e2e section says how many."""
    if task == "cls":
        return {"conf": None, "above_conf": None, "detections": None, "rule": "a classifier has no boxes"}
    first = np.asarray(outputs[0])[0]
    if head == "e2e":
        scores = first[:, 4]
    else:
        extra = {"detect": 0, "seg": int(outputs[1].shape[1]) if len(outputs) > 1 else 32}.get(task)
        extra = {"pose": KPT_SHAPE[0] * KPT_SHAPE[1], "obb": 1}.get(task, extra or 0)
        nc = first.shape[0] - 4 - extra
        scores = first[4 : 4 + nc].max(axis=0)
    done = results[0][0] if isinstance(results[0], tuple) else results[0]
    return {
        "conf": CONF,
        "above_conf": int((scores > CONF).sum()),
        "detections": len(done),
        "rule": "boxes whose best class score is above conf on the image's first call, as the post-processing "
        "received them (NMS's work grows with them), and the detections it returned",
    }


def letterbox_hwc(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """ultralytics' LetterBox of `image` (BGR HWC uint8): the host part of the device input path."""
    from harness.yolo.inputs import letterbox_hwc as lb

    return lb(image, height, width)


def device_upload(runner, height: int, width: int, batch: int) -> device_input.Upload | None:
    """The uint8 upload of a runner that takes a tensor on its device (`Runner.device_input`), else None."""
    where = runner.device_input()
    if where is None:
        return None
    device, dtype = where
    return device_input.Upload(device, dtype, batch, height, width)


@dataclass
class E2ETiming:
    """The paired rounds of one pipeline: wall times of whole calls and stage times of staged calls."""

    pipeline: Pipeline
    walls: list[float] = field(default_factory=list)
    staged: list[dict[str, float]] = field(default_factory=list)
    #: the next pair starts with one untimed call (set when another runner ran in between: the first call after
    #: that pays for waking the runtime's threads, which would land on whichever half of the pair came first)
    cold: bool = False

    def resume(self) -> None:
        self.cold = True

    def pair(self, clock: Callable[[], int] = time.perf_counter_ns) -> None:
        """One whole call and one staged call, the order alternating from pair to pair (after one untimed call
        when the runner was `cold`)."""
        if self.cold:
            self.cold = False
            self.pipeline.whole()
        whole_first = len(self.walls) % 2 == 0
        if not whole_first:
            self.staged.append(self.pipeline.staged(clock))
        t0 = clock()
        self.pipeline.whole()
        self.walls.append((clock() - t0) / 1e6)
        if whole_first:
            self.staged.append(self.pipeline.staged(clock))

    def gap(self) -> float | None:
        """Median over pairs of (stage sum / wall) - 1."""
        ratios = [sum(s.values()) / w for s, w in zip(self.staged, self.walls, strict=False) if w > 0]
        return median(ratios) - 1.0 if ratios else None

    def stages_ms(self) -> dict[str, float | None]:
        """The p50 of each stage; None where the stage does not exist (see `pipeline.absent`)."""
        out: dict[str, float | None] = {}
        for n in STAGE_NAMES:
            times = [s[n] for s in self.staged if n in s]
            out[n] = median(times) if times else None
        return out

    def section(self) -> dict:
        """The record's `e2e` section: what was timed and whether the stage sum matched the wall time."""
        gap = self.gap()
        stages = self.stages_ms()
        return {
            "image": self.pipeline.image,
            "decode": "excluded (decoded once before timing)",
            "postprocess": self.pipeline.postprocess_call,
            "input_path": self.pipeline.input_path,
            "pairs": len(self.walls),
            "stage_sum_ms": sum(v for v in stages.values() if v is not None),
            "wall_ms": median(self.walls) if self.walls else None,
            "gap": gap,
            "check": {"rule": CHECK_RULE, "held": gap is not None and abs(gap) <= CHECK_TOLERANCE},
            "postprocess_input": self._census(),
        }

    def _census(self) -> dict | None:
        """The pipeline's census (one untimed call, after the timed ones), or None where it has none or fails."""
        if self.pipeline.census is None:
            return None
        try:
            return self.pipeline.census()
        except Exception as e:  # a count for the reader: never the cell's failure
            return {"error": f"{type(e).__name__}: {e}"}
