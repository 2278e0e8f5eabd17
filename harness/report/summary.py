"""summary.json (machine-readable) and summary.md (for CI job summaries) from the same report content."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from harness.core.results_dir import dig
from harness.core.safe_text import page_text
from harness.decide.index import RunIndex
from harness.decide.load import finite, p50

log = logging.getLogger(__name__)

SUMMARY_SCHEMA = 1


def summary_json(content: dict[str, Any], indexes: list[RunIndex]) -> str:
    """Counts, per-cell verdicts, use cases (their picks and evidence), claims and regressions; numbers exactly as recorded."""
    cells = []
    for idx in indexes:
        for rec in idx.all_records():
            cells.append(
                {
                    "run_id": idx.run.run_id,
                    "cell_id": rec.cell_id,
                    "backend": rec.backend,
                    "device": rec.device,
                    "status": rec.status,
                    "failure_class": dig(rec.failure, "class"),
                    "remedy": rec.remedy,
                    "remedy_of": rec.remedy_of,
                    "remedy_works": idx.working_remedy(rec) is not None if rec.status != "ok" else None,
                    "p50_ms": p50(rec),
                    "throughput_ips": finite(rec.throughput_ips),
                }
            )
    doc = {
        "summary_schema": SUMMARY_SCHEMA,
        "report_id": content["report_id"],
        "runs": [
            {
                "run_id": h.run_id,
                "path": h.path,
                "started_at": h.started_at,
                "git_commit": h.git_commit,
                "machine": h.machine,
                "weights": h.weights,
                "random_init": h.random_init,
                "synthetic": h.synthetic,
                "integrity": h.integrity,
            }
            for h in content["headers"]
        ],
        "verdicts": {v.label: v.as_dict() for v in content["verdicts"]},
        "constraints": content["constraints"],
        "decision": [
            {
                "key": row.key,
                "title": row.title,
                "objective": row.objective,
                "constraint": row.constraint,
                "answers": [dict(a.__dict__) for a in row.answers],
                "across_machines": row.span,
            }
            for row in content["decision"]
        ],
        "use_cases": [r.as_dict() for r in content["use_cases"]],
        "claims": [c.as_dict() for c in content["claims"]],
        "regressions": [r.__dict__ for r in content["regressions"]]
        if content["regressions"] is not None
        else None,
        "cells": cells,
    }
    return json.dumps(doc, indent=1, allow_nan=False, default=str) + "\n"


def md(text: object) -> str:
    """Escape text from records for markdown that GitHub renders (it also renders inline HTML): whitespace folded
    to single spaces (a newline cannot start a line of its own), control and bidirectional characters escaped
    (safe_text.page_text)."""
    s = page_text(" ".join(str(text).split()))
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return re.sub(r"([\\`*_\[\]|#])", r"\\\1", s)


def summary_md(content: dict[str, Any]) -> str:
    """A short markdown summary for CI job summaries (record strings escaped for GitHub's renderer)."""
    lines = [f"# yolo26-bench report {md(content['report_id'])}", ""]
    for h in content["headers"]:
        lines.append(
            f"- run {md(h.run_id)} ({md(h.started_at)}, commit {md(h.git_commit)}) on {md(h.machine)}"
        )
        for note in h.integrity:
            lines.append(f"  - **not whole**: {md(note)}")
        if h.synthetic:
            lines.append("  - **synthetic data**: generated figures, not measurements of any machine")
        if h.random_init:
            lines.append(
                "  - **weights are random-init**: accuracy is meaningless; latency and compatibility hold"
            )
    lines += ["", "## What to ship, per use case", ""]
    columns = content["decision_columns"]
    for row in content["decision"]:
        said = []
        for n, a in enumerate(row.answers):
            where = "" if row.span else f"{md(columns[n].label)}: "
            if a.state == "pick":
                said.append(f"{where}{md(a.backends[0])}/{md(a.device)} ({md(a.figure)})")
            elif a.state == "tied":
                said.append(f"{where}tied {md(', '.join(a.labels or a.backends))} ({md(a.note)})")
            else:
                said.append(
                    f"{where}{'not measured' if a.state == 'not-measured' else 'no pick'} ({md(a.note)})"
                )
        lines.append(f"- **{md(row.title)}**: " + "; ".join(said))
        lines += [f"  - {md(line)}" for a in row.answers for line in a.lines]
    lines += ["", f"Every pick meets: {md(content['constraints'])}."]
    lines += ["", "## Verdicts", "", "| machine | cells | ok | failed | skipped | exported-only | remedied |"]
    lines.append("|---|---:|---:|---:|---:|---:|---:|")
    for v in content["verdicts"]:
        lines.append(
            f"| {md(v.label)} | {v.total} | {v.ok} | {v.failed} | {v.skipped} | {v.exported} | {v.remedied} |"
        )
    classes = {k: n for v in content["verdicts"][-1:] for k, n in v.failed_by_class.items()}
    if classes:
        lines += ["", "Failures by class: " + ", ".join(f"{md(k)} {n}" for k, n in classes.items())]
    lines += ["", "## Use cases: the evidence", ""]
    for r in content["use_cases"]:
        title = md(r.title) + (f" on {md(r.machine)}" if r.machine else "")
        if r.tied:
            names = ", ".join(
                f"{md(t.backend)}/{md(t.device)} on {md(t.machine)} ({md(t.numbers)}"
                + (f"; {md(t.host_bound)}" if t.host_bound else "")
                + ")"
                for t in r.tied
            )
            lines.append(f"- **{title}**: tied, no winner ({md(r.tie_reason)}): {names}")
            continue
        if r.winner is None:
            lines.append(f"- **{title}**: {md(r.none_reason)}")
            continue
        w, u = r.winner, r.runner_up
        text = f"- **{title}**: {md(w.backend)}/{md(w.device)} on {md(w.machine)} ({md(w.numbers)})"
        if w.host_bound:
            text += f"; {md(w.host_bound)}"
        if u:
            text += f"; runner-up {md(u.backend)}/{md(u.device)} on {md(u.machine)} ({md(u.numbers)})"
        if r.rejected:
            text += f"; rejected: {md(r.rejected)}"
        lines.append(text)
    claims = content["claims"]
    counts: dict[str, int] = {}
    for c in claims:
        counts[c.verdict] = counts.get(c.verdict, 0) + 1
    lines += ["", "## Claims check", "", ", ".join(f"{n} {v}" for v, n in sorted(counts.items())), ""]
    lines += ["| claim | seed | verdict |", "|---|---|---|"]
    # a verdict a fake-device trace decided says so here too
    lines += [
        f"| {md(c.claim)} | {md(c.seed)} | {md(c.verdict)}"
        + (f" ({md(c.basis)})" if c.basis != "measured" else "")
        + " |"
        for c in claims
        if c.verdict not in ("not measurable", "not comparable here", "untestable")
    ]
    regs = content["regressions"]
    if regs:
        lines += ["", "## Regressions", "", "| cell | machine | kind | baseline | current | change |"]
        lines.append("|---|---|---|---|---|---|")
        lines += [
            f"| {md(r.cell_id)} | {md(r.machine or '-')} | {md(r.kind)} | {md(r.baseline)} | {md(r.current)} "
            f"| {md(r.change_pct)} |"
            for r in regs
        ]
    return "\n".join(lines) + "\n"
