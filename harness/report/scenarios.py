"""The end-to-end and scenario fields of a record (a CellRecord), read tolerantly, and the two tables that show them.

A cell that ran ok carries `latency_e2e_ms` (the `latency_ms` shape, timing scope `end-to-end`: preprocess, host-
device copies, model and post-processing), `stages_ms` (the p50 of each stage, null where a stage does not exist),
`e2e` (how the stages were timed and whether they add up to the wall time), and its single-stream scenario
(`scenario`, `scenario_result`). Cells of the scenario profile also carry `scenarios`: name -> result, each with its
metric, value, unit, whether it is valid under its rule, and extras per scenario (MLPerf LoadGen's SingleStream,
MultiStream, Server and Offline, each with LoadGen's verdict and its logs (`loadgen.logs`, the summary's path in
the run directory); and the harness's own camera check at fixed frame rates).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from harness.core.record import CellRecord
from harness.core.results_dir import dig
from harness.decide.index import RunIndex, backend_order, order_key, row_of, row_sort, workload_key
from harness.decide.load import null_reason, number
from harness.decide.scenario_results import CAMERA_FPS as CAMERA_FPS
from harness.decide.scenario_results import FRAME_MS as FRAME_MS
from harness.decide.scenario_results import SCENARIOS as SCENARIOS
from harness.decide.scenario_results import any_scenarios as any_scenarios
from harness.decide.scenario_results import e2e_p99 as e2e_p99
from harness.decide.scenario_results import e2e_p99_interval as e2e_p99_interval
from harness.decide.scenario_results import has_any as has_any
from harness.decide.scenario_results import missed_share as missed_share
from harness.decide.scenario_results import pct as pct
from harness.decide.scenario_results import percentile_label as percentile_label
from harness.decide.scenario_results import ran_ips as ran_ips
from harness.decide.scenario_results import result as result
from harness.decide.scenario_results import span as span
from harness.decide.scenario_results import span_text as span_text
from harness.report.fmt import Notes, Shown, fmt_num
from harness.report.fmt import field as show_field
from harness.report.matrix import LogHref, machine_label, row_label

log = logging.getLogger(__name__)

STAGES = ("preprocess", "h2d", "model", "d2h", "postprocess")


def loadgen_logs(res: dict | None) -> str | None:
    """The path (relative to the run directory) of LoadGen's summary for a scenario result, if LoadGen ran it."""
    lg = res.get("loadgen") if isinstance(res, dict) else None
    path = lg.get("logs") if isinstance(lg, dict) else None
    return path if isinstance(path, str) else None


@dataclass(frozen=True)
class ScenarioShown:
    """One scenario of one cell as the scenario table shows it."""

    name: str
    text: str  # `value unit`, or n/a
    detail: str  # the extras that explain the value
    valid: bool | None  # None: the scenario did not run for this cell
    rule: str
    note: int | None = None
    loadgen_href: str | None = None  # LoadGen's summary of this scenario


@dataclass
class ScenarioRow:
    run_number: int
    machine: str
    cell_id: str
    workload: str
    backend: str
    device: str
    scenarios: list[ScenarioShown] = field(default_factory=list)
    log_href: str | None = None


def _detail(name: str, res: dict) -> str:
    n = fmt_num
    if name == "single-stream":
        p50, p99 = number(res, "p50"), number(res, "p99")
        ci = span_text(span(res, "p99_interval"))
        sure = number(res, "p90_guaranteed")
        return (
            (f"p50 {n(p50)} · " if p50 else "")
            + (f"p99 {n(p99)} ms" if p99 else "")
            + (f" [{ci}]" if ci else "")
            + (f" · LoadGen guarantees p90 ≤ {n(sure)} ms" if sure else "")
        )
    if name == "multi-stream":
        streams, p99, ips = number(res, "streams"), number(res, "p99"), ran_ips(res)
        parts = [f"{int(streams)} streams" if streams else "", f"p99 {n(p99)} ms" if p99 else ""]
        parts.append(f"{n(ips)} img/s" if ips else "")
        return " · ".join(p for p in parts if p)
    if name == "server":
        bound, rates = number(res, "bound_ms"), span_text(span(res, "rate_interval"))
        return (f"{percentile_label(res)} ≤ {n(bound)} ms" if bound else "") + (
            f" · VALID–INVALID {rates} q/s" if rates else ""
        )
    if name == "offline":
        b, c, ci = number(res, "batch"), number(res, "concurrency"), span_text(span(res, "ips_interval"))
        head = f"batch {int(b)} × {int(c)} streams" if b and c else ""
        return head + (f" · [{ci}]" if ci else "")
    if name == "camera-capacity":
        return capacity_detail(res)
    if name == "camera":
        fps = res.get("fps") if isinstance(res.get("fps"), dict) else {}
        return " · ".join(f"{k} FPS missed {pct(number(v, 'missed_share'))}" for k, v in sorted(fps.items()))
    return ""


