"""The machine's peaks read again beside each workload, each figure the best of every reading (env.json `peaks`).

A peak is what the machine can do: the most it was seen to do. Read once when the run starts (harness.measure.peaks),
on a shared machine (a CI runner, a laptop with a build running) it can catch another process's load: 26 GFLOP/s
fp32 on a loaded 2-core machine that does 125 idle, and every share of peak of that run would then be read against
the loaded moment (a cell timed later on the quiet machine ran at 1.37 x "its peak"). So beside each workload, when
its first ok cell's roofline is worked out (right after its timing), the figures that bound its cells are timed
again, cheaply: only the library that was fastest at the start, for the precisions those cells need, and the memory
bandwidth, each the best of AGAIN_REPS (about a second on a 2-core CPU); and each figure is the best of every reading
so far. The record's `roofline.peaks_source` says which readings its peaks are the best of; env.json's `peaks`
holds the best so far and every reading (`readings`), so the report's roofs are the run's best.

A precision no cell of the run needs (bf16 in a run of fp32 cells) is never read again: its figure is the start's
one reading, and its `how` says so (`start_only` lists them); where the readings beside the workloads show that the
start was under load (a figure read again at least LOADED_RATIO times its start's), it says that too, with the
figures: such a peak is likely low by as much (bf16 read 40x low beside a busy machine).

Never raises: a figure that cannot be read again keeps its best so far.
"""

from __future__ import annotations

import copy
import logging
import time
from typing import Any

from harness.measure import peaks as start_peaks

log = logging.getLogger(__name__)

#: timed products (and triad or copy passes) of a reading beside a workload, after a warm-up
AGAIN_REPS = 3
#: env.json `peaks`'s statistic once a workload's reading is in
STATISTIC = (
    "each figure the best of the machine's readings: when the run started and beside each workload (`readings`, "
    "harness.measure.peak_readings); each reading the best of its timed products after a warm-up"
)
START = "the run's start"
#: a figure read again beside a workload at least this many times the start's reading of it says the machine was
#: slower at the start than it can be: another process's load, or the drift these shared machines show (2x within a
#: minute); whatever the cause, a figure read only then is low by as much
LOADED_RATIO = 1.5
#: what a figure read only at the start has after its `how`
_START_ONLY = "; read only at the run's start"


def _fastest_library(section: dict, prec: str) -> str | None:
    """The library whose product was fastest at `prec` in the start's reading (its `candidates`)."""
    rates = (section.get("candidates") or {}).get(prec) or {}
    known = {k: v for k, v in rates.items() if isinstance(v, int | float)}
    return max(known, key=lambda k: known[k]) if known else None


def _cpu(section: dict, precisions: tuple[str, ...], threads: int) -> tuple[dict, dict, dict]:
    rates, hows, reasons = {}, {}, {}
    for prec in precisions:
        name = _fastest_library(section, prec)
        entry = next((e for e in start_peaks.CPU_LIBRARIES.get(prec, ()) if e[0] == name), None)
        if entry is None:
            continue
        _, what, build = entry
        try:
            make, threads_ctx = build(threads)
            with threads_ctx as at:
                rate, n = start_peaks._product_rate(
                    make, start_peaks.CPU_SIZES, start_peaks.MAX_REP_S["cpu"], reps=AGAIN_REPS
                )
            rates[prec], hows[prec] = rate, f"{what.format(n=n)} at {at}, the best of {AGAIN_REPS}"
        except Exception as e:  # a figure not read again keeps its best so far
            reasons[prec] = start_peaks._failed(e)
    try:
        rates["bandwidth"], hows["bandwidth"] = start_peaks._triad_cpu(threads, AGAIN_REPS * 2)
    except Exception as e:
        reasons["bandwidth"] = start_peaks._failed(e)
    return rates, hows, reasons


def _cuda(precisions: tuple[str, ...]) -> tuple[dict, dict, dict]:
    import torch

    return start_peaks.cuda_rates(torch.device("cuda", 0), precisions, AGAIN_REPS)


def read_again(peaks: dict, kind: str, precisions: tuple[str, ...], threads: int) -> dict:
    """One reading of `kind`'s (`cpu`, `cuda`) compute peaks at `precisions` (those the start measured) and its
    bandwidth: {kind, compute: {precision: rate}, bandwidth, how, null_reasons, seconds}. Never raises."""
    t0 = time.perf_counter()
    section = peaks.get(kind) if isinstance(peaks.get(kind), dict) else {}
    wanted = tuple(p for p in precisions if p in (section.get("compute") or {}))
    try:
        if kind == "cpu":
            rates, hows, reasons = _cpu(section, wanted, threads)
        else:
            rates, hows, reasons = _cuda(wanted)
    except Exception as e:  # never stop a cell for its peaks
        log.exception("reading the %s peaks again failed", kind)
        rates, hows, reasons = {}, {}, {"reading": start_peaks._failed(e)}
    out: dict[str, Any] = {
        "kind": kind,
        "compute": {p: round(v) for p, v in rates.items() if p != "bandwidth"},
        "bandwidth": round(rates["bandwidth"]) if "bandwidth" in rates else None,
        "how": hows,
    }
    if reasons:
        out["null_reasons"] = reasons
    out["seconds"] = round(time.perf_counter() - t0, 3)
    return out


