"""Check the harness's GPU measurements on a machine with an NVIDIA GPU (see docs/gpu.md).

    python benchmarks/gpu_check.py [--sizes n,s] [--shape 640] [--out DIR]

Two parts:

1. Self-check (needs only torch with CUDA and nvidia-ml-py): the CUDA context size; NVML's view of this process
   against torch's allocator on a known allocation; CUDA-event device time against host time; a CUDA-graph
   replay against eager; the energy counter.
2. Cells (needs the harness's model stack too: ultralytics, opencv, psutil): yolo26{n,s} through CellRunner for
   torch-eager cuda fp32/fp16, torch-compile cuda, aoti cuda, tensorrt fp32/fp16, onnxruntime cuda and
   onnxruntime-trt where installed; ExecuTorch CUDA full and backbone-only as isolated exports (its PyPI runtime
   cannot run them). Each cell is sampled with NVML at 200 Hz beside torch's allocator statistics.

Checks (a violated one makes the exit status 1):
- NVML's peak for this process >= torch's max reserved (everything torch reserves is in the process's memory);
- for backends whose device memory is torch's caching allocator (torch-eager, torch-compile, aoti): NVML's process
  peak <= torch max reserved + the CUDA context + 1 GiB (cuDNN/cuBLAS workspaces and loaded kernels);
- parity of every cell that ran; the self-check's invariants.
Exit status: 0 all checks passed; 1 a check was violated; 3 a part could not run here (the reasons are printed).
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

MiB = 2**20
GiB = 2**30
SLACK_BYTES = 1 * GiB
TORCH_ALLOCATOR_BACKENDS = ("torch-eager", "torch-compile", "torch-compile-max-autotune", "aoti")


@dataclass
class Row:
    """One line of the table: a self-check or a cell."""

    name: str
    status: str
    p50_ms: float | None = None
    device_p50_ms: float | None = None
    nvml_process_peak_mb: float | None = None
    torch_max_reserved_mb: float | None = None
    checks: list[str] = field(default_factory=list)  # "ok: ..." or "VIOLATED: ..."
    note: str = ""

    @property
    def violated(self) -> bool:
        return any(c.startswith("VIOLATED") for c in self.checks)


def _fmt(v: float | None, digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def print_table(rows: list[Row]) -> None:
    w = max([len(r.name) for r in rows] + [4])
    print(
        f"\n{'check':<{w}}  {'status':<14} {'p50 ms':>8} {'dev p50':>8} {'nvml MB':>9} {'torch MB':>9}  checks / note"
    )
    for r in rows:
        detail = "; ".join(r.checks + ([r.note] if r.note else []))
        print(
            f"{r.name:<{w}}  {r.status:<14} {_fmt(r.p50_ms):>8} {_fmt(r.device_p50_ms):>8} "
            f"{_fmt(r.nvml_process_peak_mb, 0):>9} {_fmt(r.torch_max_reserved_mb, 0):>9}  {detail}"
        )


def median(xs: list[float]) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


# -- part 1: self-check --------------------------------------------------------------------------------------------
class Gpu:
    """torch's cuda:0, its NVML handle (matched by PCI address) and the CUDA context size."""

    def __init__(self) -> None:
        import torch

        from harness.nvml import nvml_handle_for_torch_device, nvml_module, process_used_bytes

        self.torch = torch
        self.device = torch.device("cuda", 0)
        self.nvml = nvml_module()
        self.handle = nvml_handle_for_torch_device(0)
        self.pid = os.getpid()
        torch.empty(1, device=self.device)  # creates the context
        torch.cuda.synchronize(self.device)
        time.sleep(0.2)
        used = process_used_bytes(self.handle, self.pid, self.nvml)
        self.context_bytes = (
            None if used is None else max(0.0, used - torch.cuda.memory_reserved(self.device))
        )

    def process_bytes(self) -> float | None:
        from harness.nvml import process_used_bytes

        return process_used_bytes(self.handle, self.pid, self.nvml)

    def sampled(self):
        """A started Sampler with the NVML probes (200 Hz), after resetting torch's peak statistics."""
        from harness.memory import Sampler
        from harness.nvml import nvml_probes

        gc.collect()
        self.torch.cuda.empty_cache()
        self.torch.cuda.reset_peak_memory_stats(self.device)
        return Sampler(nvml_probes(self.handle, self.pid), hz=200).start()

    def memory_checks(self, row: Row, sampler, upper_bound: bool) -> None:
        proc = sampler.get("device_process")
        reserved = self.torch.cuda.max_memory_reserved(self.device)
        row.torch_max_reserved_mb = reserved / MiB
        if proc.error or proc.peak is None:
            row.checks.append(f"VIOLATED: NVML gave no process memory ({proc.error or 'process not listed'})")
            return
        row.nvml_process_peak_mb = proc.peak / MiB
        if proc.peak == 0 and reserved > 0:
            row.checks.append(
                "VIOLATED: NVML lists no memory for this pid (a container with its own PID namespace? see docs/gpu.md)"
            )
            return
        ok = proc.peak >= reserved
        row.checks.append(f"{'ok' if ok else 'VIOLATED'}: nvml peak >= torch max reserved")
        if upper_bound:
            limit = reserved + (self.context_bytes or 0) + SLACK_BYTES
            ok = proc.peak <= limit
            row.checks.append(
                f"{'ok' if ok else 'VIOLATED'}: nvml peak <= reserved + context {_fmt((self.context_bytes or 0) / MiB, 0)}"
                f" MB + 1 GiB (limit {limit / MiB:.0f} MB)"
            )


