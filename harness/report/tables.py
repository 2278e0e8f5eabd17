"""The report's tables: verdict counts, latency, memory, and the failure details the matrix links to."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from harness.core.memory_order import dropped_figures
from harness.core.record import CellRecord, Memory
from harness.core.results_dir import dig
from harness.core.roofline import share_text
from harness.decide import paired, roofline
from harness.decide.index import REFERENCE_BACKEND, RunIndex, row_sort
from harness.decide.load import finite, is_failed, null_reason, number, run_shape
from harness.decide.load import p50 as model_p50
from harness.measure.throttle import words as throttle_words
from harness.report.fmt import Notes, Shown, derived, fmt_num
from harness.report.fmt import field as show_field
from harness.report.matrix import LogHref, anchor_for, machine_label, row_label

log = logging.getLogger(__name__)

MESSAGE_LIMIT = 3000


@dataclass
class Verdicts:
    """Status counts over the cells of one run (remedy attempts are not cells; `remedied` counts failed cells
    that have a remedy attempt which ran ok)."""

    label: str
    total: int = 0
    ok: int = 0
    failed: int = 0
    skipped: int = 0
    exported: int = 0
    remedied: int = 0
    failed_by_class: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "total": self.total,
            "ok": self.ok,
            "failed": self.failed,
            "failed_by_class": dict(self.failed_by_class),
            "skipped": self.skipped,
            "exported_only": self.exported,
            "remedied": self.remedied,
        }


def verdicts(indexes: list[RunIndex]) -> list[Verdicts]:
    """One row per run, then a total row when there are several runs."""
    rows = []
    for idx in indexes:
        v = Verdicts(machine_label(idx, indexes))
        classes: Counter[str] = Counter()
        for rec in idx.cells:
            v.total += 1
            status = rec.status
            if status == "ok":
                v.ok += 1
            elif status == "skipped":
                v.skipped += 1
            elif status == "exported":
                v.exported += 1
            elif is_failed(rec):
                v.failed += 1
                classes[str(dig(rec.failure, "class") or "unknown")] += 1
                if idx.working_remedy(rec) is not None:
                    v.remedied += 1
        v.failed_by_class = dict(sorted(classes.items(), key=lambda kv: (-kv[1], kv[0])))
        rows.append(v)
    if len(rows) > 1:
        total = Verdicts("all machines")
        classes = Counter()
        for v in rows:
            for name in ("total", "ok", "failed", "skipped", "exported", "remedied"):
                setattr(total, name, getattr(total, name) + getattr(v, name))
            classes.update(v.failed_by_class)
        total.failed_by_class = dict(sorted(classes.items(), key=lambda kv: (-kv[1], kv[0])))
        rows.append(total)
    return rows


@dataclass
class Row:
    """One record in the latency and memory tables."""

    machine: str
    run_number: int
    cell_id: str
    status: str
    backend: str
    device: str
    model: str
    shape: str
    dynamic: bool
    batch: str
    precision: str
    precision_mismatch: bool
    precision_source: str  # how the executed precision was read, or why it is n/a (shown on hover)
    remedy: str
    values: dict[str, Shown]
    timing_scope: str
    memory_source: str
    log_href: str | None
    trend: str | None = None
    remedy_name: str = ""  # the remedy alone (`remedy` also names the cell it remedies)
    group: str = ""  # the workload the row belongs to: the tables show one heading row per workload
    source_ref: int = 0  # the number of `memory_source` among the memory table's sources


#: a table column: its name, the record field it shows (a dotted path: its null reason's key) and how to read it
TableField = tuple[str, str, Callable[[CellRecord], object]]

LATENCY_FIELDS: tuple[TableField, ...] = (
    ("p50", "latency_ms.p50", lambda r: r.latency_ms.p50 if r.latency_ms else None),
    ("p90", "latency_ms.p90", lambda r: r.latency_ms.p90 if r.latency_ms else None),
    ("p99", "latency_ms.p99", lambda r: r.latency_ms.p99 if r.latency_ms else None),
    ("throughput", "throughput_ips", lambda r: r.throughput_ips),
    ("first_run", "first_run_ms", lambda r: r.first_run_ms),
    ("export_s", "export_s", lambda r: r.export_s),
    ("load_s", "load_s", lambda r: r.load_s),
)


def _memory(read: Callable[[Memory], float | None]) -> Callable[[CellRecord], object]:
    """A reader of one figure of the record's memory section (None when the record has no memory section)."""
    return lambda r: read(r.memory) if r.memory else None


