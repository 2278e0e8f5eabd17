"""What each LoadGen scenario runs with: the scenario durations (short for a CPU matrix, or MLPerf's own minimums)
and the `mlperf_loadgen.TestSettings` built from them.

MLPerf Inference's rules (loadgen/mlperf.conf, v6.0) for every scenario: at least 600 s (`min_duration`);
SingleStream's result is the p90 latency, MultiStream's the p99 of 8-sample queries (at least 662 queries), Server's
the rate whose p99 stays within the bound, Offline's samples/s (at least 24576 samples for RetinaNet); the rate
schedule and the sample order come from fixed seeds. Early stopping (loadgen/early_stopping.cc) then decides, at 99%
confidence, whether the queries run guarantee the percentile: a p99 needs at least 459 queries with none over the
bound, a p90 44. A CPU matrix cannot spend ten minutes per scenario and cell, so the default (`short`) runs seconds
and targets the p90 for MultiStream and Server too (the p99 LoadGen also reports, without a guarantee at that
count); `--scenario-durations mlperf` runs MLPerf's minimums and percentiles. Every result records which.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

#: LoadGen's performance sample set: the bundled images, in this order (harness.yolo.inputs.IMAGES)
SINGLE_STREAM = "single-stream"
MULTI_STREAM = "multi-stream"
SERVER = "server"
OFFLINE = "offline"
LOADGEN_SCENARIOS = (SINGLE_STREAM, MULTI_STREAM, SERVER, OFFLINE)


@dataclass(frozen=True)
class Durations:
    """Minimum durations (ms), query counts and target percentiles of the LoadGen scenarios."""

    name: str
    single_ms: int
    single_queries: int
    multi_ms: int
    multi_queries: int
    multi_percentile: float
    server_ms: int
    server_queries: int
    server_percentile: float
    offline_ms: int
    offline_samples: int
    #: LoadGen Offline runs per concurrency of the sweep (interleaved), for the stream count's interval
    offline_rounds: int
    #: LoadGen Server runs the rate search may spend
    server_steps: int
    single_percentile: float = 0.90
    #: the most a MultiStream run may last (0: no cap; LoadGen's `max_duration_ms`): a run it cuts has fewer than
    #: its queries and is INVALID (the camera-capacity search caps its screening runs, whose slow ones fail anyway)
    multi_max_ms: int = 0

    def to_dict(self) -> dict:
        return asdict(self)

    def differs_from_mlperf(self) -> list[str]:
        """What these durations change from MLPerf's rules, in words (empty for `mlperf`)."""
        out = []
        m = MLPERF
        for scenario, mine, theirs in (
            ("single-stream", (self.single_ms, self.single_queries), (m.single_ms, m.single_queries)),
            ("multi-stream", (self.multi_ms, self.multi_queries), (m.multi_ms, m.multi_queries)),
            ("server", (self.server_ms, self.server_queries), (m.server_ms, m.server_queries)),
            ("offline", (self.offline_ms, self.offline_samples), (m.offline_ms, m.offline_samples)),
        ):
            if mine != theirs:
                out.append(
                    f"{scenario}: at least {mine[0] / 1000:g} s and {mine[1]} queries (MLPerf: {theirs[0] / 1000:g} s"
                    f" and {theirs[1]})"
                )
        for scenario, mine, theirs in (
            ("multi-stream", self.multi_percentile, m.multi_percentile),
            ("server", self.server_percentile, m.server_percentile),
        ):
            if mine != theirs:
                out.append(f"{scenario}: p{100 * mine:g} target (MLPerf: p{100 * theirs:g})")
        return out


