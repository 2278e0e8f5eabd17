"""The compatibility matrix: one table per input shape (and one for the dynamic probe).

Rows are size and task (with head, batch and requested precision); columns are backends grouped by device,
grouped by machine (one group per rendered run). Each cell shows a status badge and what explains it.

A device of which no cell ran on a machine (no CUDA on a CPU machine: half the cells of a CPU run) is folded out
of the matrices into one line per device with the reasons, and so is a backend that ran no cell on a device that
ran others (a profile that leaves it out); the cells stay listed, collapsed, under that line.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from harness.core.null_reasons import FAKE_LABEL
from harness.core.record import TRACED_STATUSES, CellRecord
from harness.core.results_dir import dig
from harness.decide.index import DEVICE_ORDER, RunIndex, backend_order, order_key, row_key, row_sort
from harness.decide.index import machine_label as machine_label
from harness.decide.index import row_label as row_label
from harness.decide.load import finite, is_failed, null_reason, number, p50, run_shape, shape_label
from harness.report.fmt import fmt_bytes, fmt_num

log = logging.getLogger(__name__)

LogHref = Callable[[RunIndex, CellRecord], "str | None"]


@dataclass(frozen=True)
class Column:
    """One matrix column: a backend on a device in one run."""

    run_pos: int
    device: str
    backend: str


@dataclass(frozen=True)
class HeaderSpan:
    """A header cell spanning `span` columns (machine or device group); `key` tells groups apart."""

    label: str
    span: int
    key: str = ""


@dataclass
class CellView:
    """One record as shown in a matrix cell."""

    cell_id: str
    status: str
    badge: str
    css: str
    lines: list[str] = field(default_factory=list)
    title: str = ""
    log_href: str | None = None
    anchor: str | None = None
    shape: str = ""
    backend: str = ""


@dataclass
class MatrixView:
    """One matrix: its shape label, the grouped column headers, and rows of cells (a list of records each)."""

    shape: str
    machines: list[HeaderSpan]
    devices: list[HeaderSpan]
    columns: list[Column]
    rows: list[tuple[str, list[list[CellView]]]]


def anchor_for(run_pos: int, cell_id: str) -> str:
    """The id of a cell's entry in the failures section."""
    return f"f{run_pos}-" + re.sub(r"[^A-Za-z0-9._-]", "_", cell_id)


def short(text: object, limit: int) -> str:
    """Text on one line, cut to `limit` characters."""
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def remedy_line(idx: RunIndex, rec: CellRecord) -> str | None:
    """`works via backbone-only (p50 2.1 ms, -0.4 ms vs torch-eager)`, or why the remedies did not work."""
    attempts = idx.remedies.get(rec.cell_id, [])
    if not attempts:
        return None
    good = idx.working_remedy(rec)
    if good is None:
        names = ", ".join(sorted({r.remedy or "unnamed remedy" for r in attempts}))
        classes = ", ".join(sorted({str(dig(r.failure, "class") or r.status) for r in attempts}))
        return f"remedy tried, did not work: {names} ({classes})"
    good_p50 = p50(good)
    parts = []
    if good_p50 is not None:
        parts.append(f"p50 {fmt_num(good_p50)} ms")
        eager = idx.eager_for(rec)
        eager_p50 = p50(eager) if eager else None
        if eager_p50 is not None:
            delta = good_p50 - eager_p50
            parts.append(f"{'+' if delta >= 0 else '−'}{fmt_num(abs(delta))} ms vs torch-eager")
    detail = f" ({', '.join(parts)})" if parts else ""
    return f"works via {good.remedy or 'unnamed remedy'}{detail}"


