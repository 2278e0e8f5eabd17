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
- e2e-stage-sum: the record's own `e2e.gap` (the median over paired calls of stage sum / whole call, less 1) is
  within E2E_TOL (the e2e check's own +-5%), and the record's own verdict on that says it held.
- e2e-stages-vs-whole: every record, whatever its `e2e.gap` says: the gap computed from what it holds, the sum of
  its stages' p50s (`stages_ms`, else `e2e.stage_sum_ms`) over the whole call's p50 (`e2e.wall_ms`, else
  `latency_e2e_ms.p50`), less 1, is within E2E_TOL + E2E_SCATTER_K x the whole calls' robust scatter
  (`latency_e2e_ms.scatter`; E2E_TOL alone without it). A ratio of p50s from different calls is not the paired
  gap: it moves with the calls' spread (on the committed records, whose paired gaps are within 13%, it reached
  +0.747 at a scatter of 0.426, 1.64 scatters past 5%).
- device-within-host: each timed round's CUDA-event device time is not above its host wall time (+ DEVICE_TOL_MS):
  the events are recorded inside the host's clock.
- device-p50-within-host: the device p50 is not above the host p50 (+ DEVICE_TOL_MS), from what the record holds:
  the p50s of the per-round samples (`device_samples_ms`, `samples_ms`) when both are recorded, and the summary
  p50s (`device_latency_ms.p50`, `latency_ms.p50`) when both are there (a summary that disagrees with its own
  rounds is named too). Device time is inside host time for the same rounds, so its p50 is too.
- roofline-bound: an ok cell's achieved rate (its counted `roofline.flops` over its model-only p50; the recorded
  `roofline.achieved_flops_s` where those are not both there) is not above its machine's measured roofline bound
  (`roofline.bound_flops_s`: the lower of the compute peak for its precision and intensity x bandwidth) by more
  than ROOFLINE_TOL. A cell that beats the hardware is a measurement defect: a wrong clock, a skipped computation,
  a work count of another graph, or a peak measured low.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from statistics import median
from typing import Any

from harness.core.cli_args import printable
from harness.core.record import CellRecord, Latency

#: NVML's per-process memory moves in 2 MiB steps (every value on the H100 records is a multiple of 2 MiB)
MEMORY_TOL_MIB = 2.0
#: below this window the energy counter's coarse steps make the figure imprecise (harness.measure.energy)
MIN_ENERGY_WINDOW_S = 1.0
#: the energy window may fall short of the summed host time of the timed rounds by this share (rounding)
WINDOW_TOL = 0.01
#: the e2e check's rule: the stage times add up to the whole call within +-5%
E2E_TOL = 0.05
#: without the paired gap, the stages' p50 sum may be off the whole call's p50 by E2E_TOL plus this many of the
#: whole calls' robust scatters (a ratio of p50s of different calls moves with their spread)
E2E_SCATTER_K = 2.0
#: CUDA events resolve about 0.5 us; the end event of a synchronised round runs just after the host's wait returns
DEVICE_TOL_MS = 0.01

#: a cell may run above its machine's measured roofline bound by this share before it breaks roofline-bound: the
#: bound's own uncertainty (the measured peaks agree with a plain matrix-product loop timed apart within 10%,
#: benchmarks/peak_agreement.py; a peak is one run's best rate on a machine whose speed moves)
ROOFLINE_TOL = 0.10

LATENCY_SECTIONS = ("latency_ms", "device_latency_ms", "latency_e2e_ms")


@dataclass(frozen=True)
class Finding:
    """One relation one record breaks: which record, which relation, and the figures that break it."""

    cell_id: str
    relation: str
    detail: str

    def line(self, run: str | None = None) -> str:
        """`RUN: CELL_ID: RELATION: DETAIL` on one line: every field escaped (harness.core.cli_args.printable), so a
        cell id holding a newline or a terminal escape cannot start a line of its own nor recolour the output."""
        where = f"{printable(run)}: " if run else ""
        return f"{where}{printable(str(self.cell_id))}: {printable(self.relation)}: {printable(self.detail)}"


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
    gap = _number(e2e.get("gap"))  # a record without it: e2e-stages-vs-whole
    if gap is not None and abs(gap) > E2E_TOL:
        out.append(
            f"the stages add up to {1 + gap:.3f} x the whole call (more than +-{E2E_TOL:.0%} off: time is counted "
            "twice or missed)"
        )
    check = e2e.get("check") if isinstance(e2e.get("check"), dict) else {}
    if check.get("held") is False and not out:
        out.append(f"the record's own stage-sum check did not hold ({check.get('rule', 'no rule given')})")
    return out


def _number(v: Any) -> float | None:
    """`v` when it is a finite number (a figure to relate), else None (null, text, inf, nan: nothing to relate)."""
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        return None
    return float(v)


