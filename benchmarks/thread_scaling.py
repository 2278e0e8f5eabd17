"""How the work the plan prices by the compute figure scales with threads, beside how the speed probe's convolution
does: the figure the plan's prices need where a run's thread budget differs from the reference run's (a CPU quota,
--threads).

    .venv/bin/python benchmarks/thread_scaling.py [--threads 1,2] [--rounds 7] [--runs 8] [--suite-pairs 2] [-o FILE]

The speed probe (harness.measure.machine_speed: conv2d 1x128x80x80, six in a row) parallelizes almost perfectly.
Priced by it alone, a 1-thread run whose prices came from 2-thread runs reads its compute-priced parts ~2x slower,
while in a half-CPU quota on a 2-core AMD EPYC they took 0.6x of that estimate
(docs/journal/2026-11-29-main-job-in-a-cpu-quota.md). Two measurements, each interleaved over the thread counts:

- in this process, per round and thread count, a block of `--runs` calls of the probe's convolution and of yolo26n
  640 fp32 inference (the harness's detect stand-in, exported here by the harness's own backends: ONNX Runtime,
  OpenVINO, PyTorch eager); a speedup at n threads is the median over rounds of (1-thread block median / n-thread
  block median), its spread the rounds' range; `inference_speedup` is the backends' geometric mean;
- the suite itself (`SUITE`, a results and export cache of its own, one run first to fill the cache), `--suite-pairs`
  runs at each --threads, interleaved: the seconds of its workloads' stages (timeline.json workload_s: end to end,
  parity, accuracy, operators, the record), which are what the plan prices by the compute figure;
  `workload_speedup` is their speedup (median of the pairs' ratios).

Run it on an idle machine (about 9 minutes on 2 cores). Its JSON is what scripts/plan_prices.py --thread-scaling
FILE writes into harness/plan/prices.yaml (`thread_scaling`), read by harness.plan.thread_scaling.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BACKENDS = ("onnxruntime", "openvino", "torch-eager")


def block_ms(fn, runs: int) -> float:
    """The median milliseconds of `runs` calls of `fn`."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


#: the suite run whose workloads' stages are timed at each thread count (no scenarios: LoadGen's are wall-clock)
SUITE = ("suites/", "--benchmark-only", "--sizes", "n", "--shapes", "320,640", "--backends",
         ",".join(BACKENDS), "--scenarios", "none", "--time-budget", "none")  # fmt: skip