def _device_memory(name: str) -> Callable[[CellRecord], object]:
    """A reader of one GPU figure that gives None where the record breaks the memory order (a record written before
    it was enforced): the report never shows a contradictory pair (load.null_reason says why)."""
    return lambda r: None if not r.memory or name in dropped_figures(r.memory) else getattr(r.memory, name)


MEMORY_FIELDS: tuple[TableField, ...] = (
    ("host_peak", "memory.host_peak_rss_mib", _memory(lambda m: m.host_peak_rss_mib)),
    ("host_delta", "memory.host_peak_delta_mib", _memory(lambda m: m.host_peak_delta_mib)),
    ("device_used", "memory.device_peak_used_mib", _memory(lambda m: m.device_peak_used_mib)),
    ("device_process", "memory.device_peak_process_mib", _device_memory("device_peak_process_mib")),
    ("torch_allocated", "memory.torch_max_allocated_mib", _device_memory("torch_max_allocated_mib")),
    ("torch_reserved", "memory.torch_max_reserved_mib", _device_memory("torch_max_reserved_mib")),
    ("device_context", "memory.device_context_mib", _memory(lambda m: m.device_context_mib)),
    ("outside_torch", "memory.device_outside_torch_mib", _device_memory("device_outside_torch_mib")),
    ("energy", "energy.per_inference_j", lambda r: r.energy.per_inference_j if r.energy else None),
)
#: each memory figure's reader, by its dotted path in the record (what the plots read too)
MEMORY_READERS: dict[str, Callable[[CellRecord], object]] = {path: read for _, path, read in MEMORY_FIELDS}


def _sources(rec: CellRecord) -> str:
    """How the memory figures were read, and the energy figure where it has its own source."""
    text = str((rec.memory.source if rec.memory else None) or "n/a")
    energy = rec.energy.source if rec.energy else None
    return f"{text}; energy: {energy}" if energy else text


def speedup(idx: RunIndex, rec: CellRecord, notes: Notes) -> Shown:
    """torch-eager's p50 over this p50, same workload and device in the same run: the paired ratio measured
    interleaved (harness.decide.paired), with its 95% interval; the ratio of separate p50s only for cells that were
    not timed together (said in the cell)."""
    if rec.backend == REFERENCE_BACKEND:
        return Shown("ref", 1.0)
    p50 = model_p50(rec)
    if p50 is None or p50 <= 0:
        return notes.na(null_reason(rec, "latency_ms.p50"))
    eager = idx.eager_for(rec)
    r = paired.ratio(rec, eager) if eager else None
    if r is None:
        return notes.na(f"no torch-eager cell ran ok for this workload on {rec.device}")
    text = fmt_num(1.0 / r.value, 3) + "×"
    if r.ci is not None:
        text += f" [{fmt_num(1.0 / r.ci[1], 3)}–{fmt_num(1.0 / r.ci[0], 3)}]"
    elif not r.paired:
        text += " (unpaired)"
    return Shown(text, 1.0 / r.value)


def p50_spread(rec: CellRecord, notes: Notes) -> tuple[Shown, Shown]:
    """The p50's 95% interval and the rounds it rests on (marked when the rounds scattered, `unstable`, and when a
    CPU quota throttled them, harness.measure.throttle.words)."""
    lat = rec.latency_ms
    ci = lat.p50_ci if lat else None
    if isinstance(ci, list) and len(ci) == 2:
        shown_ci = Shown(f"{fmt_num(ci[0], 3)}–{fmt_num(ci[1], 3)}", ci[0])
    else:
        shown_ci = notes.na(null_reason(rec, "latency_ms.p50_ci"))
    rounds = finite(lat.rounds) if lat else None
    if lat is None or rounds is None:
        return shown_ci, notes.na(null_reason(rec, "latency_ms.rounds"))
    text = str(int(rounds))
    if lat.unstable:
        text += f" unstable ({fmt_num(100 * float(lat.scatter or 0), 2)}% scatter)"
    text += throttle_words(rec.throttle)
    return shown_ci, Shown(text, rounds)