#: seconds per scenario on a CPU matrix; the query counts are the fewest with which early stopping can pass
#: (p90: 64 queries with one over the percentile; the server's 100 allow 3 of 100 over the bound); offline runs
#: 0.5 s per round (9 rounds in the sweep), the server at most 4 rates (a bracket within 15% from a good start)
SHORT = Durations(
    name="short",
    single_ms=1000,
    single_queries=100,
    multi_ms=1000,
    multi_queries=64,
    multi_percentile=0.90,
    server_ms=1000,
    server_queries=100,
    server_percentile=0.90,
    offline_ms=500,
    offline_samples=1,
    offline_rounds=3,
    server_steps=4,
)
#: MLPerf Inference's minimums (loadgen/mlperf.conf: 600 s everywhere, MultiStream 662 queries, Offline 24576
#: samples as for RetinaNet) and percentiles (MultiStream and Server p99)
MLPERF = Durations(
    name="mlperf",
    single_ms=600_000,
    single_queries=100,
    multi_ms=600_000,
    multi_queries=662,
    multi_percentile=0.99,
    server_ms=600_000,
    server_queries=100,
    server_percentile=0.99,
    offline_ms=600_000,
    offline_samples=24576,
    offline_rounds=1,
    server_steps=8,
)
DURATIONS = {d.name: d for d in (SHORT, MLPERF)}


def durations(name: str) -> Durations:
    """The durations called `name` (--scenario-durations); ValueError names the valid ones."""
    try:
        return DURATIONS[name]
    except KeyError:
        raise ValueError(f"unknown scenario durations {name!r}; valid: {', '.join(DURATIONS)}") from None


def loadgen_settings(
    scenario: str,
    d: Durations,
    *,
    seed: int,
    expected_ms: float,
    samples_per_query: int = 1,
    rate: float | None = None,
    bound_ms: float | None = None,
    expected_qps: float | None = None,
):
    """The `mlperf_loadgen.TestSettings` of one LoadGen run of `scenario` (PerformanceOnly).

    `expected_ms`: a query's expected latency (LoadGen pre-generates queries from it); `rate` and `bound_ms`: the
    server's Poisson rate and latency bound; `expected_qps`: the offline samples/s LoadGen sizes its query for
    (it issues 10% more than `offline_ms` at that rate)."""
    import mlperf_loadgen as lg

    s = lg.TestSettings()
    s.mode = lg.TestMode.PerformanceOnly
    # The seeds of the sample order and the Poisson schedule: the same run id and seed replays the same queries.
    s.sample_index_rng_seed = seed
    s.qsl_rng_seed = seed
    s.schedule_rng_seed = seed
    expected_ns = max(1.0, expected_ms) * 1e6
    if scenario == SINGLE_STREAM:
        s.scenario = lg.TestScenario.SingleStream
        s.single_stream_expected_latency_ns = int(expected_ns)
        s.single_stream_target_latency_percentile = d.single_percentile
        s.min_duration_ms, s.min_query_count = d.single_ms, d.single_queries
    elif scenario == MULTI_STREAM:
        s.scenario = lg.TestScenario.MultiStream
        s.multi_stream_samples_per_query = samples_per_query
        s.multi_stream_expected_latency_ns = int(expected_ns)
        s.multi_stream_target_latency_percentile = d.multi_percentile
        s.min_duration_ms, s.min_query_count = d.multi_ms, d.multi_queries
        if d.multi_max_ms:
            s.max_duration_ms = d.multi_max_ms
    elif scenario == SERVER:
        if rate is None or bound_ms is None:
            raise ValueError("a server run needs its rate and its latency bound")
        s.scenario = lg.TestScenario.Server
        s.server_target_qps = rate
        s.server_target_latency_ns = int(bound_ms * 1e6)
        s.server_target_latency_percentile = d.server_percentile
        s.min_duration_ms, s.min_query_count = d.server_ms, d.server_queries
    elif scenario == OFFLINE:
        s.scenario = lg.TestScenario.Offline
        s.offline_expected_qps = expected_qps or 1000.0 / max(expected_ms, 1e-3)
        s.min_duration_ms, s.min_query_count = d.offline_ms, d.offline_samples
    else:
        raise ValueError(f"LoadGen has no scenario {scenario!r}")
    return s
