"""Relations a record's figures must satisfy, each with its stated tolerance: what `yolo26-bench check` and the
report's "Relations" section list when a record breaks one.

Each relation is a function from a record to the ways it breaks (an empty list when it holds, or when the record
lacks the figures it relates: a null figure breaks nothing, its null reason says why it is null). The relations
and tolerances are documented in docs/gpu.md ("Relations a record's figures satisfy"):

- gpu-memory: torch_max_allocated <= torch_max_reserved <= device_peak_process + MEMORY_TOL_MIB. Torch's reserved
  memory is device memory of the process, so NVML's figure for the process cannot be below it; the tolerance is
  one step of NVML's per-process figure (it moves in 2 MiB steps on the H100 records).
- energy-window: the window covers the timed rounds (window_s >= their summed host time, less WINDOW_TOL), it is
  at least MIN_ENERGY_WINDOW_S long or `energy.source` says it is shorter, and inferences = timed rounds x batch.
- percentiles: in each latency section, min <= p50 <= p90 <= p99 <= max, and p50 inside its 95% interval.
- e2e-stage-sum: the end-to-end stages add up to the whole call, within E2E_TOL (the e2e check's own +-5%), and
  the record's own verdict on that says it held.
- device-within-host: each timed round's CUDA-event device time is not above its host wall time (+ DEVICE_TOL_MS):
  the events are recorded inside the host's clock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from harness.core.record import CellRecord, Latency

#: NVML's per-process memory moves in 2 MiB steps (every value on the H100 records is a multiple of 2 MiB)
MEMORY_TOL_MIB = 2.0
#: below this window the energy counter's coarse steps make the figure imprecise (harness.measure.energy)
MIN_ENERGY_WINDOW_S = 1.0
#: the energy window may fall short of the summed host time of the timed rounds by this share (rounding)
WINDOW_TOL = 0.01
#: the e2e check's rule: the stage times add up to the whole call within +-5%
E2E_TOL = 0.05
#: CUDA events resolve about 0.5 us; the end event of a synchronised round runs just after the host's wait returns
DEVICE_TOL_MS = 0.01

LATENCY_SECTIONS = ("latency_ms", "device_latency_ms", "latency_e2e_ms")


@dataclass(frozen=True)
class Finding:
    """One relation one record breaks: which record, which relation, and the figures that break it."""

    cell_id: str
    relation: str
    detail: str

    def line(self, run: str | None = None) -> str:
        where = f"{run}: " if run else ""
        return f"{where}{self.cell_id}: {self.relation}: {self.detail}"


def _mib(v: float) -> str:
    return f"{v:.1f} MiB"


def gpu_memory(rec: CellRecord) -> list[str]:
    m = rec.memory
    if m is None:
        return []
    out = []
    alloc, res, proc = m.torch_max_allocated_mib, m.torch_max_reserved_mib, m.device_peak_process_mib
    if alloc is not None and res is not None and alloc > res:
        out.append(f"torch_max_allocated {_mib(alloc)} > torch_max_reserved {_mib(res)}")
    if res is not None and proc is not None and res > proc + MEMORY_TOL_MIB:
        out.append(
            f"torch_max_reserved {_mib(res)} > device_peak_process {_mib(proc)} + {MEMORY_TOL_MIB:g} MiB "
            "(torch's reserved memory is part of the process's device memory)"
        )
    return out


def energy_window(rec: CellRecord) -> list[str]:
    e = rec.energy
    if e is None or e.per_inference_j is None:
        return []
    out = []
    if e.window_s is not None and e.window_s < MIN_ENERGY_WINDOW_S and "shorter than" not in (e.source or ""):
        out.append(f"window {e.window_s:.3f} s < {MIN_ENERGY_WINDOW_S:g} s and the source does not say so")
    rounds = rec.latency_ms.rounds if rec.latency_ms is not None else None
    if e.inferences is not None and rounds is not None and e.inferences != rounds * rec.batch:
        out.append(f"inferences {e.inferences} != timed rounds {rounds} x batch {rec.batch}")
    if e.window_s is not None and rec.samples_ms:
        timed_s = sum(rec.samples_ms) / 1000.0
        if e.window_s < timed_s * (1 - WINDOW_TOL):
            out.append(
                f"window {e.window_s:.3f} s is shorter than the timed rounds it covers ({timed_s:.3f} s of host "
                f"time, less {WINDOW_TOL:.0%})"
            )
    return out


def _latency_breaks(name: str, lat: Latency) -> list[str]:
    out = []
    chain = [("min", lat.min), ("p50", lat.p50), ("p90", lat.p90), ("p99", lat.p99), ("max", lat.max)]
    known = [(k, v) for k, v in chain if v is not None]
    for (ka, a), (kb, b) in pairwise(known):
        if a > b:
            out.append(f"{name}.{ka} {a:.4g} > {name}.{kb} {b:.4g}")
    if lat.p50_ci is not None and lat.p50 is not None:
        lo, hi = lat.p50_ci
        if not lo <= lat.p50 <= hi:
            out.append(f"{name}.p50 {lat.p50:.4g} outside its 95% interval [{lo:.4g}, {hi:.4g}]")
    return out


def percentiles(rec: CellRecord) -> list[str]:
    out = []
    for name in LATENCY_SECTIONS:
        lat = getattr(rec, name)
        if lat is not None:
            out += _latency_breaks(name, lat)
    sr: dict[str, Any] = rec.scenario_result or {}
    known = [(k, sr[k]) for k in ("p50", "p90", "p99") if isinstance(sr.get(k), int | float)]
    for (ka, a), (kb, b) in pairwise(known):
        if a > b:
            out.append(f"scenario_result.{ka} {a:.4g} > scenario_result.{kb} {b:.4g}")
    return out


def e2e_stage_sum(rec: CellRecord) -> list[str]:
    e2e: dict[str, Any] = rec.e2e or {}
    out = []
    gap = e2e.get("gap")
    if gap is None and e2e.get("stage_sum_ms") is not None and e2e.get("wall_ms"):
        gap = e2e["stage_sum_ms"] / e2e["wall_ms"] - 1
    if gap is not None and abs(gap) > E2E_TOL:
        out.append(
            f"the stages add up to {1 + gap:.3f} x the whole call (more than +-{E2E_TOL:.0%} off: time is counted "
            "twice or missed)"
        )
    held = (e2e.get("check") or {}).get("held")
    if held is False and not out:
        out.append(
            f"the record's own stage-sum check did not hold ({e2e['check'].get('rule', 'no rule given')})"
        )
    return out


def device_within_host(rec: CellRecord) -> list[str]:
    dev, host = rec.device_samples_ms, rec.samples_ms
    if dev and host and len(dev) == len(host):
        over = [(i, d, h) for i, (d, h) in enumerate(zip(dev, host, strict=True)) if d > h + DEVICE_TOL_MS]
        if over:
            i, d, h = max(over, key=lambda t: t[1] - t[2])
            return [
                f"{len(over)} of {len(dev)} timed rounds have device time above host time (worst: round {i}, "
                f"{d:.4f} ms > {h:.4f} ms + {DEVICE_TOL_MS:g} ms)"
            ]
        return []
    d50 = rec.device_latency_ms.p50 if rec.device_latency_ms is not None else None
    h50 = rec.latency_ms.p50 if rec.latency_ms is not None else None
    if d50 is not None and h50 is not None and d50 > h50 + DEVICE_TOL_MS:
        return [f"device_latency_ms.p50 {d50:.4f} > latency_ms.p50 {h50:.4f} + {DEVICE_TOL_MS:g} ms"]
    return []


#: relation name -> (what must hold, the function listing how a record breaks it)
RELATIONS: dict[str, tuple[str, Callable[[CellRecord], list[str]]]] = {
    "gpu-memory": (
        f"torch_max_allocated <= torch_max_reserved <= device_peak_process + {MEMORY_TOL_MIB:g} MiB",
        gpu_memory,
    ),
    "energy-window": (
        f"energy window >= {MIN_ENERGY_WINDOW_S:g} s (or said), covers the timed rounds; inferences = rounds x batch",
        energy_window,
    ),
    "percentiles": ("min <= p50 <= p90 <= p99 <= max; p50 inside its 95% interval", percentiles),
    "e2e-stage-sum": (f"end-to-end stages add up to the whole call within +-{E2E_TOL:.0%}", e2e_stage_sum),
    "device-within-host": (
        f"CUDA-event device time <= host wall time (+ {DEVICE_TOL_MS:g} ms) in every timed round",
        device_within_host,
    ),
}


def check_record(rec: CellRecord) -> list[Finding]:
    """Every relation `rec` breaks, one finding per relation (its ways of breaking joined)."""
    out = []
    for name, (_, fn) in RELATIONS.items():
        breaks = fn(rec)
        if breaks:
            out.append(Finding(rec.cell_id, name, "; ".join(breaks)))
    return out


def check_records(records: list[CellRecord]) -> list[Finding]:
    """The findings of every record, in the records' order."""
    return [f for rec in records for f in check_record(rec)]
