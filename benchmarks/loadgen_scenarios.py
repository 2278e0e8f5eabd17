"""What the LoadGen scenarios cost and give on one cell: yolo26n detect at 640 (batch 1) on a CPU backend, the
scenario stage alone (harness.scenarios.run_all, as a run's `scenarios` stage calls it).

    .venv/bin/python benchmarks/loadgen_scenarios.py [--backend onnxruntime] [--durations short] [--threads 2]

Exports through the harness's cache (default .cache/yolo26-bench), loads the runner, times 10 end-to-end pairs for
the single-stream p50 a run would pass, then runs every scenario and prints the stage's wall time, the load average
before and after (the machine's other work), and each scenario's value, LoadGen verdict and reason. LoadGen's logs
stay under results/benchmarks/loadgen-<time>/loadgen/.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="onnxruntime")
    ap.add_argument("--durations", default="short")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cache-dir", default=str(ROOT / ".cache" / "yolo26-bench"))
    args = ap.parse_args()

    from harness import backends
    from harness.core.axes import Shape
    from harness.core.cell import Cell
    from harness.execute.runner import CellRunner, RunConfig
    from harness.measure.pipeline import E2ETiming, for_runner
    from harness.scenarios import ScenarioConfig, run_all
    from harness.scenarios.settings import durations

    cfg = RunConfig(
        run_id=f"loadgen-{int(time.time())}",
        results_dir=ROOT / "results" / "benchmarks",
        cache_dir=Path(args.cache_dir),
        canary=False,
        threads=args.threads,
    )
    svc = CellRunner(cfg, progress=print)
    cell = Cell("n", "detect", "e2e", args.backend, "cpu", Shape(640, 640))
    be = backends.get(args.backend)
    mat = svc.materialize(cell)
    if be.exports:
        o = svc.export(be, cell, mat, cfg.run_dir / "export.log", {})
        runner = be.load(Path(o.artifact), cell, o.info)
    else:
        runner = be.load(mat.checkpoint, cell, {})
    timing = E2ETiming(for_runner(runner, cell))
    for _ in range(10):
        timing.pair()
    p50 = statistics.median(timing.walls)
    sc = ScenarioConfig(threads=args.threads, seed=0, durations=durations(args.durations))
    print(f"load average before {os.getloadavg()}, end-to-end p50 {p50:.1f} ms")
    t0 = time.perf_counter()
    res = run_all(runner, cell, sc, cfg.run_dir / "loadgen" / cell.id, cfg.run_dir, p50)
    print(f"scenario stage {time.perf_counter() - t0:.1f} s, load average after {os.getloadavg()}")
    for name, r in res.items():
        print(f"{name}: {r.get('value')} {r.get('unit')} valid={r.get('valid')} {r.get('reason') or ''}")
        if name == "server":
            print("  tried:", [(t["rate"], t["ok"], t["target_ms"]) for t in r.get("tried") or []])
        if name == "offline":
            print("  sweep:", [(x["concurrency"], x["ips"], x["ips_interval"]) for x in r.get("sweep") or []])
    runner.close()


if __name__ == "__main__":
    main()
