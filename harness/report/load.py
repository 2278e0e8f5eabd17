"""Reading result directories into `Run` objects, and tolerant access to record fields.

The report reads records as plain dicts: every field may be null or absent, and unknown extra fields are ignored.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.records import FAILED_STATUSES, read_records

log = logging.getLogger(__name__)

UNKNOWN = "unknown"
# A results directory written by `python -m harness merge` (harness/history/merge.py): env.json lists the machines
# under this key, and each record names its machine and its source run.
MACHINES_KEY = "machines"
MACHINE_FIELD = "machine"
SOURCE_RUN_FIELD = "source_run_id"


@dataclass(frozen=True)
class Run:
    """One machine's run: its records (in file order) and its environment description.

    A plain results directory is one Run; a merged directory is one Run per machine, all with the same
    `dir_run_id` (the merged run's id) and `machine_key` (the machine label the merge gave it).
    """

    path: Path
    run_id: str
    env: dict[str, Any]
    records: list[dict[str, Any]] = field(default_factory=list)
    dir_run_id: str = ""
    machine_key: str | None = None
    log_roots: tuple[Path, ...] = ()

    def env_value(self, *keys: str, default: str = UNKNOWN) -> Any:
        """A nested env.json value, or `default` when any key on the way is missing or null."""
        value = dig(self.env, ".".join(keys))
        return default if value is None or value == "" else value

    @property
    def gpus(self) -> list[dict[str, Any]]:
        gpus = self.env.get("gpu")
        return [g for g in gpus if isinstance(g, dict)] if isinstance(gpus, list) else []

    @property
    def machine(self) -> str:
        """A short machine label: the GPU name when there is one, else the CPU model, with the hostname."""
        host = self.machine_key or self.env_value("host", "hostname")
        if self.gpus:
            what = " + ".join(str(g.get("name") or UNKNOWN) for g in self.gpus)
        else:
            what = str(self.env_value("host", "cpu_model"))
        return f"{what} ({host})" if host != UNKNOWN else what


def load_runs(result_dirs: list[Path]) -> list[Run]:
    """Load each result directory; a directory without cells.jsonl contributes the run dirs directly inside it."""
    runs: list[Run] = []
    for d in result_dirs:
        d = Path(d)
        if (d / "cells.jsonl").is_file():
            runs.extend(load_run(d))
            continue
        children = sorted(p for p in d.iterdir() if (p / "cells.jsonl").is_file()) if d.is_dir() else []
        if not children:
            raise FileNotFoundError(f"{d}: no cells.jsonl here nor in any directory directly inside it")
        log.info("%s: holds %d runs", d, len(children))
        for c in children:
            runs.extend(load_run(c))
    return runs


def load_run(run_dir: Path) -> list[Run]:
    """Load one results directory (cells.jsonl plus an optional env.json): one Run, or one per merged machine."""
    run_dir = Path(run_dir)
    records = [r for r in read_records(run_dir / "cells.jsonl") if isinstance(r, dict)]
    env: dict[str, Any] = {}
    env_path = run_dir / "env.json"
    if env_path.is_file():
        try:
            loaded = json.loads(env_path.read_text(encoding="utf-8"))
            env = loaded if isinstance(loaded, dict) else {}
        except (OSError, json.JSONDecodeError) as e:
            log.warning("%s: unreadable env.json (%s); machine details shown as unknown", run_dir, e)
    else:
        log.warning("%s: no env.json; machine details shown as unknown", run_dir)
    run_id = str(
        env.get("run_id") or next((r.get("run_id") for r in records if r.get("run_id")), None) or run_dir.name
    )
    machines = env.get(MACHINES_KEY)
    if isinstance(machines, list) and machines:
        return _split_merged(run_dir, run_id, machines, records)
    return [Run(run_dir, run_id, env, records, dir_run_id=run_id, log_roots=(run_dir,))]


def _split_merged(run_dir: Path, run_id: str, machines: list, records: list[dict]) -> list[Run]:
    runs, claimed = [], set()
    for entry in machines:
        if not isinstance(entry, dict):
            continue
        key = str(entry.get(MACHINE_FIELD) or UNKNOWN)
        claimed.add(key)
        env = entry.get("env") if isinstance(entry.get("env"), dict) else {}
        source = Path(str(entry["source"])) if entry.get("source") else None
        roots = (run_dir, source) if source else (run_dir,)
        mine = [r for r in records if str(r.get(MACHINE_FIELD)) == key]
        runs.append(Run(run_dir, str(entry.get("run_id") or run_id), env, mine, run_id, key, roots))
    orphans = [r for r in records if str(r.get(MACHINE_FIELD)) not in claimed]
    if orphans:
        log.warning(
            "%s: %d records name no machine listed in env.json; shown as machine unknown",
            run_dir,
            len(orphans),
        )
        runs.append(Run(run_dir, run_id, {}, orphans, run_id, UNKNOWN, (run_dir,)))
    return runs


def dig(obj: Any, path: str) -> Any:
    """The value at a dotted path (`latency_ms.p50`) in nested dicts, or None."""
    for key in path.split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def number(rec: dict, path: str) -> float | None:
    """A numeric field, or None when absent, null, boolean or not a finite number."""
    value = dig(rec, path)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if value != value or value in (float("inf"), float("-inf")):
        return None
    return float(value)


def null_reason(rec: dict, path: str) -> str:
    """Why a field holds no value: the record's own `null_reasons` (the field or a parent), else its status."""
    reasons = rec.get("null_reasons") if isinstance(rec.get("null_reasons"), dict) else {}
    parts = path.split(".")
    for n in range(len(parts), 0, -1):
        reason = reasons.get(".".join(parts[:n]))
        if reason:
            return str(reason)
    status = rec.get("status")
    if status == "skipped":
        return f"skipped: {rec.get('reason') or 'no reason recorded'}"
    if status in FAILED_STATUSES:
        cls = dig(rec, "failure.class")
        return f"{status}" + (f" ({cls})" if cls else "")
    if status == "exported":
        return "export-only target: no runtime for it on this machine"
    return "not recorded (the record gives no reason)"


def is_failed(rec: dict) -> bool:
    """The record's status is one of the failed statuses (not skipped, exported or ok)."""
    return rec.get("status") in FAILED_STATUSES


def shape_label(rec: dict) -> str:
    """`640x640` for a static cell, `dynamic` for the dynamic probe (the run shape is shown inside the cell)."""
    if rec.get("dynamic"):
        return "dynamic"
    h, w = rec.get("height"), rec.get("width")
    return f"{h}x{w}" if h and w else UNKNOWN


def run_shape(rec: dict) -> str:
    """The shape the record actually ran at: `480x480`, or `export probe` for a dynamic record without one."""
    h, w = rec.get("height"), rec.get("width")
    if h and w:
        return f"{h}x{w}"
    return "export probe" if rec.get("dynamic") else UNKNOWN