def accuracy_shown(rec: CellRecord, notes: Notes) -> Shown:
    """mAP50-95 over the PyTorch fp32 reference's on the same images, with the cell's mAP and its tier."""
    ratio = number(rec.accuracy, "ratio")
    if ratio is None:
        path = "accuracy.ratio" if isinstance(rec.accuracy, dict) else "accuracy"
        return notes.na(null_reason(rec, path))
    acc = rec.accuracy or {}
    return Shown(f"{ratio:.3f} ({fmt_num(acc.get('map50_95'), 3)}; {acc.get('tier')})", ratio)


def achieved_gflops(rec: CellRecord, notes: Notes) -> Shown:
    """Published model GFLOPs (scaled to the shape) over measured p50: an estimate of achieved GFLOP/s."""
    gflops, p50 = finite(rec.gflops), model_p50(rec)
    if gflops is None:
        return notes.na(null_reason(rec, "gflops"))
    if p50 is None or p50 <= 0:
        return notes.na(null_reason(rec, "latency_ms.p50"))
    return derived(gflops / (p50 / 1000.0), None, notes)


def share_of_peak(idx: RunIndex, rec: CellRecord, notes: Notes) -> Shown:
    """Achieved FLOP/s (counted work over the p50) over the machine's measured compute peak for the precision the
    cell executed (harness.decide.roofline), or n/a with why."""
    view = roofline.of(rec, idx)
    if view is None:
        return notes.na(null_reason(rec, "latency_ms.p50"))
    share = view.get("share_of_peak")
    if share is None:
        return notes.na(view.why("share_of_peak"))
    return Shown(share_text(float(share)), float(share))


def trend_for(trends: dict, cell_id: str, machine_key: str | None):
    """The history's sparkline of a cell: keyed `cell_id@machine` for a merged run's machines, else `cell_id`."""
    if machine_key and f"{cell_id}@{machine_key}" in trends:
        return trends[f"{cell_id}@{machine_key}"]
    return trends.get(cell_id)


def in_tables(rec: CellRecord) -> bool:
    """Skipped and failed cells are explained in the matrix; the tables hold what was measured."""
    status = rec.status
    return status in ("ok", "exported", "parity_failed") or (
        status != "skipped" and model_p50(rec) is not None
    )


def has_compile_times(indexes: list[RunIndex]) -> bool:
    """Whether any record has a compile time (torch.compile, AOTInductor): the column is shown only then."""
    return any(finite(r.compile_s) is not None for idx in indexes for r in idx.all_records())


def measured_rows(
    indexes: list[RunIndex],
    notes: Notes,
    href: LogHref,
    trends: dict[str, str] | None = None,
    with_compile: bool = False,
) -> list[Row]:
    """Rows for the latency and memory tables, ordered by run, shape, model and backend."""
    rows = []
    for idx in indexes:
        machine = machine_label(idx, indexes)
        recs = [r for r in idx.all_records() if in_tables(r)]
        recs.sort(
            key=lambda r: (
                bool(r.dynamic),
                (r.height or 0) * (r.width or 0),
                row_sort((r.size, r.task, r.head, r.batch, r.precision_requested, r.family)),
                r.device,
                r.backend,
                r.cell_id,
            )
        )
        for rec in recs:
            values = {
                name: show_field(rec, path, read(rec), notes)
                for name, path, read in (*LATENCY_FIELDS, *MEMORY_FIELDS)
            }
            if with_compile:
                values["compile_s"] = show_field(rec, "compile_s", rec.compile_s, notes)
            values["speedup"] = speedup(idx, rec, notes)
            values["p50_ci"], values["rounds"] = p50_spread(rec, notes)
            values["gflops_s"] = achieved_gflops(rec, notes)
            values["peak_share"] = share_of_peak(idx, rec, notes)
            values["accuracy"] = accuracy_shown(rec, notes)
            requested, executed = rec.precision_requested, rec.precision_executed
            precision = f"{requested} → {executed}" if executed and executed != requested else requested
            if not executed:
                precision = f"{requested} → n/a"
            cid = rec.cell_id or ""
            rows.append(
                Row(
                    machine=machine,
                    run_number=idx.position + 1,
                    cell_id=cid,
                    status=rec.status,
                    backend=rec.backend,
                    device=rec.device,
                    model=rec.model or f"{rec.family}{rec.size}",
                    shape=run_shape(rec),
                    dynamic=bool(rec.dynamic),
                    batch=str(rec.batch),
                    precision=precision,
                    precision_mismatch=bool(executed and executed != requested),
                    precision_source=rec.precision_source or null_reason(rec, "precision_executed"),
                    remedy=(f"{rec.remedy} (remedy of {rec.remedy_of})" if rec.remedy_of else "")
                    or (rec.remedy or ""),
                    values=values,
                    timing_scope=(rec.latency_ms.timing_scope if rec.latency_ms else None) or "n/a",
                    memory_source=_sources(rec),
                    log_href=href(idx, rec),
                    trend=trend_for(trends or {}, cid, idx.run.machine_key),
                    remedy_name=rec.remedy or "",
                    group=_group(idx, rec),
                )
            )
    sources: dict[str, int] = {}
    for row in rows:
        if row.memory_source != "n/a":  # no memory figure, no source to cite (0: none)
            row.source_ref = sources.setdefault(row.memory_source, len(sources) + 1)
    return rows