def capacity_detail(res: dict) -> str:
    """Every mechanism's answer (`serial 2 [fails at 3]`, `split 2 [fails at 3] (2 InferenceSessions x 1 thread)`,
    `batched: does not apply`), what stayed undecided, and what the search cost."""
    n = fmt_num
    parts = []
    mechanisms = res.get("mechanisms") if isinstance(res.get("mechanisms"), dict) else {}
    for key, m in mechanisms.items():
        if not isinstance(m, dict):
            continue
        if m.get("applies") is False:
            parts.append(f"{key}: does not apply")
            continue
        iv = m.get("interval")
        value = "not one" if m.get("value") is None else str(m.get("value"))
        hi = iv[1] if isinstance(iv, list) and len(iv) > 1 and isinstance(iv[1], int) else None
        text = f"{key} {value}" + (f" [fails at {hi}]" if hi is not None else "")
        if isinstance(m.get("possibly"), int):
            text += f", possibly {m['possibly']}"
        if m.get("deploy") and key != res.get("mechanism"):
            text += f" ({m['deploy']})"
        parts.append(text + ("" if m.get("settled", True) else " (screened)"))
    if res.get("deploy"):
        parts.insert(0, f"by {res['deploy']}")
    if isinstance(res.get("possibly"), int):
        parts.append(f"{res['possibly']} undecided at this duration")
    cost = res.get("cost") if isinstance(res.get("cost"), dict) else {}
    secs, runs = number(cost, "seconds"), number(cost, "runs")
    if secs is not None:
        parts.append(f"{int(runs or 0)} runs, {n(secs)} s")
    return " · ".join(parts)


#: the scenario table's columns, in order (the camera-capacity search's beside the multi-stream run it extends)
COLUMNS = ("single-stream", "multi-stream", "camera-capacity", "server", "offline", "camera")

FileHref = Callable[[RunIndex, object], "str | None"]


def _shown(idx: RunIndex, rec: CellRecord, name: str, notes: Notes, files: FileHref | None) -> ScenarioShown:
    res = result(rec, name)
    if res is None:
        return ScenarioShown(name, "—", "not run for this cell", None, "")
    value, unit = number(res, "value"), str(res.get("unit") or "")
    rule = str(res.get("rule") or "")
    valid = res.get("valid") is True
    href = files(idx, loadgen_logs(res)) if files else None
    if value is None:
        why = str(res.get("reason") or null_reason(rec, f"scenarios.{name}.value"))
        return ScenarioShown(name, "n/a", _detail(name, res), valid, rule, notes.ref(why), href)
    text = f"{pct(value)}" if unit in ("share", "fraction") else f"{fmt_num(value)} {unit}".strip()
    if unit == "cameras":  # a count; an undecided larger one beside it
        text = f"{int(value)} cameras" + (
            f", possibly {res['possibly']}" if isinstance(res.get("possibly"), int) else ""
        )
    if res.get("valid") is False and res.get("reason"):
        rule += f" — not valid: {res['reason']}"
    return ScenarioShown(name, text, _detail(name, res), valid, rule, loadgen_href=href)


def _sorted_cells(idx: RunIndex, keep: Callable[[CellRecord], object]) -> list[CellRecord]:
    recs = [r for r in idx.cells if keep(r)]
    order = backend_order()
    return sorted(
        recs,
        key=lambda r: (
            (r.height or 0) * (r.width or 0),
            row_sort(row_of(workload_key(r))),
            r.device,
            order_key(r.backend, order),
        ),
    )


