"""History shown in the report: per-cell p50 sparklines and the regressions table.

The history stage (harness/history/) hands over a dict: {"trends": {cell_id: [{"run_id", "started_at", "p50"},
... oldest first]}, "regressions": [{"cell_id", "kind", "baseline", "current", "change_pct", "detail"}]}.
For a merged multi-machine run the trend keys are `cell_id@machine` and regressions carry `machine`; other keys
it adds (improvements, new cells) are not shown.
Sparklines are small hand-written inline SVGs (no plotting library for a polyline).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup, escape

from harness.report.fmt import fmt_num

log = logging.getLogger(__name__)

WIDTH, HEIGHT, PAD = 90, 20, 2


def _p50(point: Any) -> float | None:
    v = point.get("p50") if isinstance(point, dict) else None
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and v == v else None


def sparkline(points: list[dict]) -> Markup | None:
    """An inline SVG of p50 over runs (oldest left); None when no point has a p50."""
    values = [(n, _p50(p)) for n, p in enumerate(points)]
    measured = [(n, v) for n, v in values if v is not None]
    if not measured:
        return None
    lo, hi = min(v for _, v in measured), max(v for _, v in measured)
    span = (hi - lo) or 1.0
    step = (WIDTH - 2 * PAD) / max(1, len(points) - 1)

    def xy(n: int, v: float) -> tuple[float, float]:
        return PAD + n * step, HEIGHT - PAD - (v - lo) / span * (HEIGHT - 2 * PAD)

    coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in (xy(n, v) for n, v in measured))
    last_x, last_y = xy(*measured[-1])
    title = "; ".join(
        f"{p.get('run_id', '?')}: " + (f"p50 {fmt_num(v)} ms" if v is not None else "no p50")
        for p, (_, v) in zip(points, values, strict=True)
        if isinstance(p, dict)
    )
    return Markup(
        f'<svg class="spark" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img">'
        f"<title>{escape(title)}</title>"
        f'<polyline fill="none" stroke="#3567b5" stroke-width="1.2" points="{coords}"/>'
        f'<circle cx="{last_x:.1f}" cy="{last_y:.1f}" r="1.8" fill="#3567b5"/></svg>'
    )


def trend_svgs(history: dict | None) -> dict[str, Markup]:
    """Sparklines by cell id."""
    trends = history.get("trends") if isinstance(history, dict) else None
    if not isinstance(trends, dict):
        return {}
    out = {}
    for cell_id, points in trends.items():
        if isinstance(points, list):
            svg = sparkline(points)
            if svg is not None:
                out[str(cell_id)] = svg
    return out


@dataclass(frozen=True)
class RegressionView:
    """One row of the regressions table, values formatted for display."""

    cell_id: str
    machine: str
    kind: str
    baseline: str
    current: str
    change_pct: str
    detail: str


def _show(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return fmt_num(float(value))
    return str(value)


def regressions(history: dict | None) -> list[RegressionView] | None:
    """The regressions table rows; None when no history was given (the section is then left out)."""
    if not isinstance(history, dict):
        return None
    rows = []
    items = history.get("regressions")
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        change = item.get("change_pct")
        change_s = (
            f"{'+' if change >= 0 else ''}{fmt_num(float(change))}%"
            if isinstance(change, int | float) and not isinstance(change, bool)
            else _show(change)
        )
        rows.append(
            RegressionView(
                cell_id=str(item.get("cell_id", "?")),
                machine=str(item.get("machine") or ""),
                kind=str(item.get("kind", "?")),
                baseline=_show(item.get("baseline")),
                current=_show(item.get("current")),
                change_pct=change_s,
                detail=str(item.get("detail") or ""),
            )
        )
    return rows