def memory_sources(rows: list[Row]) -> list[tuple[int, str]]:
    """The memory table's distinct sources, numbered as its rows refer to them."""
    return sorted({(r.source_ref, r.memory_source) for r in rows if r.source_ref})


def _group(idx: RunIndex, rec: CellRecord) -> str:
    """`[1] yolo26n detect · e2e · b1 · fp32 · 640x640`: the run and workload a table row belongs to."""
    dyn = " (dynamic artifact)" if rec.dynamic else ""
    key = (rec.size, rec.task, rec.head, rec.batch, rec.precision_requested, rec.family)
    return f"[{idx.position + 1}] {row_label(key)} · {run_shape(rec)}{dyn}"


def clip(text: object, limit: int = MESSAGE_LIMIT) -> str:
    """Cut long exception text (keeping its line breaks); the full text is in the cell's log."""
    s = str(text)
    return s if len(s) <= limit else s[:limit] + f"\n… ({len(s) - limit} more characters in the log)"


@dataclass
class FailureView:
    """A failed cell or remedy attempt in the failures section, which the matrix links to."""

    anchor: str
    machine: str
    cell_id: str
    status: str
    cls: str
    stage: str
    exception_type: str
    message: str
    ops: list[str]
    guards: list[str]
    suggested_fix: str
    log_href: str | None
    remedy_of: str
    remedies: list[str]


def failures(indexes: list[RunIndex], href: LogHref) -> list[FailureView]:
    """Every failed cell and failed remedy attempt, with the full (escaped at render) failure text."""
    out = []
    for idx in indexes:
        machine = machine_label(idx, indexes)
        for rec in idx.all_records():
            if not is_failed(rec):
                continue
            cid = rec.cell_id or ""
            attempts = []
            for r in idx.remedies.get(cid, []):
                p50 = model_p50(r)
                attempts.append(
                    f"{r.remedy or 'unnamed remedy'}: {r.status}"
                    + (f", p50 {p50:.3g} ms" if p50 is not None else "")
                    + (f" ({dig(r.failure, 'class')})" if dig(r.failure, "class") else "")
                )
            failure = rec.failure
            ops, guards = dig(failure, "ops"), dig(failure, "guards")
            out.append(
                FailureView(
                    anchor=anchor_for(idx.position, cid),
                    machine=machine,
                    cell_id=cid,
                    status=rec.status,
                    cls=str(dig(failure, "class") or "unknown"),
                    stage=str(dig(failure, "stage") or "n/a"),
                    exception_type=str(dig(failure, "exception_type") or "n/a"),
                    message=clip(dig(failure, "message") or rec.reason or "(no message recorded)"),
                    ops=[str(o) for o in ops] if isinstance(ops, list) else [],
                    guards=[str(g) for g in guards] if isinstance(guards, list) else [],
                    suggested_fix=str(dig(failure, "suggested_fix") or ""),
                    log_href=href(idx, rec),
                    remedy_of=rec.remedy_of or "",
                    remedies=attempts,
                )
            )
    return out
