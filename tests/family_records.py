"""Hand-made records of YOLO26 and YOLO11 cells timed together, for the migration answer's and the family claims'
tests. Synthetic: no figure here was measured, and each record says so (`synthetic: true`)."""

from __future__ import annotations

from pathlib import Path

from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.record import CellRecord, Memory, new_record
from harness.core.results_dir import Run
from harness.decide.index import RunIndex, index_runs
from harness.measure.stats import latency_from_samples

#: env.json of the synthetic machine: 2 physical cores, as this project's CPU machines
ENV = {
    "host": {"cpu_model": "AMD EPYC", "cpu_cores_physical": 2},
    "threads": {"budget": 2, "physical_cores": 2},
}


def steady(center: float, n: int = 120) -> list[float]:
    """`n` rounds within +-1% of `center` (a p50 interval far narrower than the differences injected)."""
    return [round(center * (1 + 0.01 * (2 * k / (n - 1) - 1)), 5) for k in range(n)]


def record(
    family: str,
    backend: str,
    model_ms: float,
    e2e_ms: float,
    size: str = "n",
    side: int = 640,
    threads: int = 2,
) -> CellRecord:
    """An ok detect record of `family` at `side`, with its model-only and end-to-end rounds around the given p50s."""
    head = "e2e" if family == "yolo26" else "raw"
    c = Cell(size, "detect", head, backend, "cpu", Shape(side, side), family=family)
    r = new_record("synthetic", c, "random-init:0")
    r.status = "ok"
    r.synthetic = True
    r.threads = r.threads_requested = threads
    r.samples_ms = steady(model_ms, 40)
    r.latency_ms = latency_from_samples(r.samples_ms, "model")
    r.latency_e2e_ms = latency_from_samples(steady(e2e_ms), "end-to-end")
    r.memory = Memory(host_peak_rss_mib=300.0)
    return r


def _entry(ratio: float, half_width: float, trials: int) -> dict:
    return {
        "ratio": ratio,
        "ratio_ci": [ratio * (1 - half_width), ratio * (1 + half_width)],
        "trials": trials,
    }


def pair(
    backend: str,
    model_26: float,
    model_11: float,
    e2e_26: float,
    e2e_11: float,
    size: str = "n",
    side: int = 640,
    half_width: float = 0.02,
    threads: int = 2,
) -> tuple[CellRecord, CellRecord]:
    """A YOLO26 cell and the YOLO11 cell of the same backend, size and shape, timed in one interleaved session: each
    record's `paired` and `paired_e2e` hold the ratio to the other, with an interval of +-`half_width`."""
    y = record("yolo26", backend, model_26, e2e_26, size, side, threads)
    o = record("yolo11", backend, model_11, e2e_11, size, side, threads)
    session = f"synthetic-{backend}-{size}-{side}"
    for a, b, m, e in (
        (y, o, model_26 / model_11, e2e_26 / e2e_11),
        (o, y, model_11 / model_26, e2e_11 / e2e_26),
    ):
        a.timing = {"mode": "interleaved", "with": [b.cell_id], "session": session}
        a.paired = {
            "reference": a.cell_id,
            "reference_backend": backend,
            "ratio": 1.0,
            "ratio_ci": [1.0, 1.0],
            "trials": 20,
            "others": {b.cell_id: _entry(m, half_width, 20)},
        }
        a.paired_e2e = {
            "scope": "end-to-end",
            "estimator": "synthetic",
            "others": {b.cell_id: _entry(e, half_width, 12)},
        }
    return y, o


def indexes(*records: CellRecord, env: dict | None = None) -> list[RunIndex]:
    """The records as one synthetic run on one machine."""
    return index_runs([Run(Path("/synthetic"), "synthetic", env or ENV, list(records))])