def self_check(gpu: Gpu) -> list[Row]:
    import torch

    from harness.backends.torch_eager import TorchRunner
    from harness.gputiming import CudaGraphRunner, TimedCall, cuda_event_timer
    from harness.nvml import EnergyMeter, NvmlUnavailable

    rows = []
    row = Row("self: cuda context", "ok", note=f"context {_fmt((gpu.context_bytes or 0) / MiB, 0)} MB")
    if gpu.context_bytes is None:
        row.status, row.note = "not measured", "the driver does not report per-process memory"
    rows.append(row)

    # a known allocation: 1 GiB through torch's allocator, held for 0.2 s
    row = Row("self: 1 GiB allocation", "ok")
    s = gpu.sampled()
    block = torch.empty(GiB, dtype=torch.uint8, device=gpu.device)
    block.fill_(1)
    torch.cuda.synchronize(gpu.device)
    time.sleep(0.2)
    del block
    s.stop()
    gpu.memory_checks(row, s, upper_bound=True)
    rows.append(row)

    # CUDA events on a conv net, the call split at the host's wait
    net = (
        torch.nn.Sequential(*[torch.nn.Conv2d(64, 64, 3, padding=1) for _ in range(8)]).to(gpu.device).eval()
    )
    x = torch.randn(8, 64, 128, 128, device=gpu.device)
    with torch.no_grad():
        call = TimedCall(lambda: net(x), lambda: torch.cuda.synchronize(gpu.device))
        for _ in range(3):
            call()
        times = cuda_event_timer(gpu.device)(call, 50)
    row = Row("self: cuda events", "ok", p50_ms=median(times.host_ms), device_p50_ms=median(times.device_ms))
    worst = max(d - h for d, h in zip(times.device_ms, times.host_ms, strict=True))
    ok = all(d > 0 for d in times.device_ms) and worst <= 0.05
    row.checks.append(f"{'ok' if ok else 'VIOLATED'}: 0 < device ms <= host ms (+0.05) in every round")
    rows.append(row)

    # CUDA graph replay matches eager
    row = Row("self: cuda graph", "ok")
    try:
        inner = TorchRunner(net, "cuda", torch.float32)
        g = CudaGraphRunner(inner, gpu.device)
        xin = torch.randn(1, 64, 64, 64).numpy()
        with torch.no_grad():
            prepared = g.prepare(xin)
            out = g.outputs(g.run(prepared))[0]
            ref = inner.outputs(net(torch.from_numpy(xin).to(gpu.device)))[0]
        err = float(abs(out - ref).max())
        row.checks.append(f"{'ok' if err <= 1e-4 else 'VIOLATED'}: replay == eager (max abs {err:.2e})")
        gt = cuda_event_timer(gpu.device)(TimedCall(lambda: g.run(prepared), g.synchronize), 50)
        row.p50_ms, row.device_p50_ms = median(gt.host_ms), median(gt.device_ms)
        g.close()
    except Exception as e:
        row.status = "failed"
        row.checks.append(f"VIOLATED: {type(e).__name__}: {e}")
    rows.append(row)

    # energy over ~1 s of work
    row = Row("self: energy counter", "ok")
    try:
        meter = EnergyMeter(gpu.handle).start()
        n = 0
        t0 = time.perf_counter()
        with torch.no_grad():
            while time.perf_counter() - t0 < 1.0:
                net(x)
                n += 1
        torch.cuda.synchronize(gpu.device)
        meter.stop()
        row.note = f"{meter.delta_mj:.0f} mJ over {meter.window_s:.2f} s, {meter.per_inference_j(n) * 1000:.2f} mJ/call"
        row.checks.append(f"{'ok' if meter.delta_mj > 0 else 'VIOLATED'}: energy delta > 0")
    except NvmlUnavailable as e:
        row.status, row.note = "not supported", str(e)
    rows.append(row)
    return rows


