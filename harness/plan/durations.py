"""What one cell is expected to cost, in seconds of a run, and where that figure came from.

Sources, the first that knows the cell wins (each estimate says which):
- "history": the cell's newest measured record in the history database. A record holds the parts it measured
  (a fresh export, load, its share of the interleaved timing, accuracy, scenarios); what no record holds (end to
  end, parity, the memory probe, the report) is the run's remainder, so each part is scaled by its run's wall
  time over the sum of the parts of all its cells: the costs of one run's cells add up to that run's wall time.
- "export cache": no history, but the export cache holds the cell's export: no export tonight, the plan's
  defaults for the rest (a history figure also drops its export share when the export is cached now).
- "nearest": the nearest measured cell of the same backend and device, its cost scaled by the work of the two
  cells (published GFLOPs at 640 x pixels x batch; other tasks priced as detect, the only published figures).
- "default": DEFAULTS below.

A cell that is a skip here (an exclusion, an unsupported case, a backend that cannot run here) costs nothing: its
record is a skip line. Figures are seconds on the machine that will run them; a history from another machine is
used as it is (the database's runs are all read: one nightly machine per database, as the workflow keeps it).
"""

from __future__ import annotations

import json
import logging
import math
import re
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from harness.core.axes import GFLOPS_640
from harness.core.cell import Cell
from harness.core.record import FAILED_STATUSES

log = logging.getLogger(__name__)

#: seconds per cell when nothing was measured: calibrated on the cold runs of results/samples/2026-11-22-*
#: (2-core CPU, 2 export workers), not on the 2026-11-25 default run the accuracy benchmark checks them against
DEFAULTS: dict[str, float] = {
    "export_executorch": 24.0,  # a fresh ExecuTorch export (XNNPACK lowering), yolo26n
    "export_compile": 100.0,  # torch.compile / AOTInductor compile (first call)
    "export_tensorrt": 120.0,
    "export_other": 4.0,  # ONNX, OpenVINO: seconds for yolo26n
    "export_parallel": 0.5,  # the export phase runs 2 exports at once on 2 cores
    "timing": 6.0,  # a cell's share of its workload's timed episodes (3 s cap x 3 episodes over ~4 cells + load)
    "stages": 11.0,  # end to end, parity, accuracy, memory probe: a run's remainder per cell that ran
    "scenarios": 8.0,  # a scenario cell's LoadGen scenarios
    "cached_prep": 2.0,  # a cache hit: the artifact found and probed
}
SOURCES = ("history", "export cache", "nearest", "default", "skip")
#: p50 over the cell's previous p50 above which its last result counts as regressed (the planner's own rule; the
#: compare command's verdict is the reference, this only orders the night)
REGRESSED_RATIO = 1.10
#: a nearest cell's cost scales as (work ratio) ** WORK_EXPONENT: exports and time-capped timings grow far slower
#: than the model's work (yolo26x@640 cells cost about 3x yolo26n@640 ones for 36x the GFLOPs in the 2026-11-22
#: samples); 1 would scale by work itself
WORK_EXPONENT = 0.35


@dataclass(frozen=True)
class CellCost:
    """A cell's expected seconds and the source of the figure (one of SOURCES), with what it was taken from."""

    seconds: float
    source: str
    detail: str = ""


@dataclass(frozen=True)
class Measured:
    """What the history says of one cell: its newest measured cost and result."""

    cell_id: str
    seconds: float
    run_id: str
    started_at: str  # the run's start (ISO 8601): when the cell was last measured
    status: str
    work: float | None  # the cell's work (GFLOPs-equivalent), for the nearest-cell scaling
    backend: str
    device: str
    regressed: bool = False
    export_s: float = 0.0  # the share of `seconds` that was a fresh export (0 when a cache hit tonight)