def describe(idx: RunIndex, rec: CellRecord, href: LogHref) -> CellView:
    """The matrix view of one record."""
    status = rec.status or "unknown"
    cid = rec.cell_id or ""
    view = CellView(
        cell_id=cid, status=status, badge=status, css=status, log_href=href(idx, rec), shape=run_shape(rec)
    )
    if status == "ok":
        rec_p50 = p50(rec)
        view.lines.append(
            f"p50 {fmt_num(rec_p50)} ms"
            if rec_p50 is not None
            else f"p50 n/a: {short(null_reason(rec, 'latency_ms.p50'), 70)}"
        )
        executed, requested = rec.precision_executed, rec.precision_requested
        if executed and executed != requested:
            view.lines.append(f"ran {executed}")
        fallback = number(rec.ops, "fallback")
        if fallback:
            view.lines.append(f"{int(fallback)} ops fell back")
        if rec.remedy:
            view.lines.append(f"remedy: {rec.remedy}")
    elif status == "exported":
        delegated, fallback = number(rec.ops, "delegated"), number(rec.ops, "fallback")
        if delegated is not None and fallback is not None:
            view.lines.append(f"delegated {int(delegated)}/{int(delegated + fallback)} ops")
        size = finite(rec.artifact_bytes)
        if size is not None:
            view.lines.append(fmt_bytes(size))
        view.title = "export-only target: the artifact exists, no runtime for it here"
    elif status == "skipped":
        view.lines.append(short(rec.reason or "no reason recorded", 70))
        view.title = rec.reason or ""
    elif status in TRACED_STATUSES:  # never a GPU measurement: its own badge and the label on it
        view.css = "traced"
        view.badge = f"{status.replace('_', ' ')} · fake CUDA"
        view.anchor = anchor_for(idx.position, cid)
        if status == "trace_failed":
            ops = dig(rec.failure, "ops")
            view.lines.append(str(dig(rec.failure, "class") or "unknown"))
            if isinstance(ops, list) and ops:
                view.lines.append("ops: " + short(", ".join(map(str, ops[:3])), 90))
        else:
            view.lines.append("stopped at: " + short(str(dig(rec.fake_device, "stopped_at") or "?"), 60))
        view.lines.append("traced on a CPU machine, not a GPU run")
        view.title = FAKE_LABEL
    elif is_failed(rec):
        view.css = "failed"
        view.anchor = anchor_for(idx.position, cid)
        cls = dig(rec.failure, "class") or "unknown"
        view.lines.append(str(cls))
        ops = dig(rec.failure, "ops")
        guards = dig(rec.failure, "guards")
        if isinstance(ops, list) and ops:
            view.lines.append(
                "ops: " + short(", ".join(map(str, ops[:3])), 90) + (" …" if len(ops) > 3 else "")
            )
        if isinstance(guards, list) and guards:
            view.lines.append("guard: " + short(guards[0], 90))
        fix = dig(rec.failure, "suggested_fix")
        if fix:
            view.lines.append("suggested: " + short(fix, 60))
        remedy = remedy_line(idx, rec)
        if remedy:
            view.lines.append(remedy)
            if remedy.startswith("works via"):
                view.css, view.badge = "remedied", f"{status} → remedied"
        view.title = short(dig(rec.failure, "message") or rec.reason or "", 400)
    return view


@dataclass
class FoldedReason:
    """One reason the cells of a folded line were skipped, the backends it covers, and those cells."""

    reason: str
    backends: list[str]
    entries: list[CellView]


@dataclass
class FoldedLine:
    """A device (`backend` None) or one backend on a device, none of whose cells ran on one machine: one line of
    how many cells and why, in place of matrix columns that would hold only skip badges."""

    run_pos: int
    machine: str
    device: str
    backend: str | None
    cells: int
    backends: list[str]
    reasons: list[FoldedReason]

    @property
    def summary(self) -> str:
        first = self.reasons[0].reason
        more = len(self.reasons) - 1
        return first + (f" (and {more} other reason{'s' if more > 1 else ''})" if more else "")


def _device(rec: CellRecord) -> str:
    return rec.device or "unknown"


def folded_keys(indexes: list[RunIndex]) -> set[tuple[int, str, str | None]]:
    """(run position, device, None) of each device whose every cell was skipped on that run's machine, then
    (run position, device, backend) of each backend whose every cell was skipped on a device that ran others."""
    dev: dict[tuple[int, str], bool] = {}
    col: dict[tuple[int, str, str], bool] = {}
    for idx in indexes:
        for rec in idx.cells:
            skipped = rec.status == "skipped"
            d = (idx.position, _device(rec))
            dev[d] = dev.get(d, True) and skipped
            c = (*d, rec.backend or "unknown")
            col[c] = col.get(c, True) and skipped
    out: set[tuple[int, str, str | None]] = {(*d, None) for d, gone in dev.items() if gone}
    out |= {c for c, gone in col.items() if gone and not dev[c[:2]]}
    return out


def is_folded(folded: set[tuple[int, str, str | None]], idx: RunIndex, rec: CellRecord) -> bool:
    d = (idx.position, _device(rec))
    return (*d, None) in folded or (*d, rec.backend or "unknown") in folded


def _short_label(rec: CellRecord) -> str:
    return f"{rec.family}{rec.size} {rec.task} {shape_label(rec)} b{rec.batch} {rec.precision_requested}"