def suite_stages(counts: list[int], pairs: int, tmp: Path) -> dict[str, list[float]]:
    """The seconds of the suite's workloads' stages (the sum of timeline.json's workload_s) of SUITE at each thread
    count, `pairs` runs each, interleaved (1 2 1 2 ...), after one run that fills the export cache."""
    import subprocess

    results, cache = tmp / "results", tmp / "cache"
    out: dict[str, list[float]] = {str(t): [] for t in counts}

    def run(t: int, run_id: str) -> float:
        cmd = [sys.executable, "-m", "pytest", *SUITE, "--threads", str(t), "--results-dir", str(results),
               "--cache-dir", str(cache), "--run-id", run_id, "-q", "-p", "no:cacheprovider"]  # fmt: skip
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        timeline = results / run_id / "timeline.json"
        if not timeline.is_file():
            raise SystemExit(
                f"ERROR: {' '.join(cmd)} wrote no timeline (exit {done.returncode}):\n{done.stdout[-2000:]}"
            )
        return sum(json.loads(timeline.read_text())["workload_s"].values())

    run(counts[-1], "warm")
    for i in range(pairs):
        for t in counts:
            out[str(t)].append(round(run(t, f"t{t}-{i}"), 2))
            print(
                f"suite at {t} thread(s), run {i + 1}: stages {out[str(t)][-1]} s",
                file=sys.stderr,
                flush=True,
            )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", default="1,2", help="thread counts, comma-separated, 1 first (default 1,2)")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved rounds (default 7)")
    ap.add_argument("--runs", type=int, default=8, help="calls per block (default 8)")
    ap.add_argument(
        "--suite-pairs", type=int, default=2, help="suite runs per thread count (default 2; 0: none)"
    )
    ap.add_argument("-o", "--output", type=Path, help="write the JSON here too")
    a = ap.parse_args(argv)
    counts = [int(t) for t in a.threads.split(",")]
    if counts[0] != 1 or len(counts) < 2 or any(t < 1 for t in counts):
        ap.error("--threads: 1 first, then at least one more count")

    import numpy as np

    from harness import threads
    from harness.backends import get
    from harness.backends.base import ExportRequest, ExportResult
    from harness.core import envinfo
    from harness.core.axes import Shape
    from harness.core.cell import Cell
    from harness.measure.machine_speed import compute_work
    from harness.yolo.models import standin_weights

    weights = standin_weights("n", "detect")
    if weights is None:
        print("ERROR: no yolo26n detect stand-in weights (weights/standin/yolo26n-detect.pt)")
        return 2
    x = np.random.default_rng(0).random((1, 3, 640, 640), dtype=np.float32)
    work: dict[str, dict[int, object]] = {"probe": {}}
    restore = []
    for t in counts:
        fn, _, undo = compute_work(t)
        restore.append(undo)
        work["probe"][t] = fn
    tmp = Path(tempfile.mkdtemp(prefix="thread-scaling-"))
    for name in BACKENDS:
        backend = get(name)
        cell = Cell("n", "detect", "e2e", name, "cpu", Shape(640, 640), 1, "fp32")
        req = ExportRequest.for_cell(cell, str(weights), str(tmp / name), {})
        result = backend.export(req) if backend.exports else ExportResult(str(weights))
        work[name] = {}
        for t in counts:
            threads.set_budget(t)  # the runner takes the budget as its pool (intra-op threads, torch's)
            runner = backend.load(Path(result.artifact), cell, result.info)
            prepared = runner.prepare(x)
            work[name][t] = (runner, prepared, t)

    def call(name: str, t: int):
        if name == "probe":
            threads.apply_torch(t)
            return work["probe"][t]
        runner, prepared, n = work[name][t]
        if name == "torch-eager":
            threads.apply_torch(n)
        return lambda: (runner.run(prepared), runner.synchronize())

    for name in work:  # warm-up
        for t in counts:
            block_ms(call(name, t), 2)
    per_round: dict[str, dict[int, list[float]]] = {n: {t: [] for t in counts} for n in work}
    for _ in range(a.rounds):
        for t in counts:  # A B A B: every thread count in every round
            for name in work:
                per_round[name][t].append(block_ms(call(name, t), a.runs))
    for undo in restore:
        undo()

    def speedup(name: str, t: int) -> dict:
        ratios = [one / n for one, n in zip(per_round[name][1], per_round[name][t], strict=True)]
        return {
            "median": round(statistics.median(ratios), 3),
            "range": [round(min(ratios), 3), round(max(ratios), 3)],
        }

    out = {
        "what": "speedup at n threads over 1 thread: median over interleaved rounds of the rounds' block medians",
        "measured_by": "benchmarks/thread_scaling.py",
        "cpu_model": envinfo.cpu_model(),
        "threads": counts,
        "rounds": a.rounds,
        "runs_per_block": a.runs,
        "ms": {n: {str(t): round(statistics.median(v), 3) for t, v in per_round[n].items()} for n in work},
        "speedup": {n: {str(t): speedup(n, t) for t in counts[1:]} for n in work},
    }
    out["probe_speedup"] = {str(t): out["speedup"]["probe"][str(t)]["median"] for t in counts[1:]}
    out["inference_speedup"] = {
        str(t): round(
            math.exp(statistics.fmean(math.log(out["speedup"][n][str(t)]["median"]) for n in BACKENDS)), 3
        )
        for t in counts[1:]
    }
    if a.suite_pairs:
        stages = suite_stages(counts, a.suite_pairs, tmp)
        out["stages_s"] = stages
        ratios = {
            str(t): [one / n for one, n in zip(stages["1"], stages[str(t)], strict=True)] for t in counts[1:]
        }
        out["speedup"]["stages"] = {
            t: {"median": round(statistics.median(r), 3), "range": [round(min(r), 3), round(max(r), 3)]}
            for t, r in ratios.items()
        }
        out["workload_speedup"] = {t: out["speedup"]["stages"][t]["median"] for t in ratios}
        out["workload"] = (
            "the stages of the suite's workloads (timeline.json workload_s: end to end, parity, accuracy, "
            f"operators, the record) of `{' '.join(SUITE)}` at each --threads, runs interleaved"
        )
    text = json.dumps(out, indent=1)
    print(text)
    if a.output:
        a.output.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
