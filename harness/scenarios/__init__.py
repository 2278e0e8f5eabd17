"""Use-case scenarios of one loaded runner: single-stream, multi-stream, server, offline and the camera check.

Every query is one end-to-end pipeline call (harness.measure.pipeline) on one of the runner's streams
(harness.backends.base.Runner.streams): the runtime's own concurrency where it has one. harness.scenarios.loadgen
issues the queries and keeps the clock. `run_all` returns the record's `scenarios` section: name -> result, each
with its metric, value, unit, rule and whether the rule held.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.measure.pipeline import for_runner
from harness.scenarios import loadgen

SCENARIOS = ("single-stream", "multi-stream", "server", "offline", "camera")
#: multi-stream's streams on a GPU (MLPerf's MultiStream: 8 samples per query); on a CPU, the thread budget
GPU_STREAMS = 8
DEFAULT_BOUND_MS = 100.0
#: at most 12 s per scenario: 100 queries of a 120 ms call still fit
DEFAULT_BUDGET = loadgen.Budget(max_s=12.0)


@dataclass(frozen=True)
class ScenarioConfig:
    """What the scenarios run with (the run's options)."""

    bound_ms: float = DEFAULT_BOUND_MS
    threads: int = 2
    seed: int = 0
    budget: loadgen.Budget = DEFAULT_BUDGET
    offline_sweep: tuple[int, ...] = (1, 2, 4)
    offline_s: float = 1.5
    camera_s: float = 2.0

    def streams(self, device: str) -> int:
        return GPU_STREAMS if device != "cpu" else max(1, self.threads)


#: the server runs the fewest streams whose offline throughput is within this share of the best
SERVER_STREAMS_SLACK = 0.10


def server_concurrency(offline: dict) -> int:
    """The server scenario's streams: the fewest whose offline images/s is within SERVER_STREAMS_SLACK of the
    best (more streams than that add contention to every query's latency, not throughput); 1 without a sweep."""
    sweep = [r for r in offline.get("sweep") or [] if r.get("ips")]
    if not sweep:
        return 1
    best = max(r["ips"] for r in sweep)
    return min(r["concurrency"] for r in sweep if r["ips"] >= (1 - SERVER_STREAMS_SLACK) * best)


def queries(runner, cell, n: int) -> tuple[list[loadgen.Query], str]:
    """`n` end-to-end queries, one per stream of the runner, and the runtime's concurrency mechanism."""
    streams = runner.streams(n)
    return [for_runner(runner, cell, call=c).whole for c in streams.calls], streams.mechanism


def run_all(runner, cell, cfg: ScenarioConfig, single_p50_ms: float | None = None) -> dict:
    """Every scenario of `runner` for `cell`, in turn. A scenario that raises is a result with its reason."""
    out: dict[str, dict] = {}
    one, _ = queries(runner, cell, 1)
    n = cfg.streams(cell.device)

    def guarded(name, fn):
        try:
            out[name] = fn()
        except Exception as e:  # one scenario failing must not lose the others
            out[name] = {
                "scenario": name,
                "value": None,
                "valid": False,
                "reason": f"{type(e).__name__}: {e}",
            }

    guarded("single-stream", lambda: loadgen.single_stream(one[0], cfg.budget))
    p50 = (out["single-stream"].get("p50") or single_p50_ms or 10.0) / 1e3

    def multi():
        qs, mech = queries(runner, cell, n)
        return loadgen.multi_stream(qs, mech, cfg.budget)

    def server():
        best = server_concurrency(out.get("offline") or {})
        qs, mech = queries(runner, cell, best)
        # start at half the rate the streams could serve back to back
        return loadgen.server(
            qs, mech, cfg.bound_ms, start_rate=0.5 * best / p50, seed=cfg.seed, budget=cfg.budget
        )

    def offline():
        return loadgen.offline(
            lambda c: queries(runner, cell, c), cell.batch, cfg.offline_sweep, cfg.offline_s
        )

    guarded("multi-stream", multi)
    guarded("offline", offline)
    guarded("server", server)
    guarded("camera", lambda: loadgen.camera(one[0], seconds=cfg.camera_s))
    return out
