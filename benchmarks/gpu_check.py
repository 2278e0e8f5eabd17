"""Check the harness's GPU measurements on a machine with an NVIDIA GPU (see docs/gpu.md).

    python benchmarks/gpu_check.py [--sizes n,s] [--shape 640] [--out DIR] [--scenarios none] [--no-accuracy]

Two parts:

1. Self-check (needs only torch with CUDA and nvidia-ml-py): the CUDA context size; NVML's view of this process
   against torch's allocator on a known 1 GiB allocation, both with an independent NVML sampler and through the
   GPU memory tracker the attempt uses; CUDA-event device time (the CUDA-event tracker) against host time, split at
   the wait and synced; a CUDA-graph replay against eager; the energy tracker over ~1 s of work.
2. Cells (needs the harness's model stack too: ultralytics, opencv, psutil): yolo26{n,s} through CellRunner for
   torch-eager cuda fp32/fp16, torch-compile cuda, aoti cuda, tensorrt fp32/fp16, onnxruntime cuda and
   onnxruntime-trt where installed; ExecuTorch CUDA full and backbone-only as isolated exports (its PyPI runtime
   cannot run them). Each cell is sampled with NVML at 200 Hz beside torch's allocator statistics, independently
   of the trackers that fill its record.

Checks (a violated one makes the exit status 1):
- NVML's peak for this process >= torch's max reserved (everything torch reserves is in the process's memory);
- for backends whose device memory is torch's caching allocator (torch-eager, torch-compile, aoti): NVML's process
  peak <= torch max reserved + the CUDA context + 1 GiB (cuDNN/cuBLAS workspaces and loaded kernels);
- the record's GPU figures (device_latency_ms, memory.device_context_mib, device_peak_process_mib,
  device_outside_torch_mib, torch_* for allocator backends, energy, gpu_snapshot) are present; device p50 <= host
  p50; the record's memory keeps torch_max_allocated <= torch_max_reserved <= device_peak_process (+ 2 MiB), its
  figures measured in the probe's fresh process (harness.measure.gpu_memory_fresh);
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
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.core.record import CellRecord

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

        from harness.measure.nvml import nvml_handle_for_torch_device, nvml_module, process_used_bytes

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
        from harness.measure.nvml import process_used_bytes

        return process_used_bytes(self.handle, self.pid, self.nvml)

    def sampled(self):
        """A started Sampler with the NVML probes (200 Hz), after resetting torch's peak statistics."""
        from harness.measure.host_memory import Sampler
        from harness.measure.nvml import nvml_probes

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


def event_times(call, rounds: int, torch_stream: bool = True) -> tuple[list[float], CellRecord]:
    """`rounds` of `call` (a TimedCall) timed the way the attempt times them: the host clock around the call wrapped
    by the CUDA-event tracker. Returns the host times (ms) and what the tracker filled (device_latency_ms,
    device_samples_ms, or their null reasons)."""
    from types import SimpleNamespace

    from harness.measure.cuda_timing import CudaEventTracker
    from harness.measure.timing import loop_timer

    t = CudaEventTracker()
    t.bind(SimpleNamespace(torch_stream=torch_stream))
    wrapped = t.wrap(call)
    t.start_timed()
    host = loop_timer(wrapped, rounds)
    t.stop(rounds)
    rec = blank_record()
    t.fill(rec)
    return host, rec


def blank_record() -> CellRecord:
    """A record for a tracker to fill outside a cell's attempt (the self-checks): every figure null."""
    from harness.core.axes import Shape
    from harness.core.cell import Cell
    from harness.core.record import new_record

    return new_record("gpu-check", Cell("n", "detect", "e2e", "torch-eager", "cuda", Shape(640, 640)), "none")


