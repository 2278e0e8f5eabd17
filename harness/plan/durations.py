"""What earlier runs measured, read for the one estimator (harness.plan.price): the history database, the timelines
of earlier runs in a results directory, and the export cache's entries. Nothing here prices a cell.

- History (`read_history`, `history_from_runs`): per cell, its newest measured record in parts (`record_parts`: a
  fresh export, load and first run, its share of the interleaved timing, accuracy, scenarios). What no record holds
  (end to end, parity, the memory probe, the report) is the run's remainder: every part of a run's records is
  scaled by the run's wall time over the sum of its cells' prices (each cell's export at the run's export share,
  1 / its physical cores), so that one run's cells add up to that run's wall time. Also each cell's last result:
  regressed, failed, or missing from the newest run's plan.
- Timelines (`read_recorded`): `timeline.json` of the newest runs in a results directory, written by
  harness.pytest_plugin.eta at each run's end (each cell's export-phase seconds and whether its export came from
  the cache; each workload's share of the timing phase and its own stages; each cell's parts where the run wrote
  them; the cells run alone; the end; the machine's speed at the run's start).
- The export cache (`cached_cells`, `cache_entry`): which cells' plain exports are on disk.
"""

from __future__ import annotations

import json
import logging
import re
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from harness.core.axes import GFLOPS_640
from harness.core.record import FAILED_STATUSES

log = logging.getLogger(__name__)

TIMELINE = "timeline.json"
TIMELINE_VERSION = 1
#: p50 over the cell's previous p50 above which its last result counts as regressed (the planner's own rule; the
#: compare command's verdict is the reference, this only orders the night)
REGRESSED_RATIO = 1.10
#: the export phase's share when a run does not say how many workers it had (2 workers on 2 cores)
DEFAULT_EXPORT_SHARE = 0.5


@dataclass(frozen=True)
class Measured:
    """What the history says of one cell: its newest measured record, in parts (seconds of its run, scaled to the
    run's wall), and its result."""

    cell_id: str
    #: the parts' sum, the export at its run's export share: one run's cells sum to its wall
    seconds: float
    run_id: str
    started_at: str  # the run's start (ISO 8601): when the cell was last measured
    status: str
    work: float | None  # the cell's work (GFLOPs-equivalent), for the nearest-cell scaling
    backend: str
    device: str
    regressed: bool = False
    export_s: float = 0.0  # the fresh export's part of `parts` (0 for a cache hit)
    parts: dict = field(default_factory=dict)  # record_parts, scaled
    cache_hit: bool = False
    speed: dict | None = None  # the run's env.json machine_speed, where it measured one
    model_work: float | None = None  # the model's work (GFLOPs x batch), for the export's and probe's scaling


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


def _record_work(rec: dict, pixels: bool = True) -> float | None:
    """A record's work: published GFLOPs at 640 x pixels x batch (the model's GFLOPs x batch without `pixels`)."""
    size, h, w = rec.get("size"), rec.get("height"), rec.get("width")
    if size not in GFLOPS_640 or not h or not w:
        return None
    return GFLOPS_640[size] * (h * w / (640 * 640) if pixels else 1.0) * int(rec.get("batch") or 1)


def _num(value) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def record_parts(rec: dict, floor_trials: int | None = None) -> dict[str, float]:
    """The seconds a record itself measured, by part (harness.plan.price.PARTS): `export` (a fresh export; 0 for a
    cache hit), `load` (load, compile and first run), `timing` (its share of its workload's interleaved timing: the
    elapsed seconds over the workload's cells), `stages` (accuracy scoring), `scenarios` (LoadGen's durations);
    `timing_floor`: the seconds the timing's fewest trials (`floor_trials`, the run's fewest) would take, equal to
    `timing` where the floor held it up. Empty for a skip."""
    if rec.get("status") == "skipped":
        return {}
    timing = rec.get("timing") if isinstance(rec.get("timing"), dict) else {}
    t = _num(timing.get("elapsed_s")) / (1 + len(timing.get("with") or []))
    trials = timing.get("trials")
    floor = t * min(1.0, floor_trials / trials) if floor_trials and isinstance(trials, int) and trials else t
    scenarios = sum(
        _num(sc.get("duration_s")) for sc in (rec.get("scenarios") or {}).values() if isinstance(sc, dict)
    )
    return {
        "export": fresh_export_s(rec),
        "probe": 0.0,
        "load": _num(rec.get("load_s")) + _num(rec.get("first_run_ms")) / 1000.0,
        "timing": t,
        "timing_floor": floor,
        "stages": _num((rec.get("accuracy") or {}).get("seconds")),
        "scenarios": scenarios,
    }


