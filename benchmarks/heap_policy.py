"""What the heap policy (`--malloc`, harness.core.allocator) does to PyTorch eager on a CPU, and to its ratio to ONNX
Runtime: fresh processes alternating `retain` and `system` (R S R S ...).

    .venv/bin/python benchmarks/heap_policy.py [--pairs 2] [--seconds 40] [--cache-dir .cache/yolo26-bench]

Each process applies its policy, loads yolo26n@640 twice, as PyTorch eager (the committed stand-in weights, prepared
as the harness prepares them) and as ONNX Runtime (the harness's cached export: run the main command or the test
suite first), both with the run's thread budget, and times them interleaved in alternating blocks (3 torch calls, 5
ONNX Runtime calls) for `--seconds`. It prints per process: the torch p50, its minor page faults and system time
per call, the ONNX Runtime p50, the ratio torch/ORT (median over blocks) and the ratio in each sixth of the time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics as st
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child(seconds: float, onnx: str) -> dict:
    import resource
    import time

    from harness.core import allocator
    from harness.threads import apply_torch, budget, set_budget

    info = allocator.apply()
    set_budget(budget())
    import onnxruntime as ort
    import torch

    from harness.yolo.models import prepared_model, standin_weights

    apply_torch()
    model = prepared_model(standin_weights("n", "detect"), "e2e", (640, 640))
    x = torch.rand(1, 3, 640, 640, generator=torch.Generator().manual_seed(0))
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = budget(), 1
    sess = ort.InferenceSession(onnx, so, providers=["CPUExecutionProvider"])
    feed = {sess.get_inputs()[0].name: x.numpy()}

    def torch_call() -> None:
        with torch.inference_mode():
            model(x)

    def ort_call() -> None:
        sess.run(None, feed)

    for _ in range(3):
        torch_call()
        ort_call()
    blocks: dict[str, list[tuple[float, float, float]]] = {"torch": [], "ort": []}
    t0 = time.time()
    while time.time() - t0 < seconds:
        for key, fn, n in (("torch", torch_call, 3), ("ort", ort_call, 5)):
            time.sleep(
                0.05
            )  # ONNX Runtime's pool spins after a run: let it go idle (harness.measure.quiesce)
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            times = []
            for _ in range(n):
                a = time.perf_counter()
                fn()
                times.append((time.perf_counter() - a) * 1e3)
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            blocks[key].append(
                (st.median(times), (r1.ru_minflt - r0.ru_minflt) / n, (r1.ru_stime - r0.ru_stime) * 1e3 / n)
            )
    ratios = [a[0] / b[0] for a, b in zip(blocks["torch"], blocks["ort"], strict=False)]
    k = max(1, len(ratios) // 6)
    return {
        "policy": info["policy"],
        "applied": info["applied"],
        "torch_p50_ms": st.median(b[0] for b in blocks["torch"]),
        "torch_faults_per_call": st.median(b[1] for b in blocks["torch"]),
        "torch_sys_ms_per_call": st.median(b[2] for b in blocks["torch"]),
        "ort_p50_ms": st.median(b[0] for b in blocks["ort"]),
        "ratio": st.median(ratios),
        "ratio_by_sixth": [
            round(st.median(ratios[i * k : (i + 1) * k]), 3) for i in range(6) if ratios[i * k :]
        ],
        "trials": len(ratios),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=40.0)
    ap.add_argument("--cache-dir", default=".cache/yolo26-bench")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    found = sorted(
        Path(a.cache_dir).glob("exports/yolo26n-detect-e2e-onnxruntime-cpu-640x640-b1-fp32-*/*.onnx")
    )
    if not found:
        print(
            f"ERROR: no cached yolo26n@640 ONNX Runtime export under {a.cache_dir}: run the main command first"
        )
        return 2
    if a.child:
        print(json.dumps(child(a.seconds, str(found[-1]))))
        return 0
    rows = []
    for _ in range(a.pairs):
        for policy in ("retain", "system"):
            env = dict(os.environ, YOLO26_BENCH_MALLOC=policy, PYTHONPATH=str(ROOT))
            cmd = [
                sys.executable,
                __file__,
                "--child",
                "--seconds",
                str(a.seconds),
                "--cache-dir",
                a.cache_dir,
            ]
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            row = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(
                f"{row['policy']:7s} torch {row['torch_p50_ms']:6.1f} ms ({row['torch_faults_per_call']:7.0f} faults, "
                f"{row['torch_sys_ms_per_call']:5.1f} ms system per call)  ort {row['ort_p50_ms']:5.1f} ms  "
                f"torch/ort {row['ratio']:.3f} by sixth {row['ratio_by_sixth']}",
                flush=True,
            )
    for policy in ("retain", "system"):
        r = [row["ratio"] for row in rows if row["policy"] == policy]
        print(
            f"{policy}: torch/ort ratio over processes {min(r):.3f}-{max(r):.3f} ({max(r) / min(r) - 1:+.1%})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
