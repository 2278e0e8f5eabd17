"""The report header: which runs, when, from which commit, on which machine, with which weights."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

from harness.core.record import CellRecord
from harness.core.results_dir import (
    UNKNOWN,
    Run,
    SkippedLine,
    duplicate_cells,
    incomplete_note,
    skipped_words,
)
from harness.decide.index import RunIndex
from harness.decide.load import finite
from harness.report.matrix import machine_label

log = logging.getLogger(__name__)


@dataclass
class RunHeader:
    """What the header shows about one run: when, which commit, which machine, which weights."""

    number: int
    run_id: str
    path: str
    started_at: str
    git_commit: str
    machine: str
    host: list[tuple[str, str]]
    gpus: list[str]
    cuda: str
    libraries: list[tuple[str, str]]
    weights_note: str
    weights: list[str] = field(default_factory=list)
    random_init: bool = False
    synthetic: bool = False  # env.json or a record says `synthetic: true`: generated, not measured
    #: why the run is not whole: "incomplete: N of M cells (why)", cells recorded more than once
    integrity: list[str] = field(default_factory=list)


def is_synthetic(env: dict, records: list[CellRecord]) -> bool:
    """Whether a run is marked as generated data: `synthetic: true` in its env.json or in any of its records."""
    return env.get("synthetic") is True or any(r.synthetic is True for r in records)


def integrity_notes(env: dict, records: list[CellRecord], skipped: tuple[SkippedLine, ...] = ()) -> list[str]:
    """What a reader must know before trusting a run as whole: it did not finish (env.json `incomplete`), it
    holds two records of one cell (two writers on one run id; every record is shown), or lines of its cells.jsonl
    were skipped as unreadable or not fitting the record schema (named, counted; the rest is shown)."""
    notes = []
    if skipped:
        notes.append(f"{skipped_words(skipped)}: the report is of the other records")
    incomplete = incomplete_note(env)
    if incomplete:
        notes.append(incomplete)
    later = budget_note(env)
    if later:
        notes.append(later)
    twice = duplicate_cells([r for r in records if not r.remedy])
    if twice:
        shown = ", ".join(twice[:3]) + (" ..." if len(twice) > 3 else "")
        notes.append(f"{len(twice)} cell(s) recorded more than once ({shown}): every record is shown")
    return notes


def budget_note(env: dict) -> str | None:
    """The cells the main job's time budget left for later (env.json `plan` of kind "screen",
    harness.plan.screen_budget): never failures, and the command that runs them; None when it left none."""
    plan = env.get("plan")
    if not isinstance(plan, dict) or plan.get("kind") != "screen":
        return None
    left = plan.get("left_out")
    ids = [c for v in left.values() if isinstance(v, list) for c in v] if isinstance(left, dict) else []
    if not ids:
        return None
    budget, suggested = str(plan.get("budget") or ""), str(plan.get("suggested_budget") or "")
    return (
        f"{len(ids)} cell(s) not run within the budget {budget} (not failures: left for later, "
        f"{plan.get('left_for_later') or 'see env.json plan'}; `--resume --run-id {env.get('run_id')} "
        f"--time-budget {suggested}` runs them)"
    )


def _gpu_line(g: dict) -> str:
    parts = [str(g.get("name") or UNKNOWN)]
    if g.get("compute_capability"):
        parts.append(f"compute capability {g['compute_capability']}")
    parts.append(f"driver {g.get('driver') or UNKNOWN}")
    total = g.get("memory_total_mb")  # env.json's name; the value is NVML's total / 2**20, i.e. MiB
    if isinstance(total, int | float) and total:
        parts.append(f"{total:.0f} MiB")
    return ", ".join(map(str, parts))


def run_header(idx: RunIndex, indexes: list[RunIndex]) -> RunHeader:
    """The header of one run, from its env.json (missing keys shown as unknown) and its records."""
    run = idx.run
    cores = f"{run.env_value('host', 'cpu_cores_logical')} logical / {run.env_value('host', 'cpu_cores_physical')} physical"
    host = [
        ("hostname", str(run.env_value("host", "hostname"))),
        ("OS", str(run.env_value("host", "os"))),
        ("Python", str(run.env_value("host", "python"))),
        ("CPU", str(run.env_value("host", "cpu_model"))),
        ("CPU cores", cores),
        ("CPU threads", _threads_line(run)),
        ("CPU quota", _quota_line(run)),
        ("heap policy", _allocator_line(run)),
        ("drift canary", _canary_line(run)),
        ("RAM", f"{run.env_value('host', 'ram_gb')} GB"),
    ]
    cuda = run.env.get("cuda")
    if isinstance(cuda, dict) and cuda:
        cuda_s = ", ".join(f"{k} {v}" for k, v in cuda.items() if v is not None) or UNKNOWN
    else:
        cuda_s = "none (no CUDA on this machine)" if not run.gpus else UNKNOWN
    libs = run.env.get("libraries") if isinstance(run.env.get("libraries"), dict) else {}
    # Skipped cells never load a model and record "unknown"; list what the cells that ran used.
    weights = sorted({r.weights for r in run.records if r.weights not in (None, "", "unknown")})
    return RunHeader(
        number=idx.position + 1,
        run_id=run.run_id,
        path=str(run.path) + (f" (merged run {run.dir_run_id})" if run.machine_key else ""),
        started_at=str(run.env_value("started_at", default="") or _first_started(run.records)),
        git_commit=str(run.env_value("git_commit")),
        machine=machine_label(idx, indexes),
        host=host,
        gpus=[_gpu_line(g) for g in run.gpus] or ["none"],
        cuda=cuda_s,
        libraries=[(str(k), "not installed" if v is None else str(v)) for k, v in sorted(libs.items())],
        weights_note=str(run.env_value("weights_note", default="")),
        weights=weights or ["unknown (no record names its weights)"],
        random_init=any(w.startswith("random-init") for w in weights),
        synthetic=is_synthetic(run.env, run.records),
        integrity=integrity_notes(run.env, run.records, run.skipped),
    )


def _threads_line(run: Run) -> str:
    """The run's thread budget (env.json) and what the runtimes of its cells reported they used."""
    budget = run.env_value("threads", "budget")
    source = run.env_value("threads", "source")
    used = sorted({r.threads for r in run.records if isinstance(r.threads, int)})
    reported = (
        f"; runtimes report {', '.join(map(str, used))}" if used else "; no runtime reported its threads"
    )
    if budget == UNKNOWN:
        return f"budget not recorded ({source}){reported}" if source != UNKNOWN else "not recorded"
    return f"budget {budget} ({source}){reported}"


