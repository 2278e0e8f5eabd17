"""Harness timing overhead: the harness's p50 for a cell against a bare loop over the same loaded runtime.

    .venv/bin/python benchmarks/overhead.py [--size n] [--shape 640] [--rounds 200] [--repeats 3] [--threads N]

For onnxruntime and openvino (CPU), in one process and alternating, it runs the cell through the harness
(CellRunner: isolated export or cache hit, load, warm-up, timed rounds with the harness's timed call), then times a
bare loop calling the very session / compiled model the harness loaded (`session.run`, `request.infer`), with the
same input and round count. Both run under the same thread budget (`--threads`, default the physical cores), which
the harness gives the runtime at load; the threads the runtime reports are printed. Prints both p50s and the ratio;
exits 1 when the median ratio is off by more than 3%.

    .venv/bin/python benchmarks/overhead.py --device cuda [--size n] [--shape 640] [--precision fp32] [--repeats 3]

CUDA mode (issue 36): the harness's p50 for the CUDA-graph cell (`torch-eager-cudagraph`) over a plain capture loop
of the same fused model, on the same machine, in the same process. Each repeat runs the cell through the harness
(its record's host p50 and CUDA-event device p50), then captures the very model the harness loaded (ultralytics'
export preparation, fused, in the cell's dtype, TF32 as the harness set it) in a `torch.cuda.CUDAGraph` of its own
and times it with CUDA events: "plain" replays only; "plain+copy" first copies the prepared input into the static
input, as the harness's timed call does (harness.backends.cudagraph: `run` copies the prepared input into the
graph's static input, one device-to-device copy, then replays). Besides, the harness runner's own call and the
plain replay are timed in interleaved blocks (A B B A ...) at the same moment. Once at the end, a plain loop
captured with `cudnn.benchmark` on shows what that switch (off in the harness, torch's default) would change.
Prints the figures and the ratio harness p50 / plain+copy p50 (host and device); exits 1 when the median device
ratio is above --limit-cuda (default 1.02), 3 with the reason when there is no CUDA device.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
import time
from pathlib import Path

from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.execute.runner import CellRunner, RunConfig
from harness.threads import physical_cores, set_budget
from harness.yolo.inputs import letterboxed


def bare_loop(fn, rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - t0) / 1e6)
    return statistics.median(samples)


def bare_call(backend: str, runner, x):
    if backend == "onnxruntime":
        feed = {runner.input_name: x}
        return lambda: runner.session.run(None, feed)
    request = runner.request
    return lambda: request.infer(x, share_inputs=True, share_outputs=False)


def cuda_timed(fn, rounds: int) -> tuple[list[float], list[float]]:
    """(host ms, device ms) of `rounds` calls of `fn`, each bracketed by CUDA events on the current stream and
    followed by a device synchronize (as the harness's timed call: run, then synchronize)."""
    import torch

    host, events = [], []
    for _ in range(rounds):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter_ns()
        e0.record()
        fn()
        e1.record()
        torch.cuda.synchronize()
        host.append((time.perf_counter_ns() - t0) / 1e6)
        events.append((e0, e1))
    return host, [float(a.elapsed_time(b)) for a, b in events]


def plain_graph(model, prepared, warmup: int = 3):
    """`model` captured in a CUDA graph of its own on a static copy of `prepared`: (graph, static input)."""
    import torch

    static = prepared.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            model(static)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        model(static)
    torch.cuda.synchronize()
    return graph, static


def cuda_mode(a) -> int:
    import torch

    if not torch.cuda.is_available():
        print(
            f"no CUDA device here (torch {torch.__version__}, cuda build {torch.version.cuda}): no CUDA mode"
        )
        return 3
    from harness.backends._shared.torch_runtime import tf32_switches

    shape = Shape.parse(a.shape)
    out = Path(tempfile.mkdtemp(prefix="overhead-cuda-"))
    cell = Cell(a.size, "detect", "e2e", "torch-eager-cudagraph", "cuda", shape, 1, a.precision)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {cell.id}")
    cols = (
        "repeat",
        "harness",
        "h dev",
        "plain",
        "p dev",
        "+copy",
        "+c dev",
        "ratio",
        "dev ratio",
        "call/plain",
    )
    print(" ".join(f"{c:>10}" for c in cols))
    host_ratios, dev_ratios, runner, prepared = [], [], None, None
    t_start = time.perf_counter()
    for i in range(a.repeats):
        cfg = RunConfig(
            run_id=f"cuda-{i}",
            results_dir=out,
            cache_dir=Path(a.cache_dir),
            rounds=a.rounds,
            warmup=5,
            episodes=1,
            e2e=False,
            accuracy=False,
            scenarios="none",
            memory_rounds=0,
            isolate_first_run=False,
            canary=False,
        )
        cr = CellRunner(cfg, progress=lambda m: None)
        rec = cr.run_cell(cell)
        if rec.status != "ok" or rec.latency_ms is None:
            print(f"harness cell: {rec.status}: {rec.reason}")
            return 1
        runner = cr.last_runner
        model = runner.inner.model  # the harness's loaded, fused model in the cell's dtype
        prepared = runner.prepare(letterboxed(shape.height, shape.width, 1))
        graph, static = plain_graph(model, prepared)

        def copy_replay(graph=graph, static=static, prepared=prepared):
            static.copy_(prepared)
            graph.replay()

        plain_h, plain_d = cuda_timed(graph.replay, a.rounds)
        copy_h, copy_d = cuda_timed(copy_replay, a.rounds)
        # the harness runner's own call and the plain replay in interleaved blocks, A B B A ...
        call_h: list[float] = []
        bare_h: list[float] = []
        for k in range(10):
            pair = [(call_h, functools.partial(runner.run, prepared)), (bare_h, graph.replay)]
            for dest, fn in pair if k % 2 == 0 else pair[::-1]:
                dest.extend(cuda_timed(fn, max(1, a.rounds // 10))[1])
        h = rec.latency_ms.p50
        hd = rec.device_latency_ms.p50 if rec.device_latency_ms is not None else float("nan")
        med = statistics.median
        ratio, dev_ratio = h / med(copy_h), hd / med(copy_d)
        host_ratios.append(ratio)
        dev_ratios.append(dev_ratio)
        row = (h, hd, med(plain_h), med(plain_d), med(copy_h), med(copy_d), ratio, dev_ratio)
        print(f"{i:>10} " + " ".join(f"{v:>10.3f}" for v in row) + f" {med(call_h) / med(bare_h):>10.3f}")
        del graph, static
    assert runner is not None and prepared is not None
    before = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = True
    try:
        graph, _static = plain_graph(
            runner.inner.model, prepared
        )  # the static input lives as long as the graph
        bench_h, bench_d = cuda_timed(graph.replay, a.rounds)
    finally:
        torch.backends.cudnn.benchmark = before
    print(f"settings: {tf32_switches()}, cudnn.benchmark {before} (harness and plain loops alike)")
    print(
        f"plain loop captured with cudnn.benchmark on: host p50 {statistics.median(bench_h):.3f} ms, "
        f"device p50 {statistics.median(bench_d):.3f} ms (informative)"
    )
    dev, host = statistics.median(dev_ratios), statistics.median(host_ratios)
    print(
        f"median harness/plain+copy: host {host:.3f}, device {dev:.3f} (limit {a.limit_cuda:g}); "
        f"{time.perf_counter() - t_start:.0f} s"
    )
    return 0 if dev <= a.limit_cuda else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--size", default="n")
    ap.add_argument("--shape", default="640")
    ap.add_argument("--precision", default="fp32", choices=("fp32", "fp16"), help="CUDA mode only")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cache-dir", default=".cache/yolo26-bench")
    ap.add_argument("--limit", type=float, default=0.03)
    ap.add_argument("--limit-cuda", type=float, default=1.02)
    ap.add_argument(
        "--threads", type=int, default=physical_cores(), help="CPU thread budget (default: cores)"
    )
    a = ap.parse_args(argv)
    if a.device == "cuda":
        return cuda_mode(a)
    set_budget(a.threads)
    shape = Shape.parse(a.shape)
    out = Path(tempfile.mkdtemp(prefix="overhead-"))
    worst = 0.0
    print(f"thread budget {a.threads}")
    print(f"{'backend':<12} {'repeat':>6} {'threads':>7} {'harness p50':>12} {'bare p50':>10} {'ratio':>7}")
    for backend in ("onnxruntime", "openvino"):
        ratios = []
        for i in range(a.repeats):
            cfg = RunConfig(
                run_id=f"{backend}-{i}",
                results_dir=out,
                cache_dir=Path(a.cache_dir),
                rounds=a.rounds,
                warmup=5,
                threads=a.threads,
            )
            cr = CellRunner(cfg, progress=lambda m: None)
            rec = cr.run_cell(Cell(a.size, "detect", "e2e", backend, "cpu", shape))
            if rec.status != "ok":
                print(f"{backend}: {rec.status}: {rec.reason}")
                return 1
            x = cr.last_runner.prepare(letterboxed(shape.height, shape.width, 1))
            if backend == "onnxruntime":
                x = x[cr.last_runner.input_name]
            fn = bare_call(backend, cr.last_runner, x)
            for _ in range(5):
                fn()
            bare = bare_loop(fn, a.rounds)
            assert rec.latency_ms is not None  # an ok cell was timed
            h = rec.latency_ms.p50
            ratios.append(h / bare)
            print(f"{backend:<12} {i:>6} {rec.threads!s:>7} {h:>12.3f} {bare:>10.3f} {h / bare:>7.3f}")
        med = statistics.median(ratios)
        worst = max(worst, abs(med - 1))
        print(f"{backend:<12} median ratio harness/bare = {med:.3f}")
    print(f"worst |ratio - 1| = {worst:.3%} (limit {a.limit:.0%})")
    return 0 if worst <= a.limit else 1


if __name__ == "__main__":
    sys.exit(main())