@dataclass
class History:
    """Per cell, the newest measured record (a skip is not a measurement); and the cells the last run planned but
    did not record (missing)."""

    measured: dict[str, Measured] = field(default_factory=dict)
    missing: set[str] = field(default_factory=set)
    last_run: str | None = None

    @property
    def failed(self) -> set[str]:
        return {c for c, m in self.measured.items() if m.status in FAILED_STATUSES}

    @property
    def regressed(self) -> set[str]:
        return {c for c, m in self.measured.items() if m.regressed}


def work(cell: Cell) -> float | None:
    """Published GFLOPs at 640 scaled by pixels and batch (every task priced as detect); None for dynamic."""
    if not cell.shape.height:
        return None
    return GFLOPS_640[cell.size] * cell.shape.height * cell.shape.width / (640 * 640) * cell.batch


def _record_work(rec: dict) -> float | None:
    size, h, w = rec.get("size"), rec.get("height"), rec.get("width")
    if size not in GFLOPS_640 or not h or not w:
        return None
    return GFLOPS_640[size] * h * w / (640 * 640) * int(rec.get("batch") or 1)


def parts_s(rec: dict) -> float:
    """The seconds a record itself measured: a fresh export, load and compile, its share of its workload's interleaved timing
    (the workload's elapsed seconds over its cells), accuracy scoring and scenarios; 0 for a skip."""
    if rec.get("status") == "skipped":
        return 0.0
    total = 0.0
    if not rec.get("cache_hit") and isinstance(rec.get("export_s"), int | float):
        total += float(rec["export_s"])
    for key in (
        "load_s",
        "compile_s",
    ):  # torch.compile compiles at the first call: compile_s, apart from load
        if isinstance(rec.get(key), int | float):
            total += float(rec[key])
    timing = rec.get("timing") or {}
    if isinstance(timing.get("elapsed_s"), int | float):
        total += float(timing["elapsed_s"]) / (1 + len(timing.get("with") or []))
    acc = rec.get("accuracy") or {}
    if isinstance(acc.get("seconds"), int | float):
        total += float(acc["seconds"])
    for sc in (rec.get("scenarios") or {}).values():
        if isinstance(sc, dict) and isinstance(sc.get("duration_s"), int | float):
            total += float(sc["duration_s"])
    return total


def run_wall_s(records: Iterable[dict]) -> float | None:
    """A run's wall seconds from its records: the latest end (started_at + duration_s) less the earliest start."""
    starts, ends = [], []
    for rec in records:
        at = rec.get("started_at")
        if not at:
            continue
        t = datetime.fromisoformat(at).timestamp()
        starts.append(t)
        ends.append(t + float(rec.get("duration_s") or 0.0))
    return max(ends) - min(starts) if starts else None


def fresh_export_s(rec: dict) -> float:
    """A record's fresh export seconds (0 for a cache hit or no export)."""
    e = rec.get("export_s")
    return float(e) if not rec.get("cache_hit") and isinstance(e, int | float) else 0.0


def run_costs(records: list[dict]) -> dict[str, tuple[float, float]]:
    """Each record's cost in its run and the export's share of it: its own parts scaled so that the run's costs
    sum to its wall time (the scale takes in what no record measures, and the export phase's parallelism)."""
    parts = {r["cell_id"]: (parts_s(r), fresh_export_s(r)) for r in records}
    total = sum(p for p, _ in parts.values())
    wall = run_wall_s(records)
    scale = wall / total if wall and total > 0 else 1.0
    return {cid: (p * scale, e * scale) for cid, (p, e) in parts.items()}