def fresh_memory_check(gpu: Gpu) -> Row:
    """The probe's GPU memory measurement (harness.measure.gpu_memory_fresh) on a known 1 GiB allocation held until
    its stop: the process peak over the context about 1024 MiB, and the record's relation and figures as the cells
    check them. This process is not fresh (its context exists already), so only those are checked."""
    import torch

    from harness.measure.gpu_memory_fresh import FreshGpuMemory

    row = Row("self: 1 GiB, probe's tracker", "ok")
    torch.cuda.empty_cache()
    tracker = FreshGpuMemory()
    tracker.start()
    block = torch.empty(GiB, dtype=torch.uint8, device=gpu.device)
    block.fill_(1)
    torch.cuda.synchronize(gpu.device)
    time.sleep(0.2)
    tracker.stop(1)
    del block
    rec = blank_record()
    tracker.fill(rec)
    mem = rec.memory
    assert mem is not None  # the tracker always fills its section
    row.checks.extend(memory_record_checks(mem, rec.null_reasons, torch_allocator=True))
    proc = mem.device_peak_process_mib
    ok = proc is not None and 1024 <= proc <= 1024 + 2048
    row.checks.append(
        f"{'ok' if ok else 'VIOLATED'}: process peak over the context {_fmt(proc, 0)} in [1024, 3072]"
    )
    row.note = f"context {_fmt(mem.device_context_mib, 0)} MiB"
    return row


def event_checks(row: Row, host_ms: list[float], rec: CellRecord) -> None:
    """The tracker's device time per round: present, positive, and within the host time of the same round."""
    device = rec.device_samples_ms
    if not device or rec.device_latency_ms is None:
        why = rec.null_reasons.get("device_latency_ms", "no device times")
        row.checks.append(f"VIOLATED: CUDA-event tracker gave no device times ({why})")
        return
    row.p50_ms, row.device_p50_ms = median(host_ms), rec.device_latency_ms.p50
    worst = max(d - h for d, h in zip(device, host_ms, strict=True))
    ok = all(d > 0 for d in device) and worst <= 0.05
    row.checks.append(f"{'ok' if ok else 'VIOLATED'}: 0 < device ms <= host ms (+0.05) in every round")


def self_check(gpu: Gpu) -> list[Row]:
    import torch

    from harness.backends.cudagraph import CudaGraphRunner
    from harness.backends.torch_eager import TorchRunner
    from harness.measure.energy import EnergyTracker
    from harness.measure.gpu_memory import GpuMemoryTracker
    from harness.measure.timing import TimedCall

    rows = []
    row = Row("self: cuda context", "ok", note=f"context {_fmt((gpu.context_bytes or 0) / MiB, 0)} MB")
    if gpu.context_bytes is None:
        row.status, row.note = "not measured", "the driver does not report per-process memory"
    rows.append(row)

    # a known allocation: 1 GiB through torch's allocator, held for 0.2 s, seen by an independent NVML sampler
    # (absolute figures) and by the GPU memory tracker the attempt uses (peaks over the baseline at start)
    row = Row("self: 1 GiB allocation", "ok")
    s = gpu.sampled()
    tracker = GpuMemoryTracker()
    tracker.start()
    block = torch.empty(GiB, dtype=torch.uint8, device=gpu.device)
    block.fill_(1)
    torch.cuda.synchronize(gpu.device)
    time.sleep(0.2)
    del block
    tracker.stop(1)
    s.stop()
    gpu.memory_checks(row, s, upper_bound=True)
    rec = blank_record()
    tracker.fill(rec)
    mem, nr = rec.memory, rec.null_reasons
    assert mem is not None  # the GPU memory tracker always fills its section
    for key, v, low in (
        ("device_peak_used_mib", mem.device_peak_used_mib, 1024),
        ("device_peak_process_mib", mem.device_peak_process_mib, 1024),
        ("torch_max_allocated_mib", mem.torch_max_allocated_mib, 1024),
        ("torch_max_reserved_mib", mem.torch_max_reserved_mib, 1024),
    ):
        if v is None:
            row.checks.append(f"VIOLATED: tracker {key} is null ({nr.get('memory.' + key)})")
        else:
            # 2 GiB above: room for allocator rounding and driver bookkeeping; a unit slip lands far outside
            ok = low <= v <= low + 2048
            row.checks.append(f"{'ok' if ok else 'VIOLATED'}: tracker {key} {v:.0f} in [{low}, {low + 2048}]")
    snap = rec.gpu_snapshot
    row.checks.append(
        f"{'ok' if snap else 'VIOLATED'}: gpu_snapshot "
        + (f"sm {snap.get('sm_clock_mhz')} MHz" if snap else str(nr.get("gpu_snapshot")))
    )
    rows.append(row)
    rows.append(fresh_memory_check(gpu))

    # CUDA events on a conv net, the call split at the host's wait
    net = (
        torch.nn.Sequential(*[torch.nn.Conv2d(64, 64, 3, padding=1) for _ in range(8)]).to(gpu.device).eval()
    )
    x = torch.randn(8, 64, 128, 128, device=gpu.device)
    row = Row("self: cuda events", "ok")
    with torch.no_grad():
        call = TimedCall(lambda: net(x), lambda: torch.cuda.synchronize(gpu.device))
        for _ in range(3):
            call()
        event_checks(row, *event_times(call, 50, torch_stream=True))
        # the same net seen through its synchronize only (a runtime on a stream of its own): still <= host
        synced = Row("self: cuda events (synced)", "ok")
        event_checks(synced, *event_times(call, 50, torch_stream=False))
    rows += [row, synced]

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
        event_checks(row, *event_times(TimedCall(lambda: g.run(prepared), g.synchronize), 50, g.torch_stream))
        g.close()
    except Exception as e:
        row.status = "failed"
        row.checks.append(f"VIOLATED: {type(e).__name__}: {e}")
    rows.append(row)

    # energy over ~1 s of work, through the energy tracker as the attempt drives it (its window is the blocks
    # resume .. pause between start_timed and stop)
    def work() -> None:
        with torch.no_grad():
            net(x)

    row = energy_check(EnergyTracker(batch=1), work, lambda: torch.cuda.synchronize(gpu.device))
    rows.append(row)
    return rows


