"""Markdown rendering of comparisons, for CI job summaries ($GITHUB_STEP_SUMMARY) and pull-request comments."""

from __future__ import annotations

import logging

from harness.history.compare import Comparison, Finding

log = logging.getLogger(__name__)

# Long lists (new or vanished cells) fold away beyond this many entries.
FOLD_AFTER = 10


def _cell(text: object) -> str:
    """A value made safe for a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _value(value: float | str | None, kind: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    return f"{value:.3f} ms" if kind == "latency" else f"{value:.0f} MiB"


def _table(findings: list[Finding]) -> list[str]:
    head = ["cell", "kind", "baseline", "current", "change", "detail"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for f in findings:
        row = [
            f"`{f.cell_id}`",
            f.kind,
            _value(f.baseline, f.kind),
            _value(f.current, f.kind),
            "-" if f.change_pct is None else f"{f.change_pct:+.1f}%",
            f.detail,
        ]
        lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
    return lines


def _cell_list(title: str, cells: list[str]) -> list[str]:
    if not cells:
        return []
    items = [f"- `{c}`" for c in cells]
    if len(cells) <= FOLD_AFTER:
        return [f"### {title} ({len(cells)})", "", *items, ""]
    return [f"<details><summary><b>{title} ({len(cells)})</b></summary>", "", *items, "", "</details>", ""]


def render_comparison(c: Comparison) -> str:
    """One run on one machine: summary line, then regressions, improvements, status changes, new, vanished."""
    lines = [f"## Regression check: run `{c.run_id}` on `{c.machine}`", ""]
    lines.append(f"Series `{c.series_id}`: {c.series_label}  ")
    lines.append(f"Baseline: {c.baseline}")
    lines.append("")
    if not c.has_history:
        lines += [*(f"_{n}_" for n in c.notes), ""]
        return "\n".join(lines)
    # A run without regressions passes only when the series was long enough for latency to be judged.
    verdict = (
        "**FAIL**" if c.regressions else "**PASS**" if c.state == "judged" else "**INSUFFICIENT HISTORY**"
    )
    lines.append(
        f"{verdict}: {len(c.regressions)} regression(s), {len(c.improvements)} improvement(s), "
        f"{len(c.status_changes)} other status change(s), {len(c.unjudged)} unjudged, {len(c.new_cells)} new, "
        f"{len(c.vanished_cells)} vanished; {c.compared} cell(s) compared"
    )
    lines.append("")
    for title, findings in (
        ("Regressions", c.regressions),
        ("Improvements", c.improvements),
        ("Other status changes (not failing)", c.status_changes),
        ("Latency not judged (too few rounds, or insufficient history; not failing)", c.unjudged),
    ):
        if findings:
            lines += [f"### {title} ({len(findings)})", "", *_table(findings), ""]
    lines += _cell_list("New cells", c.new_cells)
    lines += _cell_list("Vanished cells", c.vanished_cells)
    if c.notes:
        lines += ["### Notes", "", *(f"- {_cell(n)}" for n in c.notes), ""]
    return "\n".join(lines)


def render(comparisons: list[Comparison]) -> str:
    """All comparisons of one invocation (one per machine of the run) as one Markdown document."""
    if not comparisons:
        return "## Regression check\n\n_No run to compare._\n"
    return "\n".join(render_comparison(c) for c in comparisons)
