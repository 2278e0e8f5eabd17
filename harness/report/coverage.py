"""What a night covered: of the profile its plan (env.json `plan`, harness.plan.budget) ran within its time
budget, how many cells were measured tonight, when each of the others was last measured (the history's
`last_measured`, by date), and the coverage age of the oldest. A run without a plan has no such section."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from harness.decide.index import RunIndex


@dataclass
class CoverageView:
    """One run's coverage: counts, the left-out cells by the date they were last measured, the oldest's age."""

    run_id: str
    profile_cells: int
    measured: int  # cells with a record that is not a skip
    skips: int  # records that are skips (here, or excluded)
    left_out: int
    budget: str
    period: str
    by_date: list[tuple[str, int]] = field(default_factory=list)  # (YYYY-MM-DD or "never", cells)
    oldest_age: str = (
        ""  # "12 days (2026-11-13)", "never measured: 40 cells", or "" when nothing was left out
    )
    history_note: str = ""


def _age(since: str, now: str) -> str:
    try:
        days = (datetime.fromisoformat(now) - datetime.fromisoformat(since)).total_seconds() / 86400
    except (ValueError, TypeError, OverflowError):  # not ISO 8601; one with an offset and one without
        return f"since {since}"
    return f"{days:.0f} day{'s' if round(days) != 1 else ''} ({since[:10]})"


def _count(value: object) -> int:
    """A count from env.json's plan: a whole number, else 0."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or value != value
        or abs(value) == float("inf")
    ):
        return 0
    return int(value)


def night_coverage(indexes: list[RunIndex], history: dict | None) -> list[CoverageView]:
    """A CoverageView per rendered run whose env.json holds a plan."""
    last = history.get("last_measured") if isinstance(history, dict) else None
    last = last if isinstance(last, dict) else {}  # both are JSON from files: read tolerantly
    out = []
    for idx in indexes:
        plan = idx.run.env.get("plan")
        if not isinstance(plan, dict):
            continue
        left_out = plan.get("left_out")
        groups = left_out.values() if isinstance(left_out, dict) else []
        left = [str(c) for ids in groups if isinstance(ids, list) for c in ids]
        dates: dict[str, int] = {}
        seen = []
        for c in left:
            at = last.get(c)
            at = at if isinstance(at, str) else None
            dates[at[:10] if at else "never"] = dates.get(at[:10] if at else "never", 0) + 1
            if at:
                seen.append(at)
        never = dates.get("never", 0)
        now = str(idx.run.env.get("started_at") or "")
        if never and not last:
            oldest = f"not known: no history was given ({never} cells left out)"
        elif never:
            oldest = f"never measured: {never} cells"
        elif seen:
            oldest = _age(min(seen), now)
        else:
            oldest = ""
        out.append(
            CoverageView(
                run_id=idx.run.run_id,
                profile_cells=_count(plan.get("profile_cells")),
                measured=sum(1 for r in idx.cells if r.status != "skipped"),
                skips=sum(1 for r in idx.cells if r.status == "skipped"),
                left_out=len(left),
                budget=str(plan.get("budget") or plan.get("budget_s")),
                period=str(plan.get("period") or ""),
                by_date=sorted(dates.items(), key=lambda kv: (kv[0] != "never", kv[0])),
                oldest_age=oldest,
                history_note=""
                if last
                else "no history given (`report --history`): last-measured dates unknown",
            )
        )
    return out
