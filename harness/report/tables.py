"""The report's tables: verdict counts, latency, memory, and the failure details the matrix links to."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field

from harness.core.results_dir import dig
from harness.report import paired
from harness.report.fmt import Notes, Shown, derived, fmt_num
from harness.report.fmt import field as show_field
from harness.report.index import REFERENCE_BACKEND, RunIndex, row_sort
from harness.report.load import is_failed, null_reason, number, run_shape
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
            status = rec.get("status")
            if status == "ok":
                v.ok += 1
            elif status == "skipped":
                v.skipped += 1
            elif status == "exported":
                v.exported += 1
            elif is_failed(rec):
                v.failed += 1
                classes[str(dig(rec, "failure.class") or "unknown")] += 1
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


LATENCY_FIELDS = (
    ("p50", "latency_ms.p50"),
    ("p90", "latency_ms.p90"),
    ("p99", "latency_ms.p99"),
    ("throughput", "throughput_ips"),
    ("first_run", "first_run_ms"),
    ("export_s", "export_s"),
    ("load_s", "load_s"),
)
MEMORY_FIELDS = (
    ("host_peak", "memory.host_peak_rss_mib"),
    ("host_delta", "memory.host_peak_delta_mib"),
    ("device_used", "memory.device_peak_used_mib"),
    ("device_process", "memory.device_peak_process_mib"),
    ("torch_allocated", "memory.torch_max_allocated_mib"),
    ("torch_reserved", "memory.torch_max_reserved_mib"),
    ("energy", "energy.per_inference_j"),
)


def _sources(rec: dict) -> str:
    """How the memory figures were read, and the energy figure where it has its own source."""
    text = str(dig(rec, "memory.source") or "n/a")
    energy = dig(rec, "energy.source")
    return f"{text}; energy: {energy}" if energy else text


def speedup(idx: RunIndex, rec: dict, notes: Notes) -> Shown:
    """torch-eager's p50 over this p50, same workload and device in the same run: the paired ratio measured
    interleaved (harness.report.paired), with its 95% interval; the ratio of separate p50s only for cells that were
    not timed together (said in the cell)."""
    if rec.get("backend") == REFERENCE_BACKEND:
        return Shown("ref", 1.0)
    p50 = number(rec, "latency_ms.p50")
    if p50 is None or p50 <= 0:
        return notes.na(null_reason(rec, "latency_ms.p50"))
    eager = idx.eager_for(rec)
    r = paired.ratio(rec, eager) if eager else None
    if r is None:
        return notes.na(f"no torch-eager cell ran ok for this workload on {rec.get('device')}")
    text = fmt_num(1.0 / r.value, 3) + "×"
    if r.ci is not None:
        text += f" [{fmt_num(1.0 / r.ci[1], 3)}–{fmt_num(1.0 / r.ci[0], 3)}]"
    elif not r.paired:
        text += " (unpaired)"
    return Shown(text, 1.0 / r.value)


def p50_spread(rec: dict, notes: Notes) -> tuple[Shown, Shown]:
    """The p50's 95% interval and the rounds it rests on (marked when the rounds scattered: `unstable`)."""
    lat = rec.get("latency_ms") if isinstance(rec.get("latency_ms"), dict) else {}
    ci = lat.get("p50_ci")
    if isinstance(ci, list) and len(ci) == 2:
        shown_ci = Shown(f"{fmt_num(ci[0], 3)}–{fmt_num(ci[1], 3)}", ci[0])
    else:
        shown_ci = notes.na(null_reason(rec, "latency_ms.p50_ci"))
    rounds = number(rec, "latency_ms.rounds")
    if rounds is None:
        return shown_ci, notes.na(null_reason(rec, "latency_ms.rounds"))
    text = str(int(rounds))
    if lat.get("unstable"):
        text += f" unstable ({fmt_num(100 * float(lat.get('scatter') or 0), 2)}% scatter)"
    return shown_ci, Shown(text, rounds)


def accuracy_shown(rec: dict, notes: Notes) -> Shown:
    """mAP50-95 over the PyTorch fp32 reference's on the same images, with the cell's mAP and its tier."""
    ratio = number(rec, "accuracy.ratio")
    if ratio is None:
        path = "accuracy.ratio" if isinstance(rec.get("accuracy"), dict) else "accuracy"
        return notes.na(null_reason(rec, path))
    acc = rec["accuracy"]
    return Shown(f"{ratio:.3f} ({fmt_num(acc.get('map50_95'), 3)}; {acc.get('tier')})", ratio)


def achieved_gflops(rec: dict, notes: Notes) -> Shown:
    """Published model GFLOPs (scaled to the shape) over measured p50: an estimate of achieved GFLOP/s."""
    gflops, p50 = number(rec, "gflops"), number(rec, "latency_ms.p50")
    if gflops is None:
        return notes.na(null_reason(rec, "gflops"))
    if p50 is None or p50 <= 0:
        return notes.na(null_reason(rec, "latency_ms.p50"))
    return derived(gflops / (p50 / 1000.0), None, notes)


