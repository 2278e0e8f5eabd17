"""The harness's end-to-end input stages against ultralytics' own predictor preprocess, on the same image and device.

    .venv/bin/python benchmarks/preprocess_gpu.py [--device cuda] [--precision fp16] [--shape 640]
                                                  [--trials 15] [--block 20] [--limit 1.2]

A: the preprocess and h2d stages of the harness's end-to-end pipeline (harness.measure.pipeline.for_runner) for a
torch runner on the device: on CUDA the letterbox into a pinned uint8 buffer, its upload and the conversion on the
device (harness.measure.device_input); on the CPU the float32 host path the CPU cells take.
B: ultralytics' `DetectionPredictor.preprocess([image])` on the same device and dtype (its model the committed
stand-in yolo26n weights; nothing is downloaded), set up as its `stream_inference` sets it up: its LetterBox on
the host, the uint8 upload, the conversion on the device. `rect=False`, so both letterbox bus.jpg to the full shape
(ultralytics' `predict` defaults to rect=True, which pads bus.jpg to 640x480 only: less work, another input).
Each call ends with a device synchronize, so the conversion kernels count.

Timed interleaved: each trial times a block of A and a block of B, the order alternating from trial to trial.
Prints each side's median and its spread (p10-p90 of the rounds), the per-trial ratios' median and range, and
whether the two inputs are the same tensor. Exit 0 when the median ratio A/B is at most --limit (default 1.2),
1 when it is above or the inputs differ, 3 (with the reason) when --device cuda has no CUDA device.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def block(fn: Callable[[], Any], n: int, sync: Callable[[], None]) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        fn()
        sync()
        out.append((time.perf_counter_ns() - t0) / 1e6)
    return out


def harness_call(device: str, dtype, height: int, width: int) -> tuple[Callable[[], Any], str]:
    """The harness pipeline's preprocess (+ h2d) stages for a torch runner on `device`, and its input path."""
    from harness.backends._shared.torch_runtime import TorchDeviceRunner
    from harness.core.axes import Shape
    from harness.core.cell import Cell
    from harness.measure.pipeline import for_runner

    class Identity(TorchDeviceRunner):
        def run(self, prepared):
            return prepared

    cell = Cell("n", "detect", "e2e", "torch-eager", device, Shape(height, width))
    pipe = for_runner(Identity(device, dtype), cell)
    stages = dict(pipe.stages)
    pre, h2d = stages["preprocess"], stages.get("h2d")

    def call():
        x = pre(None)
        return h2d(x) if h2d is not None else x

    return call, pipe.input_path


def ultralytics_call(device: str, fp16: bool, height: int, width: int) -> Callable[[], Any]:
    """ultralytics' detection predictor's preprocess of bus.jpg on `device`: the predictor set up as its
    `stream_inference` sets it up (`setup_model`, the image size), without the model warm-up (not timed here)."""
    from ultralytics.models.yolo.detect import DetectionPredictor

    from harness.measure.pipeline import decoded
    from harness.yolo.models import standin_weights

    ckpt = standin_weights("n", "detect")
    if ckpt is None:
        raise SystemExit("the committed stand-in weights weights/standin/yolo26n-detect.pt are missing")
    img = np.array(decoded("bus.jpg"))
    overrides = {
        "imgsz": [height, width],
        "device": device,
        "rect": False,
        "verbose": False,
        "quantize": 16 if fp16 else None,
    }
    predictor = DetectionPredictor(overrides=overrides)
    predictor.setup_model(str(ckpt), verbose=False)
    predictor.imgsz = (height, width)
    if predictor.model.fp16 != fp16:
        raise SystemExit(f"ultralytics' predictor set fp16={predictor.model.fp16}, asked {fp16}")
    return lambda: predictor.preprocess([img])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu (a rehearsal of the script)")
    ap.add_argument("--precision", default="fp16", choices=("fp16", "fp32"))
    ap.add_argument("--shape", default="640", help="HxW or one side (default 640)")
    ap.add_argument("--trials", type=int, default=15)
    ap.add_argument("--block", type=int, default=20, help="rounds per block (default 20)")
    ap.add_argument("--limit", type=float, default=1.2)
    a = ap.parse_args(argv)

    import torch

    from harness.core.axes import Shape

    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print(
            f"no CUDA device here (torch {torch.__version__}, cuda build {torch.version.cuda}): nothing to compare"
        )
        return 3
    on_cuda = a.device.startswith("cuda")
    fp16 = a.precision == "fp16" and on_cuda  # ultralytics runs fp32 on a CPU whatever it is asked
    dtype = torch.float16 if fp16 else torch.float32
    shape = Shape.parse(a.shape)

    def sync() -> None:
        if on_cuda:
            torch.cuda.synchronize()

    ours, path = harness_call(a.device, dtype, shape.height, shape.width)
    theirs = ultralytics_call(a.device, fp16, shape.height, shape.width)
    x, y = ours(), theirs()
    sync()
    same = x.shape == y.shape and x.dtype == y.dtype and bool(torch.equal(x, y.to(x.device)))
    diff = (x.float() - y.float().to(x.device)).abs().max().item() if x.shape == y.shape else float("nan")
    for _ in range(3):  # warm-up of both
        ours(), theirs()
    sync()
    a_all: list[float] = []
    b_all: list[float] = []
    ratios = []
    for t in range(a.trials):
        first, second = (ours, theirs) if t % 2 == 0 else (theirs, ours)
        r1, r2 = block(first, a.block, sync), block(second, a.block, sync)
        ra, rb = (r1, r2) if t % 2 == 0 else (r2, r1)
        a_all += ra
        b_all += rb
        ratios.append(statistics.median(ra) / statistics.median(rb))
    ma, mb, mr = statistics.median(a_all), statistics.median(b_all), statistics.median(ratios)
    dev = torch.cuda.get_device_name() if on_cuda else "cpu"
    print(
        f"device {dev}, {a.precision if on_cuda else 'fp32'}, {shape.height}x{shape.width}, bus.jpg, batch 1"
    )
    print(f"{a.trials} trials x {a.block} rounds each, interleaved A B / B A")
    print(
        f"A harness preprocess+h2d ({path}): median {ma:.3f} ms (p10-p90 {_pct(a_all, 0.1):.3f}-{_pct(a_all, 0.9):.3f})"
    )
    print(
        f"B ultralytics predictor.preprocess: median {mb:.3f} ms (p10-p90 {_pct(b_all, 0.1):.3f}-{_pct(b_all, 0.9):.3f})"
    )
    print(
        f"A/B per-trial ratio: median {mr:.3f} (range {min(ratios):.3f}-{max(ratios):.3f}), limit {a.limit:g}"
    )
    print(
        f"same input tensor: {same} (max abs difference {diff:.3g}; shapes {tuple(x.shape)} {tuple(y.shape)})"
    )
    return 0 if mr <= a.limit and same else 1


if __name__ == "__main__":
    sys.exit(main())