def _workload(rec: CellRecord) -> str:
    return f"{row_label(row_of(workload_key(rec)))} · {rec.height}x{rec.width}"


def scenario_rows(
    indexes: list[RunIndex], notes: Notes, href: LogHref, files: FileHref | None = None
) -> list[ScenarioRow]:
    """One row per cell that ran more than its single-stream scenario: each scenario's value, unit and validity,
    and (`files`: run-relative path -> link) LoadGen's summary of each scenario LoadGen ran."""
    rows = []
    for idx in indexes:
        for rec in _sorted_cells(idx, lambda r: isinstance(r.scenarios, dict) and r.scenarios):
            rows.append(
                ScenarioRow(
                    run_number=idx.position + 1,
                    machine=machine_label(idx, indexes),
                    cell_id=rec.cell_id,
                    workload=_workload(rec),
                    backend=rec.backend,
                    device=rec.device,
                    scenarios=[_shown(idx, rec, name, notes, files) for name in COLUMNS],
                    log_href=href(idx, rec),
                )
            )
    return rows


@dataclass
class E2ERow:
    """One cell's end-to-end latency beside its model-only figure, and its stages."""

    run_number: int
    machine: str
    cell_id: str
    workload: str
    backend: str
    device: str
    values: dict[str, Shown]
    postprocess: str
    check: str
    check_held: bool | None
    post_ref: int = 0  # the number of `postprocess` among the table's post-processing notes


def _gap(rec: CellRecord, notes: Notes) -> Shown:
    gap = number(rec.e2e, "gap")
    if gap is None:
        return notes.na(null_reason(rec, "e2e.gap"))
    return Shown(f"{100 * gap:+.1f}%", gap)


def _has_e2e(rec: CellRecord) -> bool:
    return rec.status == "ok" and (rec.latency_e2e_ms is not None or isinstance(rec.stages_ms, dict))


def e2e_rows(indexes: list[RunIndex], notes: Notes) -> list[E2ERow]:
    """One row per cell with an end-to-end latency or a stage breakdown."""
    rows = []
    for idx in indexes:
        for rec in _sorted_cells(idx, _has_e2e):
            model, e2e = rec.latency_ms, rec.latency_e2e_ms
            values = {
                "model_p50": show_field(rec, "latency_ms.p50", model.p50 if model else None, notes),
                "e2e_p50": show_field(rec, "latency_e2e_ms.p50", e2e.p50 if e2e else None, notes),
                "e2e_p99": show_field(rec, "latency_e2e_ms.p99", e2e.p99 if e2e else None, notes),
                **{s: show_field(rec, f"stages_ms.{s}", dig(rec.stages_ms, s), notes) for s in STAGES},
                "sum": show_field(rec, "e2e.stage_sum_ms", dig(rec.e2e, "stage_sum_ms"), notes),
                "wall": show_field(rec, "e2e.wall_ms", dig(rec.e2e, "wall_ms"), notes),
                "gap": _gap(rec, notes),
            }
            held = dig(rec.e2e, "check.held")
            rows.append(
                E2ERow(
                    run_number=idx.position + 1,
                    machine=machine_label(idx, indexes),
                    cell_id=rec.cell_id,
                    workload=_workload(rec),
                    backend=rec.backend,
                    device=rec.device,
                    values=values,
                    postprocess=str(dig(rec.e2e, "postprocess") or null_reason(rec, "e2e.postprocess")),
                    check=str(dig(rec.e2e, "check.rule") or "no check recorded"),
                    check_held=held if isinstance(held, bool) else None,
                )
            )
    refs: dict[str, int] = {}
    for row in rows:
        row.post_ref = refs.setdefault(row.postprocess, len(refs) + 1)
    return rows


def post_notes(rows: list[E2ERow]) -> list[tuple[int, str]]:
    """The end-to-end table's distinct post-processing texts, numbered as its rows refer to them."""
    return sorted({(r.post_ref, r.postprocess) for r in rows})
