"""Synthetic results directories with realistic timing noise, for testing and trying the tracker without a GPU.

Each run draws a per-run drift (machine state: clocks, thermals) and per-round noise that is right-skewed with
rare large outliers (interrupts, allocator hiccups), which is what real `samples_ms` look like.

Everything written here says it is invented: `synthetic: true` in env.json and in every record (an extra field,
absent from real records), so a report of such a directory carries the synthetic-data banner.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from pathlib import Path

from harness import SCHEMA_VERSION
from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.record import CellRecord, Energy, Memory, new_record
from harness.core.results_dir import RecordWriter, write_env
from harness.measure.stats import latency_from_samples

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Noise:
    """Relative noise: between runs (lognormal sigma), between rounds (lognormal sigma), outlier rate."""

    run_sigma: float = 0.02
    round_sigma: float = 0.03
    outlier_rate: float = 0.02


def make_env(
    run_id: str,
    started_at: str,
    *,
    hostname: str = "gpu-runner-1",
    gpu: str | None = "NVIDIA H100 80GB HBM3",
    driver: str = "550.54.15",
    cuda: str | None = "12.4",
    libraries: dict | None = None,
) -> dict:
    """An env.json in the harness's format."""
    libs = {"torch": "2.13.0", "ultralytics": "8.4.190", "onnxruntime": "1.31.1", "openvino": None}
    libs.update(libraries or {})
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "started_at": started_at,
        "synthetic": True,
        "git_commit": "0" * 40,
        "host": {
            "hostname": hostname,
            "os": "Linux",
            "python": "3.11.9",
            "cpu_model": "AMD EPYC 9654",
            "cpu_cores_logical": 16,
            "ram_gb": 128,
        },
        "gpu": (
            [
                {
                    "name": gpu,
                    "compute_capability": "9.0",
                    "driver": driver,
                    "memory_total_mb": 81559,
                    "pci_bus_id": "00000000:01:00.0",
                }
            ]
            if gpu
            else []
        ),
        "cuda": {"version": cuda, "cudnn": "9.1.0"} if cuda else None,
        "libraries": libs,
        "threads": {"budget": 16, "physical_cores": 16, "source": "physical cores (default)"},
    }


def cell(backend: str = "onnxruntime", size: str = "n", device: str = "cuda", height: int = 640) -> Cell:
    """A detect cell with the given axes."""
    return Cell(
        size=size, task="detect", head="e2e", backend=backend, device=device, shape=Shape(height, height)
    )


def noisy_samples(rng: random.Random, center_ms: float, rounds: int, noise: Noise) -> list[float]:
    """Timed rounds around center_ms: lognormal jitter plus rare 1.2-2x outliers."""
    out = []
    for _ in range(rounds):
        v = center_ms * rng.lognormvariate(0.0, noise.round_sigma)
        if rng.random() < noise.outlier_rate:
            v *= rng.uniform(1.2, 2.0)
        out.append(round(v, 4))
    return out


def make_record(
    run_id: str,
    c: Cell,
    *,
    status: str = "ok",
    samples_ms: list[float] | None = None,
    device_mem_mib: float | None = None,
    timing_scope: str = "model",
) -> CellRecord:
    """A complete record for cell c; an ok record carries latency, samples and memory."""
    rec = new_record(run_id, c, weights="random-init(seed=0)")
    rec.synthetic = True
    rec.status = status
    rec.started_at = "1970-01-01T00:00:00+00:00"
    if status == "ok" and samples_ms:
        rec.precision_executed = c.precision
        rec.precision_source = "synthetic"
        rec.latency_ms = latency_from_samples(samples_ms, timing_scope)
        rec.samples_ms = samples_ms
        rec.memory = Memory(
            host_peak_rss_mib=2048.0,
            host_peak_delta_mib=300.0,
            device_peak_used_mib=device_mem_mib,
            device_peak_process_mib=device_mem_mib,
            source="synthetic",
        )
        rec.energy = Energy(source="synthetic")
    elif status != "ok":
        rec.reason = f"synthetic {status}"
        rec.failure = {"class": "Synthetic", "stage": "run", "message": f"synthetic {status}"}
    return rec


def write_run(root: str | Path, env: dict, records: list[CellRecord]) -> Path:
    """Write results/<run_id>/cells.jsonl and env.json under root; returns the run directory."""
    run_dir = Path(root) / env["run_id"]
    run_dir.mkdir(parents=True, exist_ok=True)
    writer = RecordWriter(run_dir)
    for rec in records:
        writer.write(rec)
    write_env(run_dir, env)
    return run_dir