def _start_reading(peaks: dict, kind: str) -> dict:
    section = peaks[kind]
    return {
        "at": START,
        "kind": kind,
        "compute": dict(section.get("compute") or {}),
        "bandwidth": section.get("bandwidth"),
        "seconds": section.get("seconds"),
    }


def best_of(peaks: dict, reading: dict, at: str) -> dict:
    """`peaks` (env.json's, as the run has them so far) with `reading`, taken beside the workload `at`, in: each
    figure of its kind the higher of the two (its `how` saying so when the new one is), the reading appended to
    `readings` (after the start's own, the first time). A new dict; `peaks` is left alone."""
    kind = reading["kind"]
    out = copy.deepcopy(peaks)
    section = out.get(kind)
    if not isinstance(section, dict):
        return out
    readings = out.setdefault("readings", [])
    if not any(r.get("kind") == kind for r in readings):
        readings.append(_start_reading(peaks, kind))
    readings.append({"at": f"beside {at}", **{k: v for k, v in reading.items() if k != "how"}})
    out["statistic"] = STATISTIC
    compute = section.setdefault("compute", {})
    how = section.setdefault("how", {})
    for prec, rate in reading["compute"].items():
        if rate > (compute.get(prec) or 0):
            compute[prec] = rate
            how[prec] = f"{reading['how'][prec]}, read beside {at} (the best of the run's readings)"
    if reading["bandwidth"] is not None and reading["bandwidth"] > (section.get("bandwidth") or 0):
        section["bandwidth"] = reading["bandwidth"]
        how["bandwidth"] = f"{reading['how']['bandwidth']}, read beside {at} (the best of the run's readings)"
    _label_start_only(out, kind)
    return out


def _figure(reading: dict, key: str) -> float | None:
    value = reading.get("bandwidth") if key == "bandwidth" else (reading.get("compute") or {}).get(key)
    return (
        float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else None
    )


def start_load(readings: list[dict]) -> tuple[str, float, float] | None:
    """(figure, the start's reading, the best beside a workload) of the figure read again that rose the most from
    the start, when it rose at least LOADED_RATIO times: the start was taken under load. None otherwise."""
    start = next((r for r in readings if r.get("at") == START), None)
    later = [r for r in readings if r.get("at") != START]
    if start is None or not later:
        return None
    keys = {k for r in later for k in (r.get("compute") or {})} | {"bandwidth"}
    rises = []
    for key in sorted(keys):
        first = _figure(start, key)
        best = max((v for r in later if (v := _figure(r, key)) is not None), default=None)
        if first and best and best / first >= LOADED_RATIO:
            rises.append((best / first, key, first, best))
    if not rises:
        return None
    _, key, first, best = max(rises)
    return key, first, best


def _label_start_only(peaks: dict, kind: str) -> None:
    """Say in `how` (and list in `start_only`) each figure of `kind` no reading beside a workload took: the start's
    one reading, and whether the later readings show the start was under load."""
    section = peaks[kind]
    readings = [r for r in peaks.get("readings") or [] if r.get("kind") == kind]
    again = {k for r in readings if r.get("at") != START for k in (r.get("compute") or {})}
    only = [p for p in section.get("compute") or {} if p not in again]
    if not only:
        section.pop("start_only", None)
        return
    loaded = start_load(readings)
    how = section.setdefault("how", {})
    for prec in only:
        label = f"{_START_ONLY} (no cell of this run needs {prec}, so it was not read again)"
        if loaded is not None:
            key, first, best = loaded
            unit = "GB/s" if key == "bandwidth" else "G/s"
            label += (
                f"; the readings beside the workloads show the machine was under load at the start ({key} "
                f"{first / 1e9:.4g} then {best / 1e9:.4g} {unit}, {best / first:.1f}x): this figure is likely low "
                "by as much"
            )
        how[prec] = str(how.get(prec) or "").split(_START_ONLY)[0] + label
    section["start_only"] = {"precisions": only, "start_under_load": loaded is not None}


def readings_of(peaks: dict, kind: str) -> int:
    """How many readings of `kind`'s peaks `peaks` holds (1 when only the start's)."""
    return max(1, sum(1 for r in peaks.get("readings") or [] if r.get("kind") == kind))