def energy_check(tracker, work, sync, seconds: float = 1.0) -> Row:
    """The energy tracker over `seconds` of `work` calls, driven as the attempt drives it: start (before load),
    start_timed, resume (a block of timed rounds begins), the calls, stop (pauses the block). `sync` waits for the
    device. The figure must be positive, count every call and cover the whole window."""
    row = Row("self: energy counter", "ok")
    tracker.start()
    wrap = getattr(tracker, "wrap", None)
    if wrap is not None:  # the round's call, which the difference windows repeat after the timed rounds
        from harness.measure.timing import TimedCall

        wrap(TimedCall(work, sync))
    tracker.start_timed()
    tracker.resume()
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        work()
        n += 1
    sync()
    tracker.stop(n)
    rec = blank_record()
    tracker.fill(rec)
    e = rec.energy
    assert e is not None  # the energy tracker always fills its section
    if e.per_inference_j is None:
        why = rec.null_reasons["energy.per_inference_j"]
        if "not readable on this GPU" in why:
            row.status, row.note = "not supported", why
        else:
            row.checks.append(f"VIOLATED: no energy figure ({why})")
        return row
    window = e.window_s or 0.0  # set with the figure
    row.note = f"{e.per_inference_j * 1000:.2f} mJ/call over {window:.2f} s, {e.inferences} calls"
    ok = e.per_inference_j > 0 and e.inferences == n and window >= seconds
    row.checks.append(f"{'ok' if ok else 'VIOLATED'}: energy > 0 over the whole window")
    diff = getattr(e, "diff", None)
    if diff:  # the difference of two windows: no more than the gross figure, which also counts the idle power
        held = 0 < diff["per_inference_j"] <= e.per_inference_j
        row.note += f"; by two windows {diff['per_inference_j'] * 1000:.2f} mJ/call (besides {diff['besides_w']:.0f} W)"
        row.checks.append(f"{'ok' if held else 'VIOLATED'}: 0 < two-window energy <= gross")
    elif rec.null_reasons.get("energy.diff_per_inference_j"):
        row.note += f"; two windows: null ({rec.null_reasons['energy.diff_per_inference_j']})"
    return row


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
    from harness.core.axes import Shape
    from harness.core.cell import Cell

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


def record_checks(row: Row, rec: CellRecord, torch_allocator: bool) -> None:
    """What the attempt's GPU trackers wrote into a cuda cell's record: every figure present (or a reason that is a
    property of the GPU), device time within host time, and figures consistent with the independent sampler."""
    from harness.core.record import Memory

    nr = rec.null_reasons
    mem = rec.memory or Memory()
    lat, dev = rec.latency_ms, rec.device_latency_ms
    if dev is None:
        row.checks.append(f"VIOLATED: device_latency_ms null ({nr.get('device_latency_ms')})")
    else:
        row.device_p50_ms = dev.p50
        ok = lat is not None and dev.p50 <= lat.p50 + 0.05
        row.checks.append(f"{'ok' if ok else 'VIOLATED'}: device p50 <= host p50 (+0.05)")
    row.checks.extend(memory_record_checks(mem, nr, torch_allocator))
    energy = rec.energy.per_inference_j if rec.energy else None
    why = nr.get("energy.per_inference_j", "")
    if energy is None and "not readable on this GPU" not in why:
        row.checks.append(f"VIOLATED: energy.per_inference_j null ({why})")
    elif energy is not None:
        row.note = f"{energy * 1000:.2f} mJ/inference" + (f"; {row.note}" if row.note else "")
    if rec.gpu_snapshot is None:
        row.checks.append(f"VIOLATED: gpu_snapshot null ({nr.get('gpu_snapshot')})")