def history_from_runs(runs: list[tuple[str, str, list[dict], dict]]) -> History:
    """A History from runs given as (run_id, started_at, records, env), in any order: the newest measured record
    of each cell; regressed when its p50 is REGRESSED_RATIO over the cell's previous p50; missing: cells the
    newest run's plan selected that it did not record."""
    hist = History()
    previous_p50: dict[str, float] = {}
    latest_p50: dict[str, float] = {}
    for run_id, started_at, records, _env in sorted(runs, key=lambda r: r[1]):
        costs = run_costs(records)
        for rec in records:
            if rec.get("status") == "skipped" or rec.get("remedy_of"):
                continue
            cid = rec["cell_id"]
            p50 = (
                (rec.get("latency_ms") or {}).get("p50") if isinstance(rec.get("latency_ms"), dict) else None
            )
            if p50 is not None:
                if cid in latest_p50:
                    previous_p50[cid] = latest_p50[cid]
                latest_p50[cid] = float(p50)
            regressed = (
                p50 is not None and cid in previous_p50 and float(p50) > REGRESSED_RATIO * previous_p50[cid]
            )
            seconds, export_s = costs.get(cid, (0.0, 0.0))
            hist.measured[cid] = Measured(
                cid,
                seconds,
                run_id,
                started_at,
                str(rec.get("status")),
                _record_work(rec),
                str(rec.get("backend")),
                str(rec.get("device")),
                regressed,
                export_s,
            )
    if runs:
        run_id, _, records, env = max(runs, key=lambda r: r[1])
        hist.last_run = run_id
        planned = ((env or {}).get("plan") or {}).get("selected_ids") or []
        have = set((env or {}).get("recorded_ids") or ()) | {r["cell_id"] for r in records}
        hist.missing = {c for c in planned if c not in have}
    return hist


#: the record fields the plan reads, pulled out by SQLite (a full record is ~3 kB of JSON; 26,400 cells a night)
_FIELDS = (
    "cell_id",
    "status",
    "backend",
    "device",
    "size",
    "height",
    "width",
    "batch",
    "remedy_of",
    "cache_hit",
    "export_s",
    "load_s",
    "started_at",
    "duration_s",
)
_SELECT = (
    "SELECT "
    + ", ".join(f"json_extract(record, '$.{f}')" for f in _FIELDS)
    + ", json_extract(record, '$.timing.elapsed_s'), json_array_length(record, '$.timing.with'),"
    " json_extract(record, '$.accuracy.seconds'), json_extract(record, '$.scenarios'), p50"
    " FROM cells WHERE run_id = ? AND machine = ? AND status != 'skipped'"
)


def _row_record(row: tuple) -> dict:
    """The fields of a record the plan reads, from one _SELECT row, shaped as the record."""
    rec = dict(zip(_FIELDS, row[: len(_FIELDS)], strict=True))
    elapsed, n_with, acc_s, scenarios, p50 = row[len(_FIELDS) :]
    rec["timing"] = {"elapsed_s": elapsed, "with": [None] * int(n_with or 0)} if elapsed is not None else None
    rec["accuracy"] = {"seconds": acc_s} if acc_s is not None else None
    rec["scenarios"] = json.loads(scenarios) if scenarios else None
    rec["latency_ms"] = {"p50": p50} if p50 is not None else None
    return rec


def read_history(db_path: Path, newest: int = 60) -> History:
    """The History of the `newest` runs of a history database (read only; skip records are not read); an empty
    History, with a log line, when there is no database or it cannot be read (a plan never stops a run)."""
    if not Path(db_path).is_file():
        return History()
    try:
        conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        try:
            rows = conn.execute(
                "SELECT run_id, machine, started_at, json_extract(env, '$.plan.selected_ids') FROM runs"
                " ORDER BY started_at DESC LIMIT ?",
                (newest,),
            ).fetchall()
            runs = []
            for run_id, machine, started_at, selected in rows:
                records = [_row_record(r) for r in conn.execute(_SELECT, (run_id, machine))]
                env: dict = {}
                if selected and not runs:  # the newest run: which of its planned cells it recorded
                    env["plan"] = {"selected_ids": json.loads(selected)}
                    env["recorded_ids"] = [
                        c
                        for (c,) in conn.execute(
                            "SELECT cell_id FROM cells WHERE run_id = ? AND machine = ?", (run_id, machine)
                        )
                    ]
                runs.append((run_id, started_at, records, env))
        finally:
            conn.close()
    except (sqlite3.Error, ValueError, TypeError) as e:
        log.warning("plan: history %s not read (%s): estimates from the cache and defaults", db_path, e)
        return History()
    return history_from_runs(runs)