def parts_s(rec: dict) -> float:
    """The sum of a record's own parts (record_parts, the timing's floor left out); 0 for a skip."""
    return sum(v for k, v in record_parts(rec).items() if k != "timing_floor")


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


def floor_trials(records: Iterable[dict]) -> int | None:
    """The fewest timing trials of a run's records: the floor its slowest workloads stopped at."""
    trials = [
        t
        for r in records
        if isinstance(r.get("timing"), dict) and isinstance(t := r["timing"].get("trials"), int) and t > 0
    ]
    return min(trials) if trials else None


def run_costs(records: list[dict], share: float = DEFAULT_EXPORT_SHARE) -> dict[str, dict[str, float]]:
    """Each record's parts in its run, scaled so that the run's cells (each its parts' sum, the export at `share`)
    add up to the run's wall time: the scale takes in what no record measures."""
    floor = floor_trials(records)
    parts = {r["cell_id"]: record_parts(r, floor) for r in records}
    total = sum(_cell_sum(p, share) for p in parts.values())
    wall = run_wall_s(records)
    scale = wall / total if wall and total > 0 else 1.0
    return {cid: {k: v * scale for k, v in p.items()} for cid, p in parts.items()}


def _cell_sum(parts: dict[str, float], share: float) -> float:
    prep = parts.get("export", 0.0) + parts.get("probe", 0.0)
    rest = sum(v for k, v in parts.items() if k not in ("export", "probe", "timing_floor"))
    return prep * share + rest


def _run_share(env: dict | None) -> float:
    cores = ((env or {}).get("host") or {}).get("cpu_cores_physical")
    return 1.0 / cores if isinstance(cores, int) and cores > 0 else DEFAULT_EXPORT_SHARE


def history_from_runs(runs: list[tuple[str, str, list[dict], dict]]) -> History:
    """A History from runs given as (run_id, started_at, records, env), in any order: the newest measured record
    of each cell; regressed when its p50 is REGRESSED_RATIO over the cell's previous p50; missing: cells the
    newest run's plan selected that it did not record."""
    hist = History()
    previous_p50: dict[str, float] = {}
    latest_p50: dict[str, float] = {}
    for run_id, started_at, records, env in sorted(runs, key=lambda r: r[1]):
        share = _run_share(env)
        costs = run_costs(records, share)
        speed = (env or {}).get("machine_speed")
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
            parts = costs.get(cid, {})
            hist.measured[cid] = Measured(
                cid,
                _cell_sum(parts, share),
                run_id,
                started_at,
                str(rec.get("status")),
                _record_work(rec),
                str(rec.get("backend")),
                str(rec.get("device")),
                regressed,
                parts.get("export", 0.0),
                parts,
                bool(rec.get("cache_hit")),
                speed if isinstance(speed, dict) else None,
                _record_work(rec, pixels=False),
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
    "cell_id", "status", "backend", "device", "size", "height", "width", "batch", "remedy_of", "cache_hit",
    "export_s", "load_s", "first_run_ms", "started_at", "duration_s",
)  # fmt: skip
_SELECT = (
    "SELECT "
    + ", ".join(f"json_extract(record, '$.{f}')" for f in _FIELDS)
    + ", json_extract(record, '$.timing.elapsed_s'), json_array_length(record, '$.timing.with'),"
    " json_extract(record, '$.timing.trials'), json_extract(record, '$.accuracy.seconds'),"
    " json_extract(record, '$.scenarios'), p50 FROM cells WHERE run_id = ? AND machine = ? AND status != 'skipped'"
)


def _row_record(row: tuple) -> dict:
    """The fields of a record the plan reads, from one _SELECT row, shaped as the record."""
    rec = dict(zip(_FIELDS, row[: len(_FIELDS)], strict=True))
    elapsed, n_with, trials, acc_s, scenarios, p50 = row[len(_FIELDS) :]
    rec["timing"] = (
        {"elapsed_s": elapsed, "with": [None] * int(n_with or 0), "trials": trials}
        if elapsed is not None
        else None
    )
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
                "SELECT run_id, machine, started_at, json_extract(env, '$.plan.selected_ids'),"
                " json_extract(env, '$.machine_speed'), json_extract(env, '$.host.cpu_cores_physical')"
                " FROM runs ORDER BY started_at DESC LIMIT ?",
                (newest,),
            ).fetchall()
            runs = []
            for run_id, machine, started_at, selected, speed, cores in rows:
                records = [_row_record(r) for r in conn.execute(_SELECT, (run_id, machine))]
                env: dict = {"host": {"cpu_cores_physical": cores}}
                if speed:
                    env["machine_speed"] = json.loads(speed)
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
        log.warning("plan: history %s not read (%s): estimates from the cache and the plan", db_path, e)
        return History()
    return history_from_runs(runs)