def memory_record_checks(mem, nr: dict, torch_allocator: bool) -> list[str]:
    """A cuda record's memory section, measured in the probe's fresh process (docs/gpu.md): the context, the process
    peak over it and what lies outside torch's allocator present (and torch's figures for allocator backends), and
    torch_max_allocated <= torch_max_reserved <= device_peak_process (+ tolerance), the relation a record keeps or
    nulls (harness.core.memory_order)."""
    from harness.core.memory_order import MEMORY_ORDER, memory_order_break

    checks = []
    keys = ["device_context_mib", "device_peak_process_mib", "device_outside_torch_mib"]
    if torch_allocator:
        keys += ["torch_max_allocated_mib", "torch_max_reserved_mib"]
    for key in keys:
        if getattr(mem, key) is None:
            checks.append(f"VIOLATED: memory.{key} null ({nr.get('memory.' + key)})")
    broken = memory_order_break(mem)
    checks.append(f"VIOLATED: {broken}" if broken else f"ok: {MEMORY_ORDER}")
    context, proc = mem.device_context_mib, mem.device_peak_process_mib
    if context is not None and proc is not None:
        ok = context > 0 and proc > 0
        checks.append(
            f"{'ok' if ok else 'VIOLATED'}: context {context:.0f} MiB, process peak {proc:.0f} MiB over it, "
            f"outside torch {_fmt(mem.device_outside_torch_mib, 0)} MiB (all > 0)"
        )
    return checks