# -- part 2: cells -------------------------------------------------------------------------------------------------
def missing_model_stack() -> list[str]:
    need = {
        "ultralytics": "ultralytics",
        "cv2": "opencv-python-headless",
        "psutil": "psutil",
        "yaml": "pyyaml",
    }
    return [pkg for mod, pkg in need.items() if importlib.util.find_spec(mod) is None]


def cell_plan(sizes: list[str], shape: int) -> list:
    from harness.axes import Shape
    from harness.cell import Cell

    s = Shape(shape, shape)
    plan = []
    for size in sizes:
        for backend, precision in (
            ("torch-eager", "fp32"),
            ("torch-eager", "fp16"),
            ("torch-compile", "fp32"),
            ("aoti", "fp32"),
            ("tensorrt", "fp32"),
            ("tensorrt", "fp16"),
            ("onnxruntime", "fp32"),
            ("onnxruntime-trt", "fp32"),
            ("executorch-cuda", "fp32"),
        ):
            plan.append(Cell(size, "detect", "e2e", backend, "cuda", s, 1, precision))
    return plan


def run_cells(gpu: Gpu, sizes: list[str], shape: int, out: Path, min_time: float) -> list[Row]:
    from harness import backends
    from harness.gputiming import cuda_event_timer
    from harness.runner import CellRunner, RunConfig

    runner = CellRunner(
        RunConfig(
            run_id=f"gpu-check-{time.strftime('%Y%m%dT%H%M%S')}",
            results_dir=out,
            cache_dir=out / "cache",
            min_time_s=min_time,
        ),
        progress=lambda m: print(f"  {m}", flush=True),
    )
    rows = []
    for cell in cell_plan(sizes, shape):
        if cell.backend == "executorch-cuda":
            rows.extend(executorch_cuda_exports(runner, cell))
            continue
        row = Row(cell.id, "?")
        sampler = gpu.sampled()
        try:
            rec = runner.run_cell(cell, timer=cuda_event_timer(gpu.device))
        finally:
            sampler.stop()
        row.status = rec["status"]
        row.note = (rec.get("reason") or "")[:160]
        if rec.get("latency_ms"):
            row.p50_ms = rec["latency_ms"]["p50"]
        if "device_ms" in rec:  # once the runner records RoundTimes.device_ms
            row.device_p50_ms = median(rec["device_ms"])
        if rec["status"] in ("ok", "parity_failed"):
            gpu.memory_checks(row, sampler, upper_bound=cell.backend in TORCH_ALLOCATOR_BACKENDS)
            if rec["status"] == "parity_failed":
                row.checks.append(f"VIOLATED: parity {rec['reason']}")
            if backends.get(cell.backend).exports and rec.get("export_s") is not None:
                row.note = f"export {rec['export_s']:.1f}s " + row.note
        rows.append(row)
    return rows


