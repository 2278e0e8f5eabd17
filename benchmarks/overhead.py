"""Harness timing overhead: the harness's p50 for a cell against a bare loop over the same loaded runtime.

    .venv/bin/python benchmarks/overhead.py [--size n] [--shape 640] [--rounds 200] [--repeats 3] [--threads N]

For onnxruntime and openvino (CPU), in one process and alternating, it runs the cell through the harness
(CellRunner: isolated export or cache hit, load, warm-up, timed rounds with the harness's timed call), then times a
bare loop calling the very session / compiled model the harness loaded (`session.run`, `request.infer`), with the
same input and round count. Both run under the same thread budget (`--threads`, default the physical cores), which
the harness gives the runtime at load; the threads the runtime reports are printed. Prints both p50s and the ratio;
exits 1 when the median ratio is off by more than 3%.
"""

from __future__ import annotations

import argparse
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="n")
    ap.add_argument("--shape", default="640")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cache-dir", default=".cache/yolo26-bench")
    ap.add_argument("--limit", type=float, default=0.03)
    ap.add_argument(
        "--threads", type=int, default=physical_cores(), help="CPU thread budget (default: cores)"
    )
    a = ap.parse_args(argv)
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