@dataclass
class Recorded:
    """Stage times recorded by earlier runs' timelines (the newest that priced a part wins)."""

    #: cell id -> (seconds, from the cache)
    prep_s: dict[str, tuple[float, bool]] = field(default_factory=dict)
    parallelism: float | None = None  # export phase wall seconds over the sum of its cells' seconds
    #: workload label -> its share of the timing phase
    timing_s: dict[str, float] = field(default_factory=dict)
    workload_s: dict[str, float] = field(default_factory=dict)  # workload label -> its own stages
    cell_s: dict[str, dict] = field(default_factory=dict)  # cell id -> its parts (load, timing, stages, ...)
    alone_s: dict[str, float] = field(default_factory=dict)  # cell id -> a cell run alone
    finish_s: float | None = None
    scenario_phase_s: float | None = None  # the scenario phase's seconds (harness.execute.scenario_phase)
    speed: dict | None = None  # the machine_speed of the newest run that recorded one
    runs: list[str] = field(default_factory=list)  # the runs read, newest first

    def add(self, timeline: dict) -> None:
        """Take the parts of an older run's timeline that no newer one priced."""
        for cid, (s, hit) in (timeline.get("prep_s") or {}).items():
            self.prep_s.setdefault(cid, (float(s), bool(hit)))
        for name in ("timing_s", "workload_s", "alone_s"):
            for key, s in (timeline.get(name) or {}).items():
                getattr(self, name).setdefault(key, float(s))
        for cid, parts in (timeline.get("cell_s") or {}).items():
            if isinstance(parts, dict):
                self.cell_s.setdefault(cid, {k: float(v) for k, v in parts.items()})
        if self.parallelism is None and timeline.get("parallelism"):
            self.parallelism = float(timeline["parallelism"])
        if self.finish_s is None and timeline.get("finish_s") is not None:
            self.finish_s = float(timeline["finish_s"])
        if self.scenario_phase_s is None and isinstance(timeline.get("scenario_phase_s"), int | float):
            self.scenario_phase_s = float(timeline["scenario_phase_s"])
        if self.speed is None and isinstance(timeline.get("machine_speed"), dict):
            self.speed = timeline["machine_speed"]
        self.runs.append(str(timeline.get("run_id")))


def read_recorded(results_dir: Path, exclude: str | None = None, newest: int = 5) -> Recorded:
    """The timelines of the `newest` runs under `results_dir` (by the file's time), `exclude` (this run) left out;
    an unreadable timeline is skipped with a log line (an estimate never stops a run)."""
    rec = Recorded()
    found = []
    for path in Path(results_dir).glob(f"*/{TIMELINE}"):
        if path.parent.name != exclude:
            try:
                found.append((path.stat().st_mtime, path))
            except OSError:
                continue
    for _, path in sorted(found, reverse=True)[:newest]:
        try:
            timeline = json.loads(path.read_text(encoding="utf-8"))
            if timeline.get("version") == TIMELINE_VERSION:
                rec.add(timeline)
        except (OSError, ValueError, TypeError, AttributeError) as e:
            log.info("estimate: %s skipped (%s)", path, e)
    return rec


def cached_cells(cache_dir: Path | None) -> set[str]:
    """The cell ids whose plain export the cache holds (exports/<cell id>-<key12>/meta.json, any key; entries of
    remedy options carry a suffix before the key and are another id), listed once rather than globbed per cell."""
    root = Path(cache_dir) / "exports" if cache_dir is not None else None
    if root is None or not root.is_dir():
        return set()
    out = set()
    for entry in root.iterdir():
        m = re.fullmatch(r"(.+)-[0-9a-f]{12}", entry.name)
        if m and (entry / "meta.json").is_file():
            out.add(m.group(1))
    return out


def cache_entry(cache_dir: Path, cell_id: str) -> dict | None:
    """The meta.json of the plain export-cache entry of `cell_id` (exports/<cell id>-<key12>/), the newest when
    keys changed; None when there is none."""
    best = None
    for meta in (Path(cache_dir) / "exports").glob(f"{glob_escape(cell_id)}-*/meta.json"):
        if not re.fullmatch(re.escape(cell_id) + r"-[0-9a-f]{12}", meta.parent.name):
            continue
        try:
            mtime = meta.stat().st_mtime
            if best is None or mtime > best[0]:
                best = (mtime, json.loads(meta.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return best[1] if best else None


def glob_escape(text: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", text)
