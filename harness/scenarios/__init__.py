"""Use-case scenarios of one loaded runner, driven by MLPerf LoadGen: single-stream, multi-stream, server and
offline (harness.scenarios.results, harness.scenarios.server), how many cameras it serves at a frame rate
and how to deploy them (harness.scenarios.capacity: a search over MultiStream runs of every way the runner
declares of serving N cameras), and the harness's own camera check
(harness.scenarios.camera: LoadGen has no such scenario).

The harness provides LoadGen's system under test (the runner's end-to-end call on its streams,
harness.scenarios.loadgen) and its query sample library (the bundled images); LoadGen issues the queries, keeps the
clock, judges each run and writes its logs under results/<run>/loadgen/<cell-id>/<scenario>/. `run_all` returns the
record's `scenarios` section: name -> result, each with its metric, value, unit, LoadGen's verdict (`valid`, and
`reason` when not), the rule, and its log files.

An interruption (SIGINT, SIGTERM: `run_all`'s `stop`, harness.execute.interrupt in a run) is never a scenario's
failure: LoadGen's test in progress ends early and is marked incomplete (harness.scenarios.loadgen), the searches
and the scenarios after it do not start (`loadgen.check` between them), and KeyboardInterrupt leaves `run_all`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.backends.base import Streams
from harness.measure.pipeline import for_runner
from harness.scenarios import camera as camera_check
from harness.scenarios import capacity, loadgen
from harness.scenarios import server as server_scenario
from harness.scenarios.capacity import camera_capacity
from harness.scenarios.results import Target, multi_stream, single_stream
from harness.scenarios.settings import LOADGEN_SCENARIOS, SHORT, Durations

log = logging.getLogger(__name__)

SCENARIOS = ("single-stream", "multi-stream", "camera-capacity", "server", "offline", "camera")
#: multi-stream's streams on a GPU (MLPerf's MultiStream: 8 samples per query); on a CPU, the thread budget
GPU_STREAMS = 8
DEFAULT_BOUND_MS = 100.0


@dataclass(frozen=True)
class ScenarioConfig:
    """What the scenarios run with (the run's options)."""

    bound_ms: float = DEFAULT_BOUND_MS
    threads: int = 2
    seed: int = 0
    durations: Durations = SHORT
    offline_sweep: tuple[int, ...] = (1, 2, 4)
    camera_s: float = 2.0
    #: the frame rate the camera-capacity search keeps every camera at (--camera-fps); 0: no search
    camera_fps: float = 30.0
    #: YOLO26_BENCH_SLOWDOWN's factor for this cell's backend: every query stretched to this many times its time
    slowdown: float = 1.0
    images: tuple[str, ...] = field(default=("bus.jpg", "zidane.jpg"))

    def streams(self, device: str) -> int:
        return GPU_STREAMS if device != "cpu" else max(1, self.threads)


def stretched(call: Callable[[Any], Any], factor: float) -> Callable[[Any], Any]:
    """`call`, then a sleep that stretches it to `factor` times its duration (the slowdown testing knob)."""
    if factor <= 1.0:
        return call

    def slow(p: Any) -> Any:
        t0 = time.perf_counter()
        out = call(p)
        time.sleep((time.perf_counter() - t0) * (factor - 1.0))
        return out

    return slow


def streams_for(
    runner, cell, cfg: ScenarioConfig, make_streams: Callable[[int], Streams] | None = None
) -> Callable[[int], tuple[list[loadgen.Query], str]]:
    """`n` -> the query functions of n streams of the runner (one per call `make_streams(n)` gives: by default
    `runner.streams(n)`, one per stream; one for a worker taking the frames in turn): query(i) is one end-to-end
    call on image i."""
    make_streams = make_streams or runner.streams

    def make(n: int) -> tuple[list[loadgen.Query], str]:
        streams = make_streams(n)
        queries: list[loadgen.Query] = []
        for call in streams.calls:
            pipes = [
                for_runner(runner, cell, image=name, call=stretched(call, cfg.slowdown))
                for name in cfg.images
            ]

            def query(i: int, pipes=pipes) -> object:
                return pipes[i % len(pipes)].whole()

            queries.append(query)
        return queries, streams.mechanism

    return make


def batched_for(
    runner, cell, cfg: ScenarioConfig, make_streams: Callable[[int], Streams] | None = None
) -> Callable[[int], tuple[list[loadgen.BatchQuery], str]] | None:
    """`n` -> one batch query: the n samples LoadGen issues together as one end-to-end call of batch n (the frame
    of the first sample, n times, as the harness's batch cells run); None where the runner takes only its cell's
    batch (harness.backends.base.Runner.batched) or the cell is batched already."""
    if cell.batch != 1 or runner.batched(2) is None:
        return None

    def make(n: int) -> tuple[list[loadgen.BatchQuery], str]:
        streams = (make_streams or runner.batched)(n)
        call = stretched(streams.calls[0], cfg.slowdown)
        at_n = replace(cell, batch=n)
        pipes = [for_runner(runner, at_n, image=name, call=call) for name in cfg.images]

        def query(indices, pipes=pipes) -> object:
            return pipes[indices[0] % len(pipes)].whole()

        return [query], streams.mechanism

    return make


def ways_for(runner, cell, cfg: ScenarioConfig, target: Target, expected_ms: float) -> list[capacity.Way]:
    """The camera-capacity search's ways: every mechanism the runner declares (harness.backends.base.Runner.
    mechanisms, with the run's thread budget on a CPU), each as LoadGen MultiStream runs of its own streams; those
    that do not apply keep why."""
    threads = cfg.threads if cell.device == "cpu" else None
    ways = []
    for m in runner.mechanisms(threads):
        why = m.why_not
        if m.grouped and cell.batch != 1 and why is None:
            why = f"the cell is batched already (batch {cell.batch})"
        if why is not None or m.make is None:
            ways.append(capacity.Way(m.key, m.words, None, None, why or "not applicable"))
            continue
        make = batched_for(runner, cell, cfg, m.make) if m.grouped else streams_for(runner, cell, cfg, m.make)
        tgt = replace(target, streams_for=make, grouped=m.grouped)
        ways.append(capacity.way_of(m.key, m.words, tgt, m.plan, cfg.camera_fps, expected_ms))
    return ways


def skipped(name: str, why: str) -> dict:
    return {"scenario": name, "value": None, "valid": False, "reason": why, "driver": "mlperf_loadgen"}


#: scenarios another one starts from: the server's rate search takes the offline sweep's concurrency and rate
NEEDS = {"server": ("offline",)}


def with_needs(names: Iterable[str]) -> tuple[str, ...]:
    """`names` and the scenarios they start from (NEEDS), in SCENARIOS' order."""
    wanted = set(names)
    for name in list(wanted):
        wanted.update(NEEDS.get(name, ()))
    return tuple(n for n in SCENARIOS if n in wanted)


def run_all(
    runner,
    cell,
    cfg: ScenarioConfig,
    log_dir: Path,
    run_dir: Path,
    single_p50_ms: float | None = None,
    stop: loadgen.Stop = loadgen.NEVER,
    names: Iterable[str] = SCENARIOS,
    known: dict | None = None,
) -> dict:
    """The scenarios `names` (every one by default; with those they start from, `with_needs`, unless `known`, the
    results the record holds already, has them) of `runner` for `cell`, in turn; the results of those that ran. A
    scenario that raises an error is a result with its reason; an interruption (`stop`: harness.execute.interrupt in
    a run) ends them all with KeyboardInterrupt."""
    asked, known = set(names), dict(known or {})
    todo = tuple(n for n in with_needs(asked) if n in asked or n not in known)
    with loadgen.stopping(stop):
        out = _run_all(runner, cell, cfg, log_dir, run_dir, single_p50_ms, todo, known)
    return {name: out[name] for name in todo if name in out}


def _run_all(
    runner,
    cell,
    cfg: ScenarioConfig,
    log_dir: Path,
    run_dir: Path,
    single_p50_ms: float | None,
    names: tuple[str, ...],
    known: dict[str, dict],
) -> dict:
    out: dict[str, dict] = dict(
        known
    )  # what a scenario starts from, where the record has it (the offline sweep)

    def guarded(name, fn):
        loadgen.check()  # no scenario starts once the run was told to stop
        try:
            out[name] = fn()
        except Exception as e:  # one scenario failing must not lose the others
            log.exception("scenario %s failed", name)
            out[name] = {
                "scenario": name,
                "value": None,
                "valid": False,
                "reason": f"{type(e).__name__}: {e}",
            }

    make = streams_for(runner, cell, cfg)
    missing = loadgen.missing()
    if missing:
        for name in LOADGEN_SCENARIOS:
            if name in names:
                out[name] = skipped(name, missing)
        if cfg.camera_fps > 0 and "camera-capacity" in names:
            out["camera-capacity"] = skipped("camera-capacity", missing)
    else:
        target = Target(make, len(cfg.images), cell.batch, log_dir, run_dir, cfg.durations, cfg.seed)
        p50 = single_p50_ms or 10.0
        n = cfg.streams(cell.device)
        # expected latencies low: LoadGen pre-generates queries from them, and too few would end a run short
        if "single-stream" in names:
            guarded("single-stream", lambda: single_stream(target, 0.5 * p50))
        p50 = (out.get("single-stream") or {}).get("p50") or p50  # LoadGen's, with the slowdown if any
        if "multi-stream" in names:
            guarded("multi-stream", lambda: multi_stream(target, n, 0.5 * p50))
        if cfg.camera_fps > 0 and "camera-capacity" in names:
            guarded(
                "camera-capacity",
                lambda: camera_capacity(
                    target, cfg.camera_fps, 0.5 * p50, ways_for(runner, cell, cfg, target, 0.5 * p50)
                ),
            )
        if "offline" in names:
            guarded(
                "offline",
                lambda: server_scenario.offline_sweep(target, cfg.offline_sweep, 1000.0 / p50, cfg.threads),
            )

        def server():
            off = out.get("offline") or {}
            streams = off.get("concurrency") or 1
            row = next((r for r in off.get("sweep") or [] if r["concurrency"] == streams), None)
            capacity = row["ips"] / cell.batch if row and row.get("ips") else streams * 1000.0 / p50
            _, mechanism = make(streams)
            # the median service time alone (single-stream's p50): over the bound, no rate can pass
            return server_scenario.server(
                target, streams, mechanism, cfg.bound_ms, capacity, 0.5 * p50, service_ms=p50
            )

        if "server" in names:
            guarded("server", server)
    if "camera" in names:
        query = make(1)[0][0]
        guarded(
            "camera", lambda: camera_check.camera(lambda: query(0), seconds=cfg.camera_s, check=loadgen.check)
        )
    return {name: out[name] for name in SCENARIOS if name in out}