def run_cells(
    gpu: Gpu,
    sizes: list[str],
    shape: int,
    out: Path,
    max_time: float,
    scenarios: str = "n640",
    accuracy: bool = True,
) -> list[Row]:
    from harness import backends
    from harness.execute.runner import CellRunner, RunConfig

    runner = CellRunner(
        RunConfig(
            run_id=f"gpu-check-{time.strftime('%Y%m%dT%H%M%S')}",
            results_dir=out,
            cache_dir=out / "cache",
            max_time_s=max_time,
            scenarios=scenarios,
            accuracy=accuracy,
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
            rec = runner.run_cell(cell)  # the attempt's trackers fill the GPU figures
        finally:
            sampler.stop()
        row.status = rec.status
        row.note = (rec.reason or "")[:160]
        if rec.latency_ms:
            row.p50_ms = rec.latency_ms.p50
        if rec.status in ("ok", "parity_failed"):
            allocator = cell.backend in TORCH_ALLOCATOR_BACKENDS
            gpu.memory_checks(row, sampler, upper_bound=allocator)
            record_checks(row, rec, torch_allocator=allocator)
            if rec.status == "parity_failed":
                row.checks.append(f"VIOLATED: parity {rec.reason}")
            if backends.get(cell.backend).exports and rec.export_s is not None:
                row.note = f"export {rec.export_s:.1f}s " + row.note
        rows.append(row)
    return rows


#: the share of the ExecuTorch budget the full export may take before the backbone-only export (which reuses the
#: kernels it autotuned, through the one Inductor cache, so it needs less)
FULL_EXPORT_SHARE = 0.6


def executorch_cuda_exports(
    runner, cell, budget_s: float = 1800.0, records: list | None = None, run_id: str | None = None
) -> list[Row]:
    """ExecuTorch CUDA full and backbone-only, exported in isolated processes (an export is the finding here),
    within `budget_s` together: the full export at most FULL_EXPORT_SHARE of it, the backbone-only one what is
    left (a timed-out export's row names the last phase it reached). Both run with one Inductor cache folder ($TORCHINDUCTOR_CACHE_DIR), so the backbone-only export
    reuses the kernels the full one autotuned. Each export that ran is also a record (`exported` or its failure
    status, with the failure's class and operators: harness.execute.export_records), appended to `records`, the
    backbone-only one a remedy attempt of the full cell."""
    from harness import backends
    from harness.backends.base import ExportRequest
    from harness.backends.executorch_cuda import REMEDY_BACKBONE_ONLY
    from harness.execute.export_records import export_record, skipped_record
    from harness.execute.isolate import run_export

    backend = backends.get(cell.backend)
    reason = backend.unsupported(cell) or backend.probe(cell.device)
    rows = []
    t_end = time.monotonic() + budget_s
    for remedy in (None, REMEDY_BACKBONE_ONLY):
        name = cell.id + (f" [{remedy}]" if remedy else " [full]")
        if reason:
            rows.append(Row(name, "skipped", note=reason))
            if records is not None:
                records.append(
                    skipped_record(
                        cell,
                        reason,
                        run_id or runner.config.run_id,
                        "not built: the export could not run here",
                        remedy=remedy,
                        remedy_of=cell.id if remedy else None,
                    )
                )
            continue
        left = t_end - time.monotonic()
        if left < 30:
            rows.append(Row(name, "not run", note=f"{max(0.0, left):.0f} s of the ExecuTorch budget left"))
            continue
        if remedy is None:
            # the full export may not take the backbone-only one's share: an export that never finishes (over
            # 250 s on the H100 before the compile options) would leave the remedy, the claim's other half, unrun
            left = max(30.0, left * FULL_EXPORT_SHARE)
        mat = runner.materialize(cell)
        out_dir = runner.config.cache_dir / "gpu-check-exports" / (cell.id + ("-" + remedy if remedy else ""))
        req = ExportRequest.for_cell(cell, mat.checkpoint, out_dir, {"remedy": remedy} if remedy else {})
        log = runner.config.run_dir / "logs" / f"{cell.id}-{remedy or 'full'}.log"
        outcome = run_export(req, log, left)
        status = "exported" if outcome.status == "ok" else outcome.status
        note = (outcome.message or "").splitlines()[0][:400] if outcome.message else ""
        not_run = backend.export_only_reason(cell) if outcome.status == "ok" else None
        if outcome.status == "ok":
            info = outcome.info
            phases = ", ".join(f"{k.split(' ')[0]} {v:.1f}s" for k, v in (info.get("phase_s") or {}).items())
            options = (info.get("compile_options") or {}).get("overrides")
            note = (
                f"export {outcome.export_s:.1f}s ({phases}); max_autotune {info.get('max_autotune')}; "
                f"options {options}; ops {info.get('ops')}"
            )
            if not_run:
                note += f"; not run: {not_run}"
        rows.append(Row(name, status, note=note))
        if records is not None:
            rel = (
                str(log.relative_to(runner.config.run_dir))
                if log.is_relative_to(runner.config.run_dir)
                else str(log)
            )
            records.append(
                export_record(
                    cell,
                    outcome,
                    run_id or runner.config.run_id,
                    mat.weights,
                    remedy=remedy,
                    remedy_of=cell.id if remedy else None,
                    log_rel=rel,
                    not_run=not_run,
                )
            )
    return rows


def executorch_only(args) -> int:
    """The ExecuTorch CUDA exports alone (benchmarks/gpu_once.sh's last step): rows in gpu_check.json, and each
    export's record appended to --records (a run's cells.jsonl, with --run-id that run's id), or, without it,
    written as a run of its own under --out (cells.jsonl and env.json), for the report and its claims check.
    Exit status: 0 every export ran (exported or failed: either is the finding); 3 one was skipped here."""
    from harness.execute.runner import CellRunner, RunConfig

    missing = missing_model_stack()
    if missing:
        print(f"gpu_check: cannot run the exports: missing {', '.join(missing)}")
        return 3
    run_id = args.run_id or f"gpu-check-executorch-{time.strftime('%Y%m%dT%H%M%S')}"
    runner = CellRunner(
        RunConfig(run_id=run_id, results_dir=args.out, cache_dir=args.out / "cache"),
        progress=lambda m: print(f"  {m}", flush=True),
    )
    # one Inductor cache for both exports: the backbone-only export reuses what the full one autotuned
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(args.out / "inductor-cache"))
    print(f"  Inductor cache: {os.environ['TORCHINDUCTOR_CACHE_DIR']}", flush=True)
    rows: list[Row] = []
    records: list = []
    t_end = time.monotonic() + args.budget_s
    for cell in cell_plan([s for s in args.sizes.split(",") if s], args.shape):
        if cell.backend == "executorch-cuda":
            rows += executorch_cuda_exports(runner, cell, max(0.0, t_end - time.monotonic()), records, run_id)
    print_table(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu_check.json").write_text(json.dumps({"rows": [asdict(r) for r in rows]}, indent=2))
    if records:
        write_export_records(records, args.records, runner.config.run_dir, run_id)
    return 3 if any(r.status == "skipped" for r in rows) else 0


def write_export_records(records: list, into: Path | None, run_dir: Path, run_id: str) -> Path:
    """Append the export records to `into` (another run's cells.jsonl), else write them as the run `run_dir`
    (cells.jsonl and env.json: the machine they were exported on)."""
    from harness.core.record_codec import record_to_json
    from harness.core.results_dir import RecordWriter

    if into is not None:
        into.parent.mkdir(parents=True, exist_ok=True)
        with open(into, "a") as f:
            for rec in records:
                f.write(record_to_json(rec) + "\n")
        print(f"  {len(records)} export records appended to {into}", flush=True)
        return into
    from harness.core import envinfo
    from harness.measure import machine

    writer = RecordWriter(run_dir)
    for rec in records:
        writer.write(rec)
    envinfo.write(run_dir, envinfo.collect(run_id, facts=machine.facts(speed=False, peaks=False)))
    print(f"  {len(records)} export records written to {run_dir}", flush=True)
    return run_dir / "cells.jsonl"


def default_out() -> Path:
    """$OUT/gpu-check where $OUT is set (the device machine's output folder), else under the temporary folder."""
    import tempfile

    base = os.environ.get("OUT")
    return (Path(base) if base else Path(tempfile.gettempdir())) / "gpu-check"


# -- main ----------------------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="n,s", help="model sizes (default n,s)")
    ap.add_argument("--shape", type=int, default=640, help="square input size (default 640)")
    ap.add_argument(
        "--out",
        type=Path,
        default=default_out(),
        help="results, logs and export cache (default $OUT/gpu-check, else gpu-check under the system's temporary "
        "folder: never inside results/, which holds the runs the history reads)",
    )
    ap.add_argument(
        "--max-time", type=float, default=1.0, help="seconds of timed rounds per cell at most (default 1)"
    )
    ap.add_argument("--self-check-only", action="store_true", help="skip the model cells")
    ap.add_argument(
        "--scenarios",
        choices=("n640", "all", "none"),
        default="n640",
        help="which cells run the use-case scenarios (default n640: yolo26n at 640; none saves minutes)",
    )
    ap.add_argument(
        "--no-accuracy",
        action="store_true",
        help="skip the accuracy pass (mAP on the val split) of each cell",
    )
    ap.add_argument(
        "--executorch-only",
        action="store_true",
        help="only the ExecuTorch CUDA exports (full and backbone-only) of --sizes at --shape, as isolated "
        "exports; no self-check (runs without a GPU too: each export is then a skip with its reason)",
    )
    ap.add_argument(
        "--records",
        type=Path,
        default=None,
        help="with --executorch-only: append each export's record to this cells.jsonl (a run's, with --run-id); "
        "default: a run of its own under --out",
    )
    ap.add_argument("--run-id", default=None, help="with --executorch-only: the run id of the export records")
    ap.add_argument(
        "--budget-s",
        type=float,
        default=1800.0,
        help="seconds for the ExecuTorch CUDA exports together (default 1800): each gets what is left",
    )
    args = ap.parse_args(argv)
    if args.budget_s <= 0:
        ap.error("--budget-s must be positive")
    if args.executorch_only:
        return executorch_only(args)

    not_run: list[str] = []
    try:
        import torch
    except ImportError as e:
        print(f"gpu_check: cannot run: torch is not installed ({e})")
        return 3
    from harness.measure.nvml import NvmlUnavailable, gpu_env

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
                    gpu,
                    [s for s in args.sizes.split(",") if s],
                    args.shape,
                    args.out,
                    args.max_time,
                    scenarios=args.scenarios,
                    accuracy=not args.no_accuracy,
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
