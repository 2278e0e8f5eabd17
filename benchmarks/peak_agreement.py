"""Does the harness's measured CPU fp32 peak agree with a plain matrix-product loop timed outside the harness?

    .venv/bin/python benchmarks/peak_agreement.py [--rounds 6] [--threads N] [--n 2048] [--seconds 1.5]

Each round starts fresh processes, in an order rotated from round to round (interleaved, so that the machine's
drift falls on every side alike): the harness's measurement (harness.measure.peaks.measure_cpu, as a run takes it
when it starts: its `compute.fp32`, the best of its libraries, and each library's figure under `candidates`), and
one plain loop per library, written here without the harness: torch.matmul, a 1x1 torch conv2d (oneDNN), numpy's
matmul (threadpoolctl holding its BLAS to the budget), ONNX Runtime's MatMul, each on n x n float32 at the thread
budget, timing every product for `--seconds` after two warm-ups; a loop's figure is its best product's rate (the
harness's peak is a best rate too) and its median's is printed beside it. The plain peak of a round is the best of
its loops. Printed: each round's figures, then per library and for the peak the median over rounds of each side,
the ratio of the harness's median to the plain loop's, and the spread of the per-round ratios. The criterion: within
10% (docs/methodology.md, "How close to the machine"). With `--device cuda`, the GPU's fp16 peak against a plain
torch.matmul fp16 loop (a GPU only).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PLAIN = ("torch", "onednn", "numpy", "onnxruntime")


def _loop(fn, work: float, seconds: float, sync=None) -> tuple[float, float]:
    """(best, median) rate of the products timed for `seconds` (at least 5) after two warm-ups."""
    for _ in range(2):
        fn()
    if sync:
        sync()
    rates: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(rates) < 5:
        t0 = time.perf_counter()
        fn()
        if sync:
            sync()
        rates.append(work / (time.perf_counter() - t0))
    return max(rates), statistics.median(rates)


def plain(what: str, threads: int, n: int, seconds: float, device: str) -> dict:
    """A plain loop of `what` in this (fresh) process: {"best": rate, "median": rate}."""
    import numpy as np

    work = 2.0 * n**3
    if what in ("torch", "onednn"):
        import torch

        if device == "cuda":
            a = torch.randn(n, n, device="cuda", dtype=torch.float16)
            b = torch.randn(n, n, device="cuda", dtype=torch.float16)
            best, med = _loop(lambda: torch.matmul(a, b), work, seconds, torch.cuda.synchronize)
            return {"best": best, "median": med}
        torch.set_num_threads(threads)
        if what == "torch":
            a, b = torch.randn(n, n), torch.randn(n, n)
            best, med = _loop(lambda: torch.matmul(a, b), work, seconds)
        else:
            x, w = torch.randn(1, n, 32, n // 32), torch.randn(n, n, 1, 1)
            best, med = _loop(lambda: torch.nn.functional.conv2d(x, w), work, seconds)
        return {"best": best, "median": med}
    a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
    b = np.random.default_rng(1).standard_normal((n, n), dtype=np.float32)
    if what == "numpy":
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=threads, user_api="blas"):
            best, med = _loop(lambda: a @ b, work, seconds)
        return {"best": best, "median": med}
    import onnxruntime as ort
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["A", "B"], ["C"])],
        "plain",
        [
            helper.make_tensor_value_info("A", TensorProto.FLOAT, [n, n]),
            helper.make_tensor_value_info("B", TensorProto.FLOAT, [n, n]),
        ],
        [helper.make_tensor_value_info("C", TensorProto.FLOAT, [n, n])],
    )
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    session = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    best, med = _loop(lambda: session.run(None, {"A": a, "B": b}), work, seconds)
    return {"best": best, "median": med}


def harness(threads: int, device: str) -> dict:
    """The harness's figures in this (fresh) process: {"peak": rate, "candidates": {library: rate}}."""
    from harness.measure import peaks

    if device == "cuda":
        section, why = peaks.measure_cuda()
        if section is None:
            raise SystemExit(why)
        return {
            "peak": float(section["compute"]["fp16"]),
            "candidates": {"torch": section["compute"]["fp16"]},
        }
    cpu = peaks.measure_cpu(threads)
    return {
        "peak": float(cpu["compute"]["fp32"]),
        "candidates": cpu["candidates"]["fp32"],
        "s": cpu["seconds"],
    }


