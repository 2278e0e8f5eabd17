"""The report stage: records of one or more runs in, one self-contained HTML report (plus summaries) out.

`render_report(result_dirs, out_root, history)` writes reports/<report_id>/index.html, summary.json,
summary.md and decision.json, and refreshes reports/latest/. The HTML has inline CSS and inline SVG plots only, so it reads from
file:// offline.
"""

from __future__ import annotations

from pathlib import Path


def render_report(
    result_dirs: list[Path],
    out_root: Path = Path("reports"),
    history: dict | None = None,
    floors: dict[str, float] | None = None,
    memory_cap_mib: float | None = None,
    cons=None,
) -> Path:
    """Render the runs in `result_dirs` side by side and return the path of the written index.html; `floors` and
    `memory_cap_mib` are the constraints every recommendation applies (accuracy floor per precision, memory cap);
    `cons` (harness.decide.picks.Constraints) all of them, the camera's frame rate, server bound and
    --min-shape too, winning over the two."""
    # Imported here so that `import harness.report` (e.g. by the pytest plugin) stays cheap.
    from harness.report.render import render_report as _render

    return _render(result_dirs, out_root, history, floors, memory_cap_mib, cons)


__all__ = ["render_report"]
