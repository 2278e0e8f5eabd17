"""How many cameras one worker serves at a frame rate, taking their frames in turn: a plain ONNX Runtime script, no
harness code, to set beside the harness's camera-capacity answer (harness.scenarios.capacity).

    .venv/bin/python benchmarks/cameras_serial.py MODEL.onnx [--fps 30] [--seconds 5] [--threads 2] [--max-cameras 8]

Every 1/fps s, N cameras each deliver a frame (bus.jpg, decoded once); one worker takes the N frames in turn, each
end to end as a user's loop would: letterbox to the model's input, BGR to RGB, /255, one InferenceSession.run, the
end-to-end head's detections over 0.25 kept and scaled back to the image. A query is the N frames of one tick; its
latency is from the tick to the last frame's result, so a worker that falls behind carries the delay into the next
queries (the harness's LoadGen MultiStream issues the next query when the previous returns, and never waits). The
session is the harness's: intra_op_num_threads = --threads, one inter-op thread, sequential execution, all graph
optimisations. For each N from 1: the queries, the per-query p50 and p90 (the sorted latencies at floor(0.9 x count),
as LoadGen reports a percentile) and whether the p90 is within the frame time; then the largest N that is.
Find the harness's yolo26n 320 ONNX file in its export cache after a run:
`find CACHE_DIR -name '*.onnx' -path '*320*'` (the entry's meta.json names the cell).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import onnxruntime as ort


def bus_jpg() -> np.ndarray:
    import ultralytics

    path = Path(ultralytics.__file__).parent / "assets" / "bus.jpg"
    img = cv2.imread(str(path))
    if img is None:
        sys.exit(f"cannot read {path}")
    return img


def letterbox(img: np.ndarray, h: int, w: int) -> tuple[np.ndarray, float, tuple[int, int]]:
    ih, iw = img.shape[:2]
    r = min(h / ih, w / iw)
    nh, nw = round(ih * r), round(iw * r)
    top, left = (h - nh) // 2, (w - nw) // 2
    out = np.full((h, w, 3), 114, dtype=np.uint8)
    out[top : top + nh, left : left + nw] = cv2.resize(img, (nw, nh), interpolation=cv2.INTER_LINEAR)
    return out, r, (top, left)


def session(path: str, threads: int) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.log_severity_level = 3
    return ort.InferenceSession(path, sess_options=so, providers=["CPUExecutionProvider"])


def frame_call(sess: ort.InferenceSession, img: np.ndarray):
    inp = sess.get_inputs()[0]
    h, w = int(inp.shape[2]), int(inp.shape[3])

    def one() -> np.ndarray:
        boxed, r, (top, left) = letterbox(img, h, w)
        x = np.ascontiguousarray(boxed[..., ::-1].transpose(2, 0, 1)[None], dtype=np.float32) / 255.0
        out = sess.run(None, {inp.name: x})[0][0]  # end-to-end head: (max_det, 6) x1 y1 x2 y2 score class
        det = out[out[:, 4] > 0.25].copy()
        det[:, [0, 2]] = (det[:, [0, 2]] - left) / r
        det[:, [1, 3]] = (det[:, [1, 3]] - top) / r
        return det

    return one, (h, w)


def serve(one, cameras: int, fps: float, seconds: float) -> list[float]:
    """Per-query latencies (ms): every 1/fps s a tick of `cameras` frames, taken in turn by one worker."""
    period = 1.0 / fps
    ticks = max(20, int(seconds * fps))
    lat = []
    t0 = time.perf_counter() + 0.05
    for k in range(ticks):
        due = t0 + k * period
        now = time.perf_counter()
        if now < due:
            time.sleep(due - now)
        for _ in range(cameras):
            one()
        lat.append((time.perf_counter() - due) * 1e3)
    return lat


def loadgen_percentile(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(int(p * len(s)), len(s) - 1)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="an ONNX file of batch 1 with the end-to-end head (yolo26n at 320, say)")
    ap.add_argument("--fps", type=float, default=30.0)
    ap.add_argument("--seconds", type=float, default=5.0, help="per camera count")
    ap.add_argument(
        "--threads", type=int, default=2, help="intra_op_num_threads (the harness's thread budget)"
    )
    ap.add_argument("--max-cameras", type=int, default=8)
    args = ap.parse_args(argv)
    sess = session(args.model, args.threads)
    one, (h, w) = frame_call(sess, bus_jpg())
    for _ in range(20):  # warm-up
        one()
    frame_ms = 1000.0 / args.fps
    print(
        f"{args.model}: input {h}x{w}, {args.threads} threads, {args.fps:g} FPS (frame time {frame_ms:.2f} ms)"
    )
    print("cameras  queries  p50_ms  p90_ms  within")
    best = 0
    for n in range(1, args.max_cameras + 1):
        lat = serve(one, n, args.fps, args.seconds)
        p50, p90 = loadgen_percentile(lat, 0.5), loadgen_percentile(lat, 0.9)
        ok = p90 <= frame_ms
        print(f"{n:7d}  {len(lat):7d}  {p50:6.1f}  {p90:6.1f}  {'yes' if ok else 'no'}", flush=True)
        if ok:
            best = n
        else:
            break
    print(
        f"largest N within the frame time: {best} camera(s) at {args.fps:g} FPS, one worker, frames in turn"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
