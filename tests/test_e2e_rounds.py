"""How many end-to-end rounds a workload times (issue 36, item 4): the rule follows the measured cost of a pair, not
the device's name. A pipeline whose call costs a few ms (a GPU cell) times the 100 pairs its p99 needs and the p99
exists; one whose call costs ~100 ms (a CPU cell at 640) times the p90's 20 and its p99 is null with the reason;
one slower still times the stage check's 10. Stage times come from a fake clock (tests/fake_clock.py): exact on
any machine, however loaded."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from harness.core.record import PERCENTILE_MIN_ROUNDS
from harness.execute.config import RunConfig
from harness.execute.usecase import MIN_E2E_PAIRS, e2e_min_pairs, single_stream_rule, time_e2e_together
from harness.measure.pipeline import Pipeline
from harness.measure.stats import latency_from_samples
from tests.fake_clock import FakeClock


def _config(tmp_path, **kw) -> RunConfig:
    return RunConfig(run_id="e2e-rounds", results_dir=tmp_path, cache_dir=tmp_path / "cache", **kw)


def _pipeline(clock: FakeClock, call_ms: float, first_ms: float | None = None) -> Pipeline:
    """Five stages summing to `call_ms` on the fake clock; the very first call takes `first_ms` (a cold start)."""
    calls = {"n": 0}

    def pre(_):
        calls["n"] += 1
        extra = (first_ms - call_ms) if first_ms is not None and calls["n"] == 1 else 0.0
        clock.advance(call_ms * 0.4 + extra)

    share = {"h2d": 0.1, "model": 0.3, "d2h": 0.05, "postprocess": 0.15}
    stages = [("preprocess", pre)] + [(n, clock.taking(call_ms * f)) for n, f in share.items()]
    return Pipeline(stages, {}, "fake postprocess")


def _time(tmp_path, call_ms: float, first_ms: float | None = None, **kw):
    clock = FakeClock()
    cfg = _config(tmp_path, **kw)
    state = SimpleNamespace(attempt=SimpleNamespace(cell_id="c"), e2e=None, e2e_error=None, e2e_min_pairs=20)
    time_e2e_together(
        [state],
        "w",
        cfg,
        lambda _m: None,
        pipeline_of=lambda _s: _pipeline(clock, call_ms, first_ms),
        clock=clock,
    )
    assert state.e2e_error is None
    return state, clock


def test_a_round_of_a_few_ms_times_the_pairs_p99_needs_and_the_p99_exists(tmp_path):
    state, clock = _time(tmp_path, 3.0)  # yolo26n on a GPU: a few ms end to end
    assert state.e2e_min_pairs == PERCENTILE_MIN_ROUNDS["p99"] == 100
    lat = latency_from_samples(state.e2e.walls, "end-to-end")
    assert lat.rounds >= 100 and lat.p99 is not None and lat.p90 is not None
    assert len(state.e2e.staged) == len(state.e2e.walls)
    assert "p99" in single_stream_rule(state.e2e_min_pairs)
    # within the budget: 100 pairs of two 3 ms calls, with the warm-up pair and at most a block of slack
    assert clock.ns / 1e9 <= _config(tmp_path).e2e_p99_budget_s
    rec = _record(state, tmp_path)
    assert rec.latency_e2e_ms.p99 is not None and "latency_e2e_ms.p99" not in rec.null_reasons
    assert rec.scenario_result["p99"] == rec.latency_e2e_ms.p99


def test_a_cold_first_call_does_not_cost_the_p99(tmp_path):
    """The cost is measured on the warm-up pair's faster call: a 500 ms first call (a lazy initialisation) does
    not make a 3 ms pipeline look too slow for the p99's rounds."""
    state, _ = _time(tmp_path, 3.0, first_ms=500.0)
    assert state.e2e_min_pairs == 100
    assert latency_from_samples(state.e2e.walls, "end-to-end").p99 is not None


def test_a_round_of_a_hundred_ms_keeps_the_p90_and_the_p99_is_null(tmp_path):
    state, _ = _time(tmp_path, 100.0)  # a CPU cell at 640: 100 pairs would take 20 s
    assert state.e2e_min_pairs == PERCENTILE_MIN_ROUNDS["p90"]
    lat = latency_from_samples(state.e2e.walls, "end-to-end")
    assert 20 <= lat.rounds < 100 and lat.p90 is not None and lat.p99 is None
    assert "p90" in single_stream_rule(state.e2e_min_pairs)
    rec = _record(state, tmp_path)
    assert rec.latency_e2e_ms.p99 is None and rec.latency_e2e_ms.p90 is not None
    why = rec.null_reasons["latency_e2e_ms.p99"]
    assert "100 pairs p99 needs would take more than 2 s per backend" in why and "timed 20" in why


def _record(state, tmp_path):
    """The record's end-to-end fields, as the end_to_end stage writes them from the timed pairs."""
    from harness.core.axes import Shape
    from harness.core.cell import Cell
    from harness.core.record import new_record
    from harness.execute.usecase import end_to_end

    state.rec = new_record(
        "e2e-rounds", Cell("n", "detect", "e2e", "torch-eager", "cuda", Shape(64, 64)), "none"
    )
    assert end_to_end(state, _config(tmp_path), lambda _m: None)
    return state.rec


@pytest.mark.parametrize(
    ("pair_ms", "want"),
    [(6.0, 100), (20.0, 100), (20.5, 20), (200.0, 20), (201.0, MIN_E2E_PAIRS)],
)
def test_the_rule_follows_the_cost_of_a_pair_against_each_budget(tmp_path, pair_ms, want):
    cfg = _config(tmp_path)  # 100 pairs in 2 s, 20 in 4 s, else 10
    assert e2e_min_pairs(cfg, pair_ms) == want


def test_a_larger_budget_buys_the_p99_for_a_slower_round(tmp_path):
    assert e2e_min_pairs(_config(tmp_path), 100.0) == 20
    assert e2e_min_pairs(_config(tmp_path, e2e_p99_budget_s=10.0), 100.0) == 100