def _quota_line(run: Run) -> str:
    """The cgroup CPU quota the run ran in (env.json host.cpu_quota) and how often it throttled during the run
    (cpu_throttle), or that there was none."""
    quota = run.env_value("host", "cpu_quota", default=None)
    if not isinstance(quota, dict):
        return "not recorded (a run from before the quota was read)"
    cpus = quota.get("cpus")
    if not isinstance(cpus, int | float) or isinstance(cpus, bool):
        return f"none ({quota.get('reason') or 'no CPU quota'})"
    text = f"{cpus:g} CPU ({quota.get('quota_us')}/{quota.get('period_us')} us, {quota.get('source')})"
    during = run.env_value("cpu_throttle", "during_run", default=None)
    if isinstance(during, dict) and isinstance(during.get("periods"), int):
        text += f"; throttled in {during.get('throttled')} of {during['periods']} periods during the run"
    threads = run.env_value("threads", "over_quota", default=None)
    return text + (f"; {threads}" if isinstance(threads, str) else "")


def _allocator_line(run: Run) -> str:
    """The run's heap policy (env.json `allocator`, harness.core.allocator)."""
    a = run.env.get("allocator")
    if not isinstance(a, dict):
        return "not recorded (a run from before --malloc: the C library's defaults)"
    state = "applied" if a.get("applied") else "not applied"
    return (
        f"{a.get('policy') or UNKNOWN} ({state}: {a.get('reason') or UNKNOWN}; {a.get('library') or UNKNOWN})"
    )


def _canary_line(run: Run) -> str:
    """How the machine's speed moved through the run: the drift canary's readings (env.json `canary`)."""
    c = run.env.get("canary")
    if not isinstance(c, dict):
        return "not recorded (a run from before the drift canary)"
    if c.get("median") is None:
        return f"none: {c.get('reason') or UNKNOWN}"
    readings = c.get("readings")
    n = len(readings) if isinstance(readings, list) else 0
    median, lo, hi = (finite(c.get(k)) for k in ("median", "min", "max"))
    if (
        median is None or lo is None or hi is None
    ):  # env.json is text from a file: not the canary's own figures
        return f"not readable: median, min and max are not all numbers in env.json ({n} readings)"
    ratio = f"{hi / lo:.2f}" if lo > 0 else "n/a"
    return (
        f"median {median:.3f} ms, min {lo:.3f}, max {hi:.3f} (max/min "
        f"{ratio}) over {n} readings before and after each workload"
    )


def _first_started(records: list[CellRecord]) -> str:
    times = sorted(r.started_at for r in records if r.started_at)
    return times[0] if times else UNKNOWN


def report_id(indexes: list[RunIndex]) -> str:
    """The report's directory name: the run id, or the run ids joined when several runs render together."""
    ids = list(dict.fromkeys(idx.run.dir_run_id or idx.run.run_id for idx in indexes))
    rid = ids[0] if len(ids) == 1 else "+".join(ids)
    rid = re.sub(r"[^A-Za-z0-9._+-]", "_", rid).strip(".") or "report"
    if rid == "latest":  # reports/latest/ is the copy of the newest report
        rid = "run-latest"
    if len(rid) > 100:
        import hashlib

        rid = f"{rid[:60]}+{len(ids) - 1}-more-{hashlib.sha1(rid.encode()).hexdigest()[:8]}"
    return rid
