"""What a CPU quota does to a tail: ONNX Runtime yolo26n@640 with 1 and with 2 intra-op threads, timed side by side
in alternating blocks (A B A B ...) in whatever quota this process runs in, with the quota's throttle counters of
each configuration's blocks.

    python scripts/in_cpu_quota.py --cpus 1 -- .venv/bin/python benchmarks/quota_threads.py [--runs 150]
        [--block 25] [--cache-dir .cache/yolo26-bench]

The model is the harness's cached export of yolo26n@640 (run the main command first). It prints, per thread count,
the p50, p90 and p99 of each half of its rounds (the two halves measured minutes apart show the spread of a shared
machine), and how many of the quota periods its blocks ran in were throttled (harness.core.cpu_quota).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.core import cpu_quota  # noqa: E402


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=150, help="timed runs per thread count (default 150)")
    ap.add_argument("--block", type=int, default=25, help="runs per block (default 25)")
    ap.add_argument("--cache-dir", default=".cache/yolo26-bench")
    a = ap.parse_args()
    found = sorted(
        Path(a.cache_dir).glob("exports/yolo26n-detect-e2e-onnxruntime-cpu-640x640-b1-fp32-*/*.onnx")
    )
    if not found:
        print(
            f"ERROR: no cached yolo26n@640 ONNX Runtime export under {a.cache_dir}: run the main command first"
        )
        return 2
    import numpy as np
    import onnxruntime as ort

    quota = cpu_quota.read_quota()
    print(f"quota: {quota.words()}; ONNX Runtime {ort.__version__}; model {found[-1]}")
    x = np.random.default_rng(0).random((1, 3, 640, 640), dtype=np.float32)
    sessions = {}
    for threads in (1, 2):
        so = ort.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
        sess = ort.InferenceSession(str(found[-1]), so, providers=["CPUExecutionProvider"])
        feed = {sess.get_inputs()[0].name: x}
        for _ in range(3):
            sess.run(None, feed)
        sessions[threads] = (sess, feed)
    times: dict[int, list[float]] = {1: [], 2: []}
    counts = {1: [0, 0], 2: [0, 0]}
    while min(len(v) for v in times.values()) < a.runs:
        for threads, (sess, feed) in sessions.items():  # A B A B: each block beside the other's
            before = cpu_quota.throttle(quota)
            for _ in range(a.block):
                t0 = time.perf_counter()
                sess.run(None, feed)
                times[threads].append((time.perf_counter() - t0) * 1000)
            d = cpu_quota.difference(before, cpu_quota.throttle(quota))
            if d:
                counts[threads][0] += d["periods"]
                counts[threads][1] += d["throttled"]
    for threads, values in times.items():
        values = values[: a.runs]
        half = len(values) // 2
        parts = []
        for name, part in (("first half", values[:half]), ("second half", values[half:])):
            parts.append(
                f"{name} p50 {statistics.median(part):.1f} p90 {percentile(part, 0.9):.1f} "
                f"p99 {percentile(part, 0.99):.1f} ms"
            )
        periods, throttled = counts[threads]
        print(
            f"intra-op {threads} thread(s), {len(values)} runs: "
            + "; ".join(parts)
            + (f"; throttled in {throttled} of {periods} quota periods" if quota.cpus else "")
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