def build_folded(indexes: list[RunIndex], href: LogHref) -> list[FoldedLine]:
    """One line per device of a machine where no cell ran, then per backend that ran no cell on a device that
    ran others, with the skip reasons (the reason with the most cells first)."""
    folded = folded_keys(indexes)
    by: dict[tuple[int, str, str | None], list[CellRecord]] = {}
    for idx in indexes:
        for rec in idx.cells:
            d = (idx.position, _device(rec))
            key = (*d, None) if (*d, None) in folded else (*d, rec.backend or "unknown")
            if key in folded:
                by.setdefault(key, []).append(rec)
    backends = backend_order()

    def line_sort(key: tuple[int, str, str | None]) -> tuple:
        return (key[0], key[2] is not None, order_key(key[1], DEVICE_ORDER), order_key(key[2], backends))

    out = []
    for key in sorted(by, key=line_sort):
        pos, device, backend = key
        idx, recs = indexes[pos], by[key]
        reasons: dict[str, list[CellRecord]] = {}
        for rec in sorted(recs, key=lambda r: (order_key(r.backend, backends), _entry_sort(r))):
            reasons.setdefault(rec.reason or "no reason recorded", []).append(rec)
        views = [
            FoldedReason(
                reason,
                list(dict.fromkeys(r.backend for r in rs)),
                [_folded_view(idx, r, href) for r in rs],
            )
            for reason, rs in sorted(reasons.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        ]
        names = sorted({r.backend for r in recs}, key=lambda b: order_key(b, backends))
        out.append(FoldedLine(pos, machine_label(idx, indexes), device, backend, len(recs), names, views))
    return out


def _folded_view(idx: RunIndex, rec: CellRecord, href: LogHref) -> CellView:
    view = describe(idx, rec, href)
    view.lines = [f"{rec.backend} · {_short_label(rec)}"]
    view.backend = rec.backend
    return view


def _shape_sort(label: str) -> tuple:
    if label == "dynamic":
        return (1, 0, label)
    m = re.fullmatch(r"(\d+)x(\d+)", label)
    return (0, int(m.group(1)) * int(m.group(2)), label) if m else (0, 0, label)


def _entry_sort(rec: CellRecord) -> tuple:
    h, w = rec.height or 0, rec.width or 0
    return (h * w, rec.cell_id)


def build_matrices(indexes: list[RunIndex], href: LogHref) -> list[MatrixView]:
    """One matrix per shape label, static shapes by pixel count, then the dynamic probe; the devices and backends
    of a machine where no cell ran are left out (build_folded lists them)."""
    by_shape: dict[str, dict[tuple, dict[Column, list[CellView]]]] = {}
    recs_by_cell: dict[tuple, list[CellRecord]] = {}
    folded = folded_keys(indexes)
    for idx in indexes:
        for rec in idx.cells:
            if is_folded(folded, idx, rec):
                continue  # shown on its folded line (build_folded)
            col = Column(idx.position, rec.device or "unknown", rec.backend or "unknown")
            recs_by_cell.setdefault((shape_label(rec), row_key(rec), col), []).append(rec)
    for (shape, rkey, col), recs in recs_by_cell.items():
        idx = indexes[col.run_pos]
        views = [describe(idx, r, href) for r in sorted(recs, key=_entry_sort)]
        by_shape.setdefault(shape, {}).setdefault(rkey, {})[col] = views

    out = []
    backends = backend_order()
    for shape in sorted(by_shape, key=_shape_sort):
        rows = by_shape[shape]
        cols = sorted(
            {c for cells in rows.values() for c in cells},
            key=lambda c: (c.run_pos, order_key(c.device, DEVICE_ORDER), order_key(c.backend, backends)),
        )
        machines: list[HeaderSpan] = []
        devices: list[HeaderSpan] = []
        for c in cols:
            mlabel = machine_label(indexes[c.run_pos], indexes)
            if machines and machines[-1].key == str(c.run_pos):
                machines[-1] = HeaderSpan(mlabel, machines[-1].span + 1, str(c.run_pos))
            else:
                machines.append(HeaderSpan(mlabel, 1, str(c.run_pos)))
            dkey = f"{c.run_pos}/{c.device}"
            if devices and devices[-1].key == dkey:
                devices[-1] = HeaderSpan(c.device, devices[-1].span + 1, dkey)
            else:
                devices.append(HeaderSpan(c.device, 1, dkey))
        body = [(row_label(k), [rows[k].get(c, []) for c in cols]) for k in sorted(rows, key=row_sort)]
        out.append(MatrixView(shape=shape, machines=machines, devices=devices, columns=cols, rows=body))
    return out
