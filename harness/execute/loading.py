"""The load stages: the probe (load and first run in a fresh process, and the cell's host and GPU memory there),
then the artifact loaded in this process with the trackers started."""

from __future__ import annotations

import time
from pathlib import Path

from harness.backends._shared.libstdcxx import PRELOAD_OPTION, preloaded, system_libstdcxx
from harness.core.record import Memory, set_null
from harness.execute.config import RunConfig
from harness.execute.isolate import run_probe
from harness.execute.memory_cache import GPU_MEASURES, MemoryCache
from harness.execute.services import Progress, RunState
from harness.execute.state import AttemptState, fail, fail_outcome
from harness.measure.host_memory import release_memory
from harness.measure.trackers import trackers_for


def probe(s: AttemptState, memory_cache: MemoryCache, config: RunConfig, progress: Progress) -> bool:
    """Load and run the artifact in a separate process: the first run of a fresh artifact (a runtime that aborts on
    it is recorded, not fatal) and the cell's host and GPU memory, measured there so it does not depend on earlier
    cells (or reused from an earlier run's measurement of the same artifact, see harness.execute.memory_cache)."""
    cfg, cell = config, s.cell
    kept = memory_entry(s, memory_cache, cfg)
    cached = memory_cache.get(kept) if kept and not cfg.refresh_cache else None
    # a loader remedy (load options) changes how the same artifact loads: it is loaded in a fresh process first,
    # cached or not, so a native crash it does not cure ends that process, not the run
    first = (s.fresh and cfg.isolate_first_run) or bool(s.export_info.get("load_options"))
    rounds = cfg.memory_rounds if kept and cached is None else 0
    if first or rounds:
        outcome = run_probe(
            cell,
            str(s.artifact),
            s.export_info,
            cell.shape.height,
            cell.shape.width,
            s.log_path.parent / f"{s.attempt.cell_id}.probe",
            s.log_path,
            cfg.probe_timeout_s,
            cfg.export_memory_gb,
            rounds=rounds,
        )
        if outcome.status != "ok":
            fail_outcome(s, outcome, "run", progress)
            facts = loader_facts(s.export_info, outcome.info.get("preload"))
            if facts and s.rec.failure is not None:
                s.rec.failure["loader"] = facts
            return False
        s.preload = outcome.info.get("preload")
        if "memory" in outcome.info:
            mem = outcome.info["memory"]
            mem["source"] = f"a fresh process running load, first run and {rounds} runs: {mem['source']}"
            cached = memory_cache.put(kept, mem, outcome.info.get("null_reasons") or {}, cfg.run_id)
            cached["origin"] = "measured in this attempt"
    if cached:
        s.rec.memory = Memory(**{**cached["memory"], "origin": cached["origin"]})
        s.rec.null_reasons.update(cached["null_reasons"])
    return True


def loader_facts(export_info: dict, preload: dict | None = None) -> dict | None:
    """What a record says of how its artifact loaded, where it matters: the load options (a loader rung), the
    library preloaded and how (the probes' outcome, and in this process), an AOTInductor wrapper's needed libraries
    and whether it carries libstdc++'s own code. None for an artifact with none of these."""
    out: dict = {}
    if export_info.get("load_options"):
        out["load_options"] = dict(export_info["load_options"])
    if preload:
        out["libstdcxx"] = dict(preload)
    if export_info.get("wrapper"):
        out["wrapper"] = export_info["wrapper"]
    return out or None


def memory_entry(s: AttemptState, memory_cache: MemoryCache, config: RunConfig) -> Path | None:
    """Where this cell's fresh-process memory measurement is kept; None when memory is measured in-process."""
    if not config.memory_rounds:
        return None
    identity = s.mat.sha256 if not s.backend.exports else ""
    return memory_cache.path(
        s.attempt.cell_id,
        s.artifact,
        identity,
        s.backend.library,
        config.threads,
        config.memory_rounds,
        GPU_MEASURES if s.cell.device == "cuda" else "",
    )


def load(s: AttemptState, run: RunState, memory_rounds: int, progress: Progress) -> bool:
    """Release the previous cell's runtime, start the trackers, and load the artifact."""
    run.last_runner = None  # the previous cell's runtime must not count in this one's memory
    if not memory_rounds:
        release_memory()  # measured here: at least give back what earlier cells freed
    # memory was measured in the probe's fresh process unless that is switched off: host memory is not measured
    # here, and the GPU memory tracker takes only its snapshot
    s.trackers = trackers_for(s.cell, skip=("host_memory",) if memory_rounds else ())
    if memory_rounds:
        for t in s.trackers:
            t.measured_apart()
    for t in s.trackers:
        t.start()
    t0 = time.perf_counter()
    try:
        s.runner = s.backend.load(s.artifact, s.cell, s.export_info)
    except Exception as e:
        return fail(s, "load_failed", "load", e, progress)
    s.rec.load_s = time.perf_counter() - t0
    facts = loader_facts(s.export_info, s.preload)
    if facts:
        if (facts.get("load_options") or {}).get(
            PRELOAD_OPTION
        ):  # and how this process did it (aoti.load_package)
            facts.setdefault("libstdcxx", {})["in_this_process"] = promote_global_how()
        s.rec.loader = facts
    s.rec.compile_s = s.runner.compile_s
    if s.runner.compile_s is None and s.runner.compile_reason:
        set_null(s.rec, "compile_s", s.runner.compile_reason)
    run.last_runner = s.runner
    for t in s.trackers:
        bind = getattr(t, "bind", None)
        if bind is not None:
            bind(s.runner)
    return True


def promote_global_how() -> str:
    """How the benchmark process has the system libstdc++ in its global scope (the rung's load did it)."""
    found = system_libstdcxx()
    if found["path"] and preloaded(found["path"]):
        return f"LD_PRELOAD when this process started ({found['path']})"
    return f"RTLD_GLOBAL in the running process ({found.get('path')}); LD_PRELOAD cannot act after a process starts"
