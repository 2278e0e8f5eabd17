"""The report's operator view: per workload, one operator x backend table of where each operator ran (execution
provider, kernel implementation or delegate), its share of the profiled time, and what fell back.

Each record (a CellRecord) carries the section harness.diagnosis.operators writes (`rec.operators`), or the reason
its runtime cannot tell (`rec.null_reasons["operators"]`). Operators keep each runtime's own names (ONNX op types,
OpenVINO plugin layers, XNNPACK operators, ExecuTorch kernels), so one row is usually filled by one runtime: the table
lines them up per workload rather than pretending the names match. Rows with a fallback in any backend come first.
"""

from __future__ import annotations

import html

from harness.core.record import CellRecord

#: the record fields that make a workload: records with equal values ran the same computation
WORKLOAD_FIELDS = ("size", "task", "head", "height", "width", "batch", "precision_requested", "family")

_STYLE = """<style>
.opv{table-layout:fixed;border-collapse:collapse;max-width:1380px;font-size:12px;margin:0 0 18px}
.opv caption{text-align:left;font-weight:600;padding:4px 0}
.opv th,.opv td{border:1px solid #ddd;padding:2px 5px;vertical-align:top;text-align:left;overflow-wrap:anywhere}
.opv thead th{background:#f4f4f4;width:190px}
.opv thead th.opv-op{width:230px}
.opv tr.opv-fb>th{color:#a00}
.opv td.opv-fb{background:#fde8e8}
.opv .opv-share{color:#555}
.opv tfoot td,.opv tfoot th{background:#fafafa;font-size:11px}
</style>"""


def render_operators(records: list[CellRecord]) -> str:
    """An HTML fragment: one operator x backend table per workload, its footer the backends that could not tell."""
    groups: dict[tuple, list[CellRecord]] = {}
    for rec in records:
        groups.setdefault(workload_of(rec), []).append(rec)
    if not groups:
        return '<p class="opv-none">No records: no operator view.</p>'
    tables = [_table(key, recs) for key, recs in sorted(groups.items(), key=lambda kv: _sort_key(kv[0]))]
    return _STYLE + "\n" + "\n".join(tables)


def workload_of(rec: CellRecord) -> tuple:
    """The workload key of a record (WORKLOAD_FIELDS' values)."""
    return (
        rec.size,
        rec.task,
        rec.head,
        rec.height,
        rec.width,
        rec.batch,
        rec.precision_requested,
        rec.family,
    )


def _sort_key(key: tuple) -> tuple:
    return tuple("" if v is None else (f"{v:08d}" if isinstance(v, int) else str(v)) for v in key)


def workload_label(key: tuple) -> str:
    """A workload as a caption: yolo26n detect e2e 320x320 b1 fp32."""
    size, task, head, h, w, batch, precision, family = key
    shape = f"{h}x{w}" if h and w else "dynamic"
    return f"{family}{size} {task} {head} {shape} b{batch} {precision}"


def _columns(recs: list[CellRecord]) -> list[tuple[str, dict]]:
    """(label, operator section) of the records that carry one; a repeated backend/device gets #n."""
    seen: dict[str, int] = {}
    out = []
    for rec in recs:
        if not isinstance(rec.operators, dict):
            continue
        label = f"{rec.backend}/{rec.device}" if rec.device else rec.backend
        seen[label] = seen.get(label, 0) + 1
        out.append((label if seen[label] == 1 else f"{label} #{seen[label]}", rec.operators))
    return out


def _cannot_tell(recs: list[CellRecord]) -> list[tuple[str, str]]:
    """(backend, reason) of the records without an operator section."""
    out = []
    for rec in recs:
        if isinstance(rec.operators, dict):
            continue
        reason = rec.null_reasons.get("operators")
        if not reason:
            reason = f"no operator view recorded (status {rec.status})"
        out.append((rec.backend, str(reason)))
    return out


def _rows(columns: list[tuple[str, dict]]) -> list[tuple[str, bool, list[list[dict]]]]:
    """(operator, fell back anywhere, per column the section's entries of that operator); fallbacks first, then
    by the largest time share in any backend."""
    by_op: dict[str, list[list[dict]]] = {}
    for i, (_, section) in enumerate(columns):
        for entry in section.get("ops") or []:
            cells = by_op.setdefault(str(entry.get("op")), [[] for _ in columns])
            cells[i].append(entry)
    rows = []
    for op, cells in by_op.items():
        entries = [e for c in cells for e in c]
        fallback = any(e.get("fallback") for e in entries)
        top = max((e.get("time_share") or 0.0 for e in entries), default=0.0)
        rows.append((op, fallback, cells, top))
    rows.sort(key=lambda r: (not r[1], -r[3], r[0]))
    return [(op, fb, cells) for op, fb, cells, _ in rows]


def _pct(share) -> str:
    if share is None:
        return ""
    if share <= 0:
        return "0%"
    return f"{share * 100:.1f}%" if share >= 0.001 else "<0.1%"


def _entry(entry: dict) -> str:
    count = entry.get("count")
    parts = [html.escape(str(entry.get("where")))]
    if count is not None:
        parts.append(f"×{int(count)}")
    text = " ".join(parts)
    share = _pct(entry.get("time_share"))
    if share:
        text += f' <span class="opv-share">{share}</span>'
    return f"<div>{text}</div>"


def _cell(entries: list[dict]) -> str:
    if not entries:
        return "<td></td>"
    cls = ' class="opv-fb"' if any(e.get("fallback") for e in entries) else ""
    return f"<td{cls}>{''.join(_entry(e) for e in entries)}</td>"


def _summary(section: dict) -> str:
    """A backend's fallback in one line (nodes and share of the time), and how the runtime was read, folded."""
    total, fb = section.get("total_ops"), section.get("fallback_ops")
    text = f"{fb} of {total} nodes" if total is not None and fb is not None else "n/a"
    share = section.get("fallback_time_share")
    if share is not None:
        text += f", {_pct(share)} of the time"
    source = html.escape(str(section.get("source") or "not recorded"))
    return f"{html.escape(text)}<details><summary>how read</summary>{source}</details>"


def _table(key: tuple, recs: list[CellRecord]) -> str:
    columns = _columns(recs)
    width = len(columns) + 1
    head = "".join(
        f'<th title="{html.escape(str(section.get("source", "")))}">{html.escape(label)}</th>'
        for label, section in columns
    )
    body = []
    for op, fallback, cells in _rows(columns):
        cls = ' class="opv-fb"' if fallback else ""
        body.append(f"<tr{cls}><th>{html.escape(op)}</th>{''.join(_cell(c) for c in cells)}</tr>")
    foot = []
    if columns:
        summary = "".join(f"<td>{_summary(section)}</td>" for _, section in columns)
        foot.append(f"<tr><th>fallback</th>{summary}</tr>")
    missing = _cannot_tell(recs)
    if missing:
        reasons = "; ".join(f"<b>{html.escape(b)}</b>: {html.escape(r)}" for b, r in missing)
        foot.append(
            f'<tr class="opv-unknown"><th>could not tell</th><td colspan="{max(width - 1, 1)}">{reasons}</td></tr>'
        )
    return (
        f'<table class="opv"><caption>{html.escape(workload_label(key))}</caption>'
        f'<thead><tr><th class="opv-op">operator</th>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody><tfoot>{''.join(foot)}</tfoot></table>"
    )
