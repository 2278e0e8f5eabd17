"""Report size and render time for a 200-cell, two-machine report: `python benchmarks/report_bench.py`.

Writes two synthetic runs of 100 cells each (every status, remedies, dynamic sweeps, long tracebacks) shaped like
the runner's records, renders them side by side and prints the figures. Exits 1 when the first render (in a fresh
process, imports included) uses 5 s of CPU or more, or index.html reaches 2 MB. The limit is on CPU time because
the benchmark machines are shared: wall time is printed too, and equals CPU time on an idle machine.
The numbers inside the synthetic records are made up for this benchmark only.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

from harness import SCHEMA_VERSION
from harness.core.axes import GFLOPS_640, Shape
from harness.core.cell import Cell
from harness.core.record import CellRecord, Energy, Memory, new_record, set_null
from harness.core.results_dir import RecordWriter, write_env
from harness.measure.stats import latency_from_samples

LIMIT_S = 5.0
LIMIT_BYTES = 2 * 1024 * 1024
TRACEBACK = "".join(
    f'  File "/venv/lib/python3.11/site-packages/torch/_inductor/lowering.py", line {400 + i}, in <lambda>\n'
    f"    return make_fallback(op, layout_constraint=<function {i}>)\n"
    for i in range(40)
)


def _record(run_id: str, cell: Cell, rng: random.Random, status: str, device_gpu: bool) -> CellRecord:
    rec = new_record(run_id, cell, "random-init:0")
    rec.status = status
    rec.started_at = "2026-11-20T10:00:00+00:00"
    rec.duration_s = 3.0
    rec.log = f"logs/{cell.id}.log"
    if status in ("ok", "parity_failed"):
        base = (
            GFLOPS_640[cell.size]
            * (cell.shape.height * cell.shape.width)
            / 640**2
            * (0.4 if device_gpu else 9)
        )
        samples = [base * (1 + abs(rng.gauss(0, 0.04))) for _ in range(50)]
        lat = latency_from_samples(samples, "model only")
        rec.latency_ms = lat
        rec.samples_ms = samples
        rec.throughput_ips = 1000 / lat.p50
        rec.first_run_ms = lat.p50 * 3
        rec.export_s = rng.uniform(2, 60)
        rec.load_s = rng.uniform(0.1, 2)
        rec.precision_executed = cell.precision
        rec.precision_source = "synthetic"
        rec.threads = 16
        rec.threads_requested = 16
        rec.memory = Memory(
            host_peak_rss_mib=rng.uniform(500, 3000),
            host_peak_delta_mib=rng.uniform(50, 900),
            device_peak_used_mib=rng.uniform(400, 4000) if device_gpu else None,
            device_peak_process_mib=rng.uniform(100, 3000) if device_gpu else None,
            source="psutil RSS at 100 Hz" + ("; NVML at 100 Hz" if device_gpu else ""),
        )
        rec.energy = Energy(
            per_inference_j=rng.uniform(0.1, 3) if device_gpu else None,
            window_s=2.0 if device_gpu else None,
            inferences=50 if device_gpu else None,
            source="NVML total energy counter" if device_gpu else "",
        )
        set_null(rec, "memory.torch_max_allocated_mib", "torch CUDA allocator not used by this cell")
    elif status == "skipped":
        rec.reason = "excluded: not selected on this machine (matrix.yaml)"
    elif status == "exported":
        rec.export_s = rng.uniform(20, 90)
        rec.artifact_bytes = int(rng.uniform(9e6, 2e8))
        rec.ops = {"delegated": 660, "fallback": 2, "fallback_ops": ["aten.topk.default"]}
    else:
        rec.failure = {
            "class": rng.choice(["unsupported_op", "guard_violation", "compile_error"]),
            "stage": "export",
            "message": "Traceback (most recent call last):\n"
            + TRACEBACK
            + "LoweringException: <aten.index_put.default> not implemented",
            "ops": ["aten.index_put.default", "aten.topk.default"],
            "guards": [],
            "suggested_fix": None,
            "exception_type": "torch._inductor.exc.LoweringException",
            "log": rec.log,
        }
        rec.reason = "LoweringException"
    return rec


def write_run(root: Path, run_id: str, gpu: bool, n_cells: int, rng: random.Random) -> Path:
    run_dir = root / run_id
    (run_dir / "logs").mkdir(parents=True)
    writer = RecordWriter(run_dir)
    backends = (
        [
            ("torch-eager", "cuda"),
            ("tensorrt", "cuda"),
            ("onnxruntime", "cuda"),
            ("executorch-cuda", "cuda"),
            ("torch-compile", "cuda"),
        ]
        if gpu
        else [
            ("torch-eager", "cpu"),
            ("onnxruntime", "cpu"),
            ("openvino", "cpu"),
            ("executorch-xnnpack", "cpu"),
            ("executorch-vulkan", "vulkan"),
        ]
    )
    shapes = ["320", "480", "640", "960"]
    written = 0
    for size in "nsmlx":
        for shape in shapes:
            for backend, device in backends:
                if written >= n_cells:
                    break
                cell = Cell(size, "detect", "e2e", backend, device, Shape.parse(shape))
                roll = rng.random()
                status = (
                    "exported"
                    if backend == "executorch-vulkan"
                    else "export_failed"
                    if backend == "executorch-cuda"
                    else "skipped"
                    if roll < 0.08
                    else "parity_failed"
                    if roll < 0.1
                    else "ok"
                )
                rec = _record(run_id, cell, rng, status, gpu)
                (run_dir / str(rec.log)).write_text(TRACEBACK)
                writer.write(rec)
                written += 1
                if status == "export_failed" and written < n_cells:
                    remedy = _record(run_id, cell, rng, "ok", gpu)
                    remedy.cell_id = cell.id + "-remedy-backbone-only"
                    remedy.remedy = "backbone-only"
                    remedy.remedy_of = cell.id
                    writer.write(remedy)
                    written += 1
    env = {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "started_at": "2026-11-20T10:00:00+00:00",
        "git_commit": "0" * 40,
        "host": {"hostname": f"bench-{run_id}", "cpu_model": "Synthetic CPU", "cpu_cores_logical": 16},
        "gpu": [{"name": "NVIDIA H100 80GB HBM3", "driver": "570.86.15"}] if gpu else [],
        "libraries": {"torch": "2.13.0"},
        "threads": {"budget": 16, "physical_cores": 16, "source": "physical cores (default)"},
    }
    write_env(run_dir, env)
    return run_dir


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cells", type=int, default=200, help="cells in all (split over two machines)")
    args = p.parse_args(argv)
    rng = random.Random(26)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        runs = [
            write_run(root / "results", "bench-cpu", False, args.cells // 2, rng),
            write_run(root / "results", "bench-gpu", True, args.cells - args.cells // 2, rng),
        ]
        records = sum(len((r / "cells.jsonl").read_text().splitlines()) for r in runs)
        t0, c0 = time.perf_counter(), time.process_time()
        from harness.report import render_report

        index = render_report(runs, root / "reports")
        cold, cold_cpu = time.perf_counter() - t0, time.process_time() - c0
        t0, c0 = time.perf_counter(), time.process_time()
        render_report(runs, root / "reports")
        warm, warm_cpu = time.perf_counter() - t0, time.process_time() - c0
        size = index.stat().st_size
        svg = index.read_text().count("<svg")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"records: {records} in 2 runs; {os.cpu_count()} CPUs, load average {load:.1f}")
    print(
        f"render (first, including imports): CPU {cold_cpu:.2f} s, wall {cold:.2f} s   limit {LIMIT_S:.0f} s CPU"
    )
    print(f"render (second, warm):             CPU {warm_cpu:.2f} s, wall {warm:.2f} s")
    print(f"index.html: {size / 1024:.0f} KiB   limit {LIMIT_BYTES // 1024} KiB   ({svg} inline SVGs)")
    over = cold_cpu >= LIMIT_S or size >= LIMIT_BYTES
    if over:
        print("OVER THE LIMITS", file=sys.stderr)
    return 1 if over else 0


if __name__ == "__main__":
    raise SystemExit(main())