def default_cost(cell: Cell, scenario: bool = False, export_s: float | None = None) -> float:
    """DEFAULTS for a cell that runs: its export (scaled by the model's weight, a square root of its GFLOPs: an
    export's time grows far slower than the model's work), its timing share, its stages."""
    if export_s is None:
        b = cell.backend
        key = (
            "export_compile"
            if b.startswith(("torch-compile", "aoti"))
            else "export_tensorrt"
            if "tensorrt" in b or b.endswith("-trt")
            else "export_executorch"
            if b.startswith("executorch")
            else "export_other"
            if b != "torch-eager" and not b.startswith("cudagraph")
            else None
        )
        export_s = DEFAULTS[key] * math.sqrt(GFLOPS_640[cell.size] / GFLOPS_640["n"]) if key else 0.0
    # a compile happens at the runner's first call, in the timing phase: not shared with other exports
    compiled = cell.backend.startswith(("torch-compile", "aoti"))
    share = 1.0 if compiled else DEFAULTS["export_parallel"]
    seconds = export_s * share + DEFAULTS["timing"] + DEFAULTS["stages"]
    return seconds + (DEFAULTS["scenarios"] if scenario else 0.0)


def cached_cells(cache_dir: Path | None) -> set[str]:
    """The cell ids whose plain export the cache holds (exports/<cell id>-<key12>/meta.json, any key: as
    harness.plan.estimate.cache_entry finds them), listed once rather than globbed per cell."""
    root = Path(cache_dir) / "exports" if cache_dir is not None else None
    if root is None or not root.is_dir():
        return set()
    out = set()
    for entry in root.iterdir():
        m = re.fullmatch(r"(.+)-[0-9a-f]{12}", entry.name)
        if m and (entry / "meta.json").is_file():
            out.add(m.group(1))
    return out


def estimate_cells(
    cells: Iterable[Cell],
    hist: History,
    *,
    cache_dir: Path | None = None,
    skips: Iterable[str] = (),
    scenario_cells: Iterable[str] = (),
    cached: Iterable[str] = (),
) -> dict[str, CellCost]:
    """Each cell's CellCost, by the sources in the module's order; `skips` (cell ids that are a skip here) cost
    nothing; `cached` (cell ids whose export is in the cache: no export tonight, besides those `cache_dir`
    holds) cost no export."""
    skips, scenario_cells = set(skips), set(scenario_cells)
    cached = set(cached) | cached_cells(cache_dir)
    by_pair: dict[tuple[str, str], list[Measured]] = {}
    for m in hist.measured.values():
        if m.work and m.seconds > 0:
            by_pair.setdefault((m.backend, m.device), []).append(m)
    out: dict[str, CellCost] = {}
    for cell in cells:
        if cell.id in skips:
            out[cell.id] = CellCost(0.0, "skip", "a skip here")
            continue
        hit = cell.id in cached
        m = hist.measured.get(cell.id)
        if m is not None:
            seconds = m.seconds - (m.export_s if hit else 0.0) + (DEFAULTS["cached_prep"] if hit else 0.0)
            out[cell.id] = CellCost(
                seconds, "history", f"run {m.run_id}" + (", export cached" if hit else "")
            )
            continue
        if hit:
            seconds = default_cost(cell, cell.id in scenario_cells, DEFAULTS["cached_prep"])
            out[cell.id] = CellCost(seconds, "export cache", "a cache hit: no export")
            continue
        w = work(cell)
        near = by_pair.get((cell.backend, cell.device))
        if near and w:
            best = min(near, key=lambda n: abs(math.log(w / n.work)) if n.work else math.inf)
            if best.work:
                factor = (w / best.work) ** WORK_EXPONENT
                out[cell.id] = CellCost(
                    best.seconds * factor,
                    "nearest",
                    f"{best.cell_id} x {factor:.2f} (work {w / best.work:.2f}x)",
                )
                continue
        out[cell.id] = CellCost(default_cost(cell, cell.id in scenario_cells), "default")
    return out