def _stage_sum(rec: CellRecord) -> float | None:
    """The sum of the end-to-end stages' p50s (`stages_ms`; `e2e.stage_sum_ms` when the stages are not there)."""
    stages = [_number(v) for v in (rec.stages_ms or {}).values()]
    known = [v for v in stages if v is not None]
    if known:
        return sum(known)
    return _number((rec.e2e or {}).get("stage_sum_ms"))


def e2e_stages_vs_whole(rec: CellRecord) -> list[str]:
    # whatever the record says of its own gap: a gap that agrees with the stages is no reason to believe stages
    # that add up to twice the whole call (e2e-stage-sum relates the gap itself)
    e2e: dict[str, Any] = rec.e2e or {}
    lat = rec.latency_e2e_ms
    whole = _number(e2e.get("wall_ms"))
    if whole is None and lat is not None:
        whole = _number(lat.p50)
    total = _stage_sum(rec)
    if whole is None or whole <= 0 or total is None:
        return []
    gap = total / whole - 1
    scatter = _number(lat.scatter) if lat is not None else None
    tol = E2E_TOL + E2E_SCATTER_K * (scatter or 0.0)
    if abs(gap) <= tol:
        return []
    spread = f" + {E2E_SCATTER_K:g} x the whole calls' scatter {scatter:.3f}" if scatter else ""
    own = _number(e2e.get("gap"))
    said = "no e2e.gap recorded" if own is None else f"the record's e2e.gap says {own:+.3f}"
    return [
        f"{said}; the stages' p50s add up to {total:.4g} ms, {1 + gap:.3f} x the whole call's p50 "
        f"{whole:.4g} ms (more than +-{tol:.1%} off: {E2E_TOL:.0%}{spread}; time is counted twice or missed)"
    ]


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
    return []  # the p50s, rounds or not: device-p50-within-host


def _p50_break(what: str, d50: float, h50: float) -> str | None:
    if d50 <= h50 + DEVICE_TOL_MS:
        return None
    times = f", {d50 / h50:.2f} x" if h50 > 0 else ""
    return f"{what}: device p50 {d50:.4f} ms > host p50 {h50:.4f} ms + {DEVICE_TOL_MS:g} ms{times}"


def device_p50_within_host(rec: CellRecord) -> list[str]:
    out = []
    dev = [v for v in (_number(x) for x in rec.device_samples_ms or []) if v is not None]
    host = [v for v in (_number(x) for x in rec.samples_ms or []) if v is not None]
    if dev and host:
        out.append(_p50_break("per-round samples (device_samples_ms, samples_ms)", median(dev), median(host)))
    d50 = _number(rec.device_latency_ms.p50) if rec.device_latency_ms is not None else None
    h50 = _number(rec.latency_ms.p50) if rec.latency_ms is not None else None
    if d50 is not None and h50 is not None:
        out.append(_p50_break("device_latency_ms.p50 vs latency_ms.p50", d50, h50))
    return [b for b in out if b is not None]


def _rate(v: float) -> str:
    return f"{v / 1e9:.4g} GFLOP/s"


def roofline_bound(rec: CellRecord) -> list[str]:
    r = rec.roofline
    if r is None:
        return []
    bound = _number(r.bound_flops_s)
    flops = _number(r.flops)
    p50 = _number(rec.latency_ms.p50) if rec.latency_ms is not None else None
    if flops is not None and p50 is not None and p50 > 0:
        achieved, how = flops / (p50 / 1000.0), f"{flops / 1e9:.4g} GFLOP over the p50 {p50:.4g} ms"
    else:
        achieved, how = _number(r.achieved_flops_s), "the recorded achieved rate"
    if bound is None or bound <= 0 or achieved is None or achieved <= bound * (1 + ROOFLINE_TOL):
        return []
    return [
        f"achieved {_rate(achieved)} ({how}) is {achieved / bound:.3g} x the machine's measured bound "
        f"{_rate(bound)} ({r.bound_by or 'unknown'}-bound, {r.precision or '?'} peak {r.peak_of or '?'}; more than "
        f"+{ROOFLINE_TOL:.0%}): the cell beats the hardware"
    ]


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
    "e2e-stage-sum": (
        f"end-to-end stages add up to the whole call within +-{E2E_TOL:.0%} (the record's e2e.gap and verdict)",
        e2e_stage_sum,
    ),
    "e2e-stages-vs-whole": (
        f"without e2e.gap: the stages' p50s add up to the whole call's p50 within +-({E2E_TOL:.0%} + "
        f"{E2E_SCATTER_K:g} x the whole calls' scatter)",
        e2e_stages_vs_whole,
    ),
    "device-within-host": (
        f"CUDA-event device time <= host wall time (+ {DEVICE_TOL_MS:g} ms) in every timed round",
        device_within_host,
    ),
    "device-p50-within-host": (
        f"device p50 <= host p50 (+ {DEVICE_TOL_MS:g} ms), from the per-round samples and from the summaries",
        device_p50_within_host,
    ),
    "roofline-bound": (
        f"achieved FLOP/s <= the machine's measured roofline bound (+{ROOFLINE_TOL:.0%})",
        roofline_bound,
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
