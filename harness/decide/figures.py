"""The figures and constraint checks of each use case, read from its scenario's result in a record: what a
pick shows (`*_figure`, short, for the first screen; `*_numbers`, in full, for the evidence) and why a cell fails
the use case's own constraint (`*_check`: None when it meets it, else the failing figure against the limit).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

from harness.core.record import CellRecord
from harness.decide.load import finite, number, p50
from harness.decide.picks import memory_figures
from harness.decide.scenario_results import (
    CAMERA_FPS,
    FRAME_MS,
    e2e_p99,
    e2e_p99_interval,
    missed_share,
    pct,
    percentile_label,
    result,
    span,
    span_text,
)
from harness.decide.words import fmt_num

log = logging.getLogger(__name__)


def invalid(name: str) -> Callable[[CellRecord], str | None]:
    """The scenario's own verdict: a result that is not valid under its rule (too few queries, ...)."""

    def check(rec: CellRecord) -> str | None:
        res = result(rec, name) or {}
        if res.get("valid") is False:
            return (
                f"{name} result not valid under its rule ({res.get('rule') or 'no rule recorded'}): to decide, "
                "measure it again with more queries or a longer run"
            )
        return None

    return check


# -- camera ------------------------------------------------------------------------------------------------------
def camera_check(rec: CellRecord) -> str | None:
    p99 = e2e_p99(rec)
    if p99 is None:
        return "no end-to-end p99 recorded"
    if p99 > FRAME_MS:
        return f"e2e p99 {fmt_num(p99)} ms over the {fmt_num(FRAME_MS)} ms frame time at {CAMERA_FPS} FPS"
    return None


def camera_figure(rec: CellRecord) -> str:
    missed = missed_share(rec)
    tail = f", {pct(missed)} of frames missed at {CAMERA_FPS} FPS" if missed is not None else ""
    return f"e2e p99 {fmt_num(e2e_p99(rec) or 0)} ms ≤ {fmt_num(FRAME_MS)} ms{tail}"


def camera_numbers(rec: CellRecord) -> str:
    res = result(rec, "single-stream") or {}
    ci = span_text(e2e_p99_interval(rec))
    parts = [f"e2e p99 {fmt_num(e2e_p99(rec) or 0)} ms" + (f" (95% CI {ci})" if ci else " (no interval)")]
    e2e_p50 = number(res, "p50") or (finite(rec.latency_e2e_ms.p50) if rec.latency_e2e_ms else None)
    if e2e_p50 is not None:
        parts.append(f"e2e p50 {fmt_num(e2e_p50)} ms")
    model = p50(rec)
    if model is not None:
        parts.append(f"model-only p50 {fmt_num(model)} ms")
    cam = [(fps, missed_share(rec, fps)) for fps in (30, 60)]
    said = [f"{pct(m)} at {fps} FPS" for fps, m in cam if m is not None]
    parts.append("frames missed " + ", ".join(said) if said else "camera check not run for this cell")
    queries = number(res, "queries")
    if queries is not None:
        parts.append(f"{int(queries)} queries")
    return ", ".join(parts)


# -- server ------------------------------------------------------------------------------------------------------
def server(rec: CellRecord) -> dict:
    return result(rec, "server") or {}


def server_check(rec: CellRecord) -> str | None:
    res = server(rec)
    rate, bound = number(res, "value"), number(res, "bound_ms")
    if rate is None or rate <= 0:
        tried = [t for t in res.get("tried") or [] if isinstance(t, dict)]
        low = min(tried, key=lambda t: number(t, "rate") or math.inf) if tried else None
        label = percentile_label(res)
        figure = number(low, "target_ms") if low else None
        figure = figure if figure is not None else (number(low, "p99_ms") if low else None)
        said = (
            f": at the lowest rate tried, {fmt_num(number(low, 'rate') or 0)} q/s, {label} was "
            f"{fmt_num(figure or 0)} ms"
            if low
            else ""
        )
        why = f" ({low['reason']})" if low and isinstance(low.get("reason"), str) else ""
        return f"no rate kept {label} within {fmt_num(bound or 0)} ms{said}{why}"
    return None


def server_bound(recs: list[CellRecord]) -> str:
    bounds = sorted({b for r in recs if (b := number(server(r), "bound_ms")) is not None})
    said = " or ".join(f"{fmt_num(b)} ms" for b in bounds) or "the recorded bound"
    labels = sorted({percentile_label(server(r)) for r in recs}) or ["p99"]
    return f"{' or '.join(labels)} within {said} at the rate served"


def server_figure(rec: CellRecord) -> str:
    res = server(rec)
    label = percentile_label(res)
    return f"{fmt_num(number(res, 'value') or 0)} q/s at {label} ≤ {fmt_num(number(res, 'bound_ms') or 0)} ms"


def server_numbers(rec: CellRecord) -> str:
    res = server(rec)
    text = server_figure(rec)
    iv = span(res, "rate_interval")
    if iv is not None:
        text += f" (passes at {fmt_num(iv.lo)}, " + (
            "no rate tried failed)" if math.isinf(iv.hi) else f"fails at {fmt_num(iv.hi)} q/s)"
        )
    tried = len([t for t in res.get("tried") or [] if isinstance(t, dict)])
    if tried:
        text += f"; {tried} rates tried"
    if res.get("concurrency") is not None:
        text += f"; concurrency {res['concurrency']}"
    if res.get("mechanism"):
        text += f" ({res['mechanism']})"
    return text


# -- offline -----------------------------------------------------------------------------------------------------
def offline(rec: CellRecord) -> dict:
    return result(rec, "offline") or {}


def offline_check(rec: CellRecord) -> str | None:
    return None if number(offline(rec), "value") else "no images/s recorded"


def offline_figure(rec: CellRecord) -> str:
    res = offline(rec)
    b, c = number(res, "batch"), number(res, "concurrency")
    how = f" at batch {int(b)} × {int(c)} concurrent" if b and c else ""
    return f"{fmt_num(number(res, 'value') or 0)} img/s{how}"


def offline_numbers(rec: CellRecord) -> str:
    res = offline(rec)
    ci = span_text(span(res, "ips_interval"))
    sweep = len([s for s in res.get("sweep") or [] if isinstance(s, dict)])
    # LoadGen's offline rounds give the range of their images/s (coverage in the record); older records a 95% CI
    cover = number(res, "ips_interval_coverage")
    said = f"{100 * cover:.0f}% interval, the rounds' range" if cover is not None else "95% CI"
    return (
        offline_figure(rec)
        + (f" ({said} {ci})" if ci else " (no interval)")
        + (f"; fewest of {sweep} concurrency settings within the best's interval" if sweep else "")
    )


# -- memory ------------------------------------------------------------------------------------------------------
def memory_figure(rec: CellRecord) -> str:
    host, dev = memory_figures(rec)
    text = f"host peak RSS {fmt_num(host or 0)} MiB"
    return text + (f", device peak {fmt_num(dev)} MiB" if dev is not None else "")


def memory_numbers(rec: CellRecord) -> str:
    model = p50(rec)
    return memory_figure(rec) + (f", model-only p50 {fmt_num(model)} ms" if model is not None else "")