def spawn(what: str, args) -> dict:
    cmd = [sys.executable, __file__, "--one", what, "--threads", str(args.threads), "--n", str(args.n)]
    cmd += ["--seconds", str(args.seconds), "--device", args.device]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=REPO)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _spread(values: list[float]) -> str:
    return f"{min(values):.3f}-{max(values):.3f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--threads", type=int, default=None, help="default: the harness's thread budget")
    p.add_argument("--n", type=int, default=None, help="the plain loops' side (default 2048 CPU, 8192 CUDA)")
    p.add_argument("--seconds", type=float, default=1.5, help="each plain loop's timed seconds")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--one", choices=("harness", *PLAIN), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.threads is None:
        from harness.threads import budget

        args.threads = budget()
    if args.n is None:
        args.n = 8192 if args.device == "cuda" else 2048
    if args.one:
        if args.one == "harness":
            print(json.dumps(harness(args.threads, args.device)))
        else:
            print(json.dumps(plain(args.one, args.threads, args.n, args.seconds, args.device)))
        return 0
    libraries = PLAIN if args.device == "cpu" else ("torch",)
    kinds = ["harness", *libraries]
    print(
        f"{args.device}: {args.rounds} rounds, threads {args.threads}, plain loops {args.n}x{args.n} for "
        f"{args.seconds} s each, fresh processes in rotated order",
        flush=True,
    )
    rounds = []
    for r in range(args.rounds):
        order = kinds[r % len(kinds) :] + kinds[: r % len(kinds)]
        got = {k: spawn(k, args) for k in order}
        rounds.append(got)
        h = got["harness"]
        loops = ", ".join(
            f"{k} {got[k]['best'] / 1e9:.1f} (median {got[k]['median'] / 1e9:.1f})" for k in libraries
        )
        print(
            f"round {r + 1} ({' '.join(order)}): harness peak {h['peak'] / 1e9:.1f} GFLOP/s "
            f"({', '.join(f'{k} {v / 1e9:.1f}' for k, v in h['candidates'].items())}); plain: {loops}",
            flush=True,
        )
    print("\nratio of medians over rounds, harness / plain loop (spread: the per-round ratios' range)")
    for lib in libraries:
        hs = [g["harness"]["candidates"].get(lib) for g in rounds]
        ps = [g[lib]["best"] for g in rounds]
        pairs = [(h, q) for h, q in zip(hs, ps, strict=True) if h]
        if not pairs:
            print(f"  {lib}: the harness has no figure")
            continue
        hm, pm = statistics.median(h for h, _ in pairs), statistics.median(q for _, q in pairs)
        print(
            f"  {lib}: harness {hm / 1e9:.1f} / plain {pm / 1e9:.1f} GFLOP/s = {hm / pm:.3f} "
            f"(per round {_spread([h / q for h, q in pairs])})"
        )
    peak_h = [g["harness"]["peak"] for g in rounds]
    peak_p = [max(g[lib]["best"] for lib in libraries) for g in rounds]
    ratio = statistics.median(peak_h) / statistics.median(peak_p)
    print(
        f"  peak (the best library): harness {statistics.median(peak_h) / 1e9:.1f} / plain "
        f"{statistics.median(peak_p) / 1e9:.1f} GFLOP/s = {ratio:.3f} (per round "
        f"{_spread([h / q for h, q in zip(peak_h, peak_p, strict=True)])}); within 10%: {abs(ratio - 1) <= 0.10}"
    )
    seconds = [g["harness"].get("s") for g in rounds if g["harness"].get("s") is not None]
    if seconds:
        print(
            f"  the harness's CPU measurement took {statistics.median(seconds):.2f} s (median; {_spread(seconds)})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
