"""The scenario results of a record, read tolerantly: each scenario's result dict, its intervals, the end-to-end
p99 a camera is judged on, and the percentile a result was judged at. The decision reads them; the report's
scenario tables show them.
"""

from __future__ import annotations

import logging
import math

from harness.core.record import CellRecord
from harness.decide.index import RunIndex
from harness.decide.load import finite, number
from harness.decide.words import fmt_num
from harness.measure.stats import Interval

log = logging.getLogger(__name__)

SCENARIOS = ("single-stream", "multi-stream", "server", "offline", "camera")
CAMERA_FPS = 30
FRAME_MS = 1000.0 / CAMERA_FPS  # the frame time a camera use case must keep its end-to-end p99 within


def result(rec: CellRecord, name: str) -> dict | None:
    """The cell's result of scenario `name`: from `scenarios`, or its own `scenario_result` when that is the one."""
    every = rec.scenarios
    if isinstance(every, dict) and isinstance(every.get(name), dict):
        return every[name]
    if rec.scenario == name and isinstance(rec.scenario_result, dict):
        return rec.scenario_result
    return None


def measured(rec: CellRecord, name: str) -> bool:
    """Whether the record holds a result of scenario `name` that the scenario itself produced (LoadGen's, or the
    camera search's), whatever its verdict: the end-to-end timing's own single-stream summary
    (`scenario_result`) does not count."""
    every = rec.scenarios
    return isinstance(every, dict) and isinstance(every.get(name), dict)


def not_measured_why(rec: CellRecord, name: str) -> str:
    """Why the record has no result of scenario `name`: the reason it recorded (the scenario phase's, e.g. "not
    measured within the budget"), else that it has none."""
    reasons = rec.null_reasons or {}
    why = reasons.get(f"scenarios.{name}") or reasons.get("scenarios")
    return str(why) if why else f"no {name} result in the record"


def has_any(rec: CellRecord) -> bool:
    """Whether the record carries any scenario result (a record from before the scenarios has none)."""
    return any(result(rec, name) is not None for name in SCENARIOS)


def any_scenarios(indexes: list[RunIndex]) -> bool:
    return any(has_any(r) for idx in indexes for r in idx.cells)


def span(res: dict | None, key: str) -> Interval | None:
    """An interval field `[lo, hi]` of a result; an open upper end (null: nothing failed above) is infinity."""
    pair = res.get(key) if isinstance(res, dict) else None
    if not isinstance(pair, list | tuple) or len(pair) != 2:
        return None
    lo, hi = pair
    if isinstance(lo, bool) or not isinstance(lo, int | float) or not math.isfinite(lo):
        return None
    if hi is None:
        return Interval(float(lo), math.inf)
    if isinstance(hi, bool) or not isinstance(hi, int | float):
        return None
    return Interval(float(lo), float(hi))


def e2e_p99(rec: CellRecord) -> float | None:
    """The end-to-end p99 (ms) of single-stream queries, else the one of `latency_e2e_ms`."""
    value = number(result(rec, "single-stream") or {}, "p99")
    if value is not None:
        return value
    return finite(rec.latency_e2e_ms.p99) if rec.latency_e2e_ms else None


def e2e_p99_interval(rec: CellRecord) -> Interval | None:
    return span(result(rec, "single-stream"), "p99_interval")


def missed_share(rec: CellRecord, fps: int = CAMERA_FPS) -> float | None:
    """The camera check's share of frames missed at `fps` (the frame's result came after the next frame)."""
    return number(result(rec, "camera") or {}, f"fps.{fps}.missed_share")


def ran_ips(res: dict | None) -> float | None:
    """Images per second a scenario delivered: its own figure, else its queries over its duration."""
    if not res:
        return None
    for key in ("throughput_ips", "ips"):
        v = number(res, key)
        if v is not None:
            return v
    q, s = number(res, "queries"), number(res, "duration_s")
    return q / s if q and s else None


def percentile_label(res: dict | None, default: float = 0.99) -> str:
    """`p90` or `p99`: the percentile a server or multi-stream result was judged at (`percentile`; records from
    before LoadGen drove the scenarios were judged at the p99)."""
    p = number(res or {}, "percentile")
    return f"p{100 * (p if p is not None else default):g}"


def pct(share: float | None) -> str:
    return "n/a" if share is None else f"{100 * share:.1f}%"


def span_text(iv: Interval | None, digits: int = 3) -> str:
    if iv is None:
        return ""
    hi = "∞" if math.isinf(iv.hi) else fmt_num(iv.hi, digits)
    return f"{fmt_num(iv.lo, digits)}–{hi}"