def trend_for(trends: dict, cell_id: str, machine_key: str | None):
    """The history's sparkline of a cell: keyed `cell_id@machine` for a merged run's machines, else `cell_id`."""
    if machine_key and f"{cell_id}@{machine_key}" in trends:
        return trends[f"{cell_id}@{machine_key}"]
    return trends.get(cell_id)


def in_tables(rec: dict) -> bool:
    """Skipped and failed cells are explained in the matrix; the tables hold what was measured."""
    status = rec.get("status")
    return status in ("ok", "exported", "parity_failed") or (
        status != "skipped" and number(rec, "latency_ms.p50") is not None
    )


def has_compile_times(indexes: list[RunIndex]) -> bool:
    """Whether any record has a compile time (torch.compile, AOTInductor): the column is shown only then."""
    return any(number(r, "compile_s") is not None for idx in indexes for r in idx.all_records())


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
                bool(r.get("dynamic")),
                (r.get("height") or 0) * (r.get("width") or 0),
                row_sort(
                    (
                        r.get("size"),
                        r.get("task"),
                        r.get("head"),
                        r.get("batch"),
                        r.get("precision_requested"),
                    )
                ),
                str(r.get("device")),
                str(r.get("backend")),
                str(r.get("cell_id")),
            )
        )
        for rec in recs:
            values = {name: show_field(rec, path, notes) for name, path in (*LATENCY_FIELDS, *MEMORY_FIELDS)}
            if with_compile:
                values["compile_s"] = show_field(rec, "compile_s", notes)
            values["speedup"] = speedup(idx, rec, notes)
            values["p50_ci"], values["rounds"] = p50_spread(rec, notes)
            values["gflops_s"] = achieved_gflops(rec, notes)
            values["accuracy"] = accuracy_shown(rec, notes)
            requested, executed = rec.get("precision_requested"), rec.get("precision_executed")
            precision = f"{requested} → {executed}" if executed and executed != requested else str(requested)
            if not executed:
                precision = f"{requested} → n/a"
            cid = str(rec.get("cell_id") or "")
            rows.append(
                Row(
                    machine=machine,
                    run_number=idx.position + 1,
                    cell_id=cid,
                    status=str(rec.get("status")),
                    backend=str(rec.get("backend")),
                    device=str(rec.get("device")),
                    model=str(rec.get("model") or f"yolo26{rec.get('size')}"),
                    shape=run_shape(rec),
                    dynamic=bool(rec.get("dynamic")),
                    batch=str(rec.get("batch")),
                    precision=precision,
                    precision_mismatch=bool(executed and executed != requested),
                    precision_source=str(
                        rec.get("precision_source") or null_reason(rec, "precision_executed")
                    ),
                    remedy=(
                        f"{rec.get('remedy')} (remedy of {rec.get('remedy_of')})"
                        if rec.get("remedy_of")
                        else ""
                    )
                    or str(rec.get("remedy") or ""),
                    values=values,
                    timing_scope=str(dig(rec, "latency_ms.timing_scope") or "n/a"),
                    memory_source=_sources(rec),
                    log_href=href(idx, rec),
                    trend=trend_for(trends or {}, cid, idx.run.machine_key),
                    remedy_name=str(rec.get("remedy") or ""),
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


def _group(idx: RunIndex, rec: dict) -> str:
    """`[1] yolo26n detect · e2e · b1 · fp32 · 640x640`: the run and workload a table row belongs to."""
    dyn = " (dynamic artifact)" if rec.get("dynamic") else ""
    key = (
        rec.get("size"),
        rec.get("task"),
        rec.get("head"),
        rec.get("batch"),
        rec.get("precision_requested"),
    )
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
            cid = str(rec.get("cell_id") or "")
            attempts = []
            for r in idx.remedies.get(cid, []):
                p50 = number(r, "latency_ms.p50")
                attempts.append(
                    f"{r.get('remedy') or 'unnamed remedy'}: {r.get('status')}"
                    + (f", p50 {p50:.3g} ms" if p50 is not None else "")
                    + (f" ({dig(r, 'failure.class')})" if dig(r, "failure.class") else "")
                )
            ops, guards = dig(rec, "failure.ops"), dig(rec, "failure.guards")
            out.append(
                FailureView(
                    anchor=anchor_for(idx.position, cid),
                    machine=machine,
                    cell_id=cid,
                    status=str(rec.get("status")),
                    cls=str(dig(rec, "failure.class") or "unknown"),
                    stage=str(dig(rec, "failure.stage") or "n/a"),
                    exception_type=str(dig(rec, "failure.exception_type") or "n/a"),
                    message=clip(dig(rec, "failure.message") or rec.get("reason") or "(no message recorded)"),
                    ops=[str(o) for o in ops] if isinstance(ops, list) else [],
                    guards=[str(g) for g in guards] if isinstance(guards, list) else [],
                    suggested_fix=str(dig(rec, "failure.suggested_fix") or ""),
                    log_href=href(idx, rec),
                    remedy_of=str(rec.get("remedy_of") or ""),
                    remedies=attempts,
                )
            )
    return out