def executorch_cuda_exports(runner, cell) -> list[Row]:
    """ExecuTorch CUDA full and backbone-only, exported in isolated processes (an export is the finding here)."""
    from harness import backends
    from harness.backends.base import ExportRequest
    from harness.backends.executorch_cuda import REMEDY_BACKBONE_ONLY
    from harness.isolate import run_export

    backend = backends.get(cell.backend)
    reason = backend.unsupported(cell) or backend.probe(cell.device)
    rows = []
    for remedy in (None, REMEDY_BACKBONE_ONLY):
        name = cell.id + (f" [{remedy}]" if remedy else " [full]")
        if reason:
            rows.append(Row(name, "skipped", note=reason))
            continue
        mat = runner.materialize(cell)
        out_dir = runner.config.cache_dir / "gpu-check-exports" / (cell.id + ("-" + remedy if remedy else ""))
        req = ExportRequest(
            backend=cell.backend,
            device=cell.device,
            checkpoint=str(mat.checkpoint),
            size=cell.size,
            task=cell.task,
            head=cell.head,
            height=cell.shape.height,
            width=cell.shape.width,
            dynamic=False,
            batch=cell.batch,
            precision=cell.precision,
            out_dir=str(out_dir),
            options={"remedy": remedy} if remedy else {},
        )
        outcome = run_export(req, runner.config.run_dir / "logs" / f"{cell.id}-{remedy or 'full'}.log", 1800)
        status = "exported" if outcome.status == "ok" else outcome.status
        note = (outcome.message or "").splitlines()[0][:160] if outcome.message else ""
        if outcome.status == "ok":
            note = f"export {outcome.export_s:.1f}s, ops {outcome.info.get('ops')}"
            if backend.export_only:
                note += f"; not run: {backend.export_only_reason}"
        rows.append(Row(name, status, note=note))
    return rows


# -- main ----------------------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="n,s", help="model sizes (default n,s)")
    ap.add_argument("--shape", type=int, default=640, help="square input size (default 640)")
    ap.add_argument(
        "--out",
        type=Path,
        default=Path(os.environ.get("OUT", "results")) / "gpu-check",
        help="results, logs and export cache (default $OUT/gpu-check or results/gpu-check)",
    )
    ap.add_argument(
        "--min-time", type=float, default=1.0, help="seconds of timed rounds per cell (default 1)"
    )
    ap.add_argument("--self-check-only", action="store_true", help="skip the model cells")
    args = ap.parse_args(argv)

    not_run: list[str] = []
    try:
        import torch
    except ImportError as e:
        print(f"gpu_check: cannot run: torch is not installed ({e})")
        return 3
    from harness.nvml import NvmlUnavailable, gpu_env

    print(f"torch {torch.__version__} (CUDA {torch.version.cuda}), python {sys.version.split()[0]}")
    env = gpu_env()
    print("gpu:", json.dumps(env, default=str))
    if not torch.cuda.is_available():
        print(f"gpu_check: cannot run: no CUDA device visible to torch {torch.__version__} ({env['reason']})")
        return 3
    try:
        gpu = Gpu()
    except NvmlUnavailable as e:
        print(f"gpu_check: cannot run the memory checks: {e}")
        return 3

    rows = self_check(gpu)
    if not args.self_check_only:
        missing = missing_model_stack()
        if missing:
            not_run.append(f"model cells: missing {', '.join(missing)} (carry them as wheels: docs/gpu.md)")
        else:
            try:
                rows += run_cells(
                    gpu, [s for s in args.sizes.split(",") if s], args.shape, args.out, args.min_time
                )
            except Exception as e:  # report what ran; the traceback says where it stopped
                traceback.print_exc()
                not_run.append(f"model cells stopped: {type(e).__name__}: {e}")

    print_table(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu_check.json").write_text(
        json.dumps({"env": env, "rows": [asdict(r) for r in rows], "not_run": not_run}, indent=2, default=str)
    )
    violated = [r.name for r in rows if r.violated]
    for line in not_run:
        print(f"NOT RUN: {line}")
    if violated:
        print(f"VIOLATED: {', '.join(violated)}")
        return 1
    return 3 if not_run else 0


if __name__ == "__main__":
    sys.exit(main())
