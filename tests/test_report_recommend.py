"""Recommendations on hand-made records: one timing scope and one workload, ties from the p50 intervals, unknown
operator fallback treated as unknown. Each case has its opposite, where the verdict must come out the other way."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.record import CellRecord, Memory, new_record
from harness.core.results_dir import Run
from harness.decide import registry
from harness.decide.by_workload import ranked
from harness.decide.deploy import clean_state, dynamic_inputs, simplest
from harness.decide.index import index_runs
from harness.decide.picks import split_ties
from harness.measure.stats import latency_from_samples

XNN_OPS = {"delegated": 500, "fallback": 0, "fallback_ops": []}


def rounds(center: float, n: int = 25, spread: float = 0.01) -> list[float]:
    """n rounds within +-spread of center, spread evenly (a steady cell)."""
    return [round(center * (1 + spread * (2 * k / (n - 1) - 1)), 5) for k in range(n)]


def rec(
    backend: str,
    center: float | None = 10.0,
    *,
    device: str = "cpu",
    n: int = 25,
    spread: float = 0.01,
    scope: str = "model",
    status: str = "ok",
    batch: int = 1,
    size: str = "n",
    **extra,
) -> CellRecord:
    r = new_record("t", Cell(size, "detect", "e2e", backend, device, Shape(640, 640), batch), "random-init:0")
    r.status = status
    if status == "ok" and center is not None:
        samples = rounds(center, n, spread)
        r.samples_ms = samples
        r.latency_ms = latency_from_samples(samples, scope)
        r.throughput_ips = batch * 1000.0 / r.latency_ms.p50
        r.precision_executed = "fp32"
    for k, v in extra.items():
        setattr(r, k, v)
    return r


def indexes(*records: CellRecord):
    return index_runs([Run(Path("/x"), "t", {"host": {"cpu_model": "Intel(R) Xeon(R)"}}, list(records))])


def cpu_edge(*records: CellRecord):
    return ranked(registry.get("cpu-edge").case, indexes(*records))


def test_separated_intervals_name_a_winner_and_a_runner_up():
    result = cpu_edge(rec("openvino", 10.0), rec("onnxruntime", 12.0), rec("torch-eager", 30.0))
    assert result.winner.backend == "openvino" and result.runner_up.backend == "onnxruntime"
    assert result.tied == () and "95% CI" in result.winner.numbers


def test_overlapping_intervals_are_a_tie_not_a_winner():
    result = cpu_edge(rec("openvino", 10.0), rec("onnxruntime", 10.05), rec("torch-eager", 30.0))
    assert result.winner is None and result.runner_up is None
    assert [p.backend for p in result.tied] == ["openvino", "onnxruntime"]  # torch-eager is not in the tie
    assert "overlap" in result.tie_reason
    assert result.as_dict()["tied"][0]["backend"] == "openvino"


def test_too_few_rounds_for_an_interval_cannot_win():
    result = cpu_edge(rec("openvino", 10.0, n=5), rec("onnxruntime", 12.0, n=5))
    assert result.winner is None and len(result.tied) == 2 and "6 timed rounds" in result.tie_reason
    # the same figures with enough rounds separate
    assert cpu_edge(rec("openvino", 10.0, n=6), rec("onnxruntime", 12.0, n=6)).winner.backend == "openvino"


def test_split_ties_directly():
    cands = [(None, rec("a", 10.0)), (None, rec("b", 10.02)), (None, rec("c", 11.0))]
    tied, why = split_ties(cands, lambda r: None if r.backend == "x" else _ci(r))
    assert [r.backend for _, r in tied] == ["a", "b"] and why
    alone, why = split_ties(cands[:1], _ci)
    assert len(alone) == 1 and why is None


def _ci(r: CellRecord):
    from harness.history.stats import p50_interval

    return p50_interval(r.samples_ms)


def test_latency_is_ranked_within_one_timing_scope():
    """A `model+h2d+d2h` p50 is not ranked against `model` ones: the larger group is compared, the other named."""
    records = [
        rec("tensorrt", 1.0, device="cuda"),
        rec("torch-eager", 9.0, device="cuda"),
        rec("torch-compile", 3.0, device="cuda"),
        rec("executorch-cuda", 0.5, device="cuda", scope="model+h2d+d2h"),
    ]
    result = ranked(registry.get("gpu-latency").case, indexes(*records))
    assert result.winner.backend == "tensorrt" and result.runner_up.backend == "torch-compile"
    assert "timing scope model" in result.workload
    assert "executorch-cuda (model+h2d+d2h)" in result.set_aside
    # the same cell timed over the same scope competes, and wins
    same = [*records[:3], rec("executorch-cuda", 0.5, device="cuda")]
    assert ranked(registry.get("gpu-latency").case, indexes(*same)).winner.backend == "executorch-cuda"


def test_throughput_ties_follow_the_latency_intervals():
    a = rec("tensorrt", 4.0, device="cuda", batch=8)
    b = rec("onnxruntime", 4.01, device="cuda", batch=8)
    assert len(ranked(registry.get("gpu-throughput").case, indexes(a, b)).tied) == 2
    c = rec("onnxruntime", 8.0, device="cuda", batch=8)
    assert ranked(registry.get("gpu-throughput").case, indexes(a, c)).winner.backend == "tensorrt"


def test_unknown_fallback_is_not_no_fallback():
    assert clean_state(rec("onnxruntime")) is None  # ops not reported
    assert clean_state(rec("executorch-xnnpack", ops=XNN_OPS)) is True
    assert clean_state(rec("executorch-xnnpack", ops={"delegated": 300, "fallback": 3})) is False
    assert clean_state(rec("executorch-xnnpack", ops=XNN_OPS, precision_executed="fp16")) is False
    assert clean_state(rec("executorch-xnnpack", status="run_failed")) is False


def test_the_backend_that_reports_its_fallbacks_can_win():
    """xnnpack reports zero fallback in both its cells; onnxruntime reports nothing and failed one cell: whatever its
    unknowns are, it cannot reach xnnpack's share."""
    xnn = [
        rec("executorch-xnnpack", 20.0, ops=XNN_OPS),
        rec("executorch-xnnpack", 60.0, size="s", ops=XNN_OPS),
    ]
    ort = [rec("onnxruntime", 15.0), rec("onnxruntime", None, size="s", status="run_failed")]
    result = simplest(indexes(*xnn, *ort))
    assert result.winner.backend == "executorch-xnnpack" and result.runner_up.backend == "onnxruntime"
    assert "unknown in 1 (operator fallback not reported)" in result.runner_up.numbers


def test_unknowns_that_could_change_the_order_are_a_tie():
    """Both of onnxruntime's cells ran ok but it does not report fallback: it may be as clean as xnnpack, and faster,
    so no winner is named (the old rule took unknown as "no fallback" and named onnxruntime)."""
    xnn = [
        rec("executorch-xnnpack", 20.0, ops=XNN_OPS),
        rec("executorch-xnnpack", 60.0, size="s", ops=XNN_OPS),
    ]
    ort = [rec("onnxruntime", 15.0), rec("onnxruntime", 40.0, size="s")]
    result = simplest(indexes(*xnn, *ort))
    assert result.winner is None and {p.backend for p in result.tied} == {"executorch-xnnpack", "onnxruntime"}
    assert "onnxruntime: operator fallback" in result.tie_reason
    # xnnpack with fallback operators drops out; onnxruntime alone is not known to be clean: no winner either
    dirty = [rec("executorch-xnnpack", 20.0, ops={"delegated": 300, "fallback": 3})]
    alone = simplest(indexes(*dirty, *ort))
    assert (
        alone.winner is None and not alone.tied and "no cell is known to have run clean" in alone.none_reason
    )


def test_export_only_targets_without_counts_are_notranked():
    known = rec(
        "executorch-vulkan", None, device="vulkan", status="exported", ops={"delegated": 500, "fallback": 1}
    )
    unknown = rec("executorch-coreml", None, device="coreml", status="exported")
    result = ranked(registry.get("mobile-embedded").case, indexes(known, unknown))
    assert result.winner.backend == "executorch-vulkan" and result.runner_up is None
    none = ranked(registry.get("mobile-embedded").case, indexes(unknown))
    assert none.winner is None and "delegation count" in none.none_reason


def _dyn(backend: str, h: int, center: float | None, device: str = "cpu", **extra) -> CellRecord:
    r = rec(backend, center, device=device, **extra)
    cell = Cell("n", "detect", "e2e", backend, device, Shape(h, h, dynamic=True))
    r.cell_id, r.dynamic, r.height, r.width = cell.id, True, h, h
    return r


def test_dynamic_ties_use_the_record_timed_at_the_worst_shape():
    """The worst shape of onnxruntime ran via its remedy: that record's rounds give the interval (the failed sweep
    record has none), so well separated entrants are not called tied."""
    odd = _dyn("onnxruntime", 650, None, status="run_failed")
    fix = _dyn("onnxruntime", 672, 30.0)
    fix.cell_id = odd.cell_id + "+letterbox-pad-32"
    fix.remedy, fix.remedy_of = "letterbox-pad-32", odd.cell_id
    ort = [_dyn("onnxruntime", 320, 6.0), odd, fix]
    ov = [_dyn("openvino", 320, 5.0), _dyn("openvino", 640, 20.0)]
    result = dynamic_inputs(indexes(*ort, *ov))
    assert result.winner.backend == "openvino" and result.runner_up.backend == "onnxruntime"
    assert "via letterbox-pad-32" in result.runner_up.numbers
    close = [_dyn("openvino", 320, 5.0), _dyn("openvino", 640, 30.02)]
    tie = dynamic_inputs(indexes(*ort, *close))
    assert tie.winner is None and {p.backend for p in tie.tied} == {"openvino", "onnxruntime"}


def _pair(a: CellRecord, b: CellRecord, ratio: float, lo: float, hi: float) -> None:
    """Record that `a` and `b` were timed together: a's p50 over b's is `ratio` [lo, hi] (and b's over a's its
    inverse)."""
    a.paired = {"reference": b.cell_id, "ratio": ratio, "ratio_ci": [lo, hi], "others": {}}
    b.paired = {
        "reference": b.cell_id,
        "ratio": 1.0,
        "ratio_ci": [1.0, 1.0],
        "others": {a.cell_id: {"ratio": 1 / ratio, "ratio_ci": [1 / hi, 1 / lo]}},
    }


def test_paired_ratio_separates_what_overlapping_p50_intervals_would_tie():
    # drift made both cells' rounds scatter widely (their p50 intervals overlap), but timed interleaved the one is
    # 4% faster in every trial: the paired interval excludes 1, so there is a winner
    ov, ort = rec("openvino", 10.0, spread=0.2), rec("onnxruntime", 10.4, spread=0.2)
    assert split_ties([(None, ov), (None, ort)], _ci)[1] is not None  # unpaired: a tie
    _pair(ort, ov, 1.04, 1.02, 1.06)
    result = cpu_edge(ov, ort)
    assert result.winner.backend == "openvino" and result.runner_up.backend == "onnxruntime"
    assert "(paired)" in result.runner_up.numbers


def test_paired_ratio_holding_1_is_a_tie_even_when_the_p50_intervals_are_apart():
    ov, ort = rec("openvino", 10.0), rec("onnxruntime", 11.0)
    assert cpu_edge(ov, ort).winner.backend == "openvino"  # unpaired: apart
    _pair(ort, ov, 1.01, 0.98, 1.05)  # timed together, the machine slowed while one was timed: no difference
    result = cpu_edge(ov, ort)
    assert result.winner is None and [p.backend for p in result.tied] == ["openvino", "onnxruntime"]
    assert "paired p50 ratio" in result.tie_reason


def _int8(backend: str, center: float, ratio: float | None) -> CellRecord:
    r = rec(backend, center)
    r.precision_requested = "int8"
    r.cell_id = r.cell_id.replace("fp32", "int8")
    r.accuracy = None if ratio is None else {"ratio": ratio, "map50_95": 0.3 * ratio, "tier": "x"}
    return r


def test_a_faster_cell_below_the_accuracy_floor_is_rejected_with_its_figure():
    result = cpu_edge(_int8("openvino", 8.0, 0.90), _int8("onnxruntime", 12.0, 0.97))
    assert result.winner.backend == "onnxruntime"
    assert "openvino int8 keeps 0.900 of the reference mAP50-95 (floor 0.95)" in result.rejected


def test_the_same_cell_above_the_floor_wins_and_a_floor_can_be_set():
    records = (_int8("openvino", 8.0, 0.96), _int8("onnxruntime", 12.0, 0.97))
    result = cpu_edge(*records)
    assert result.winner.backend == "openvino" and result.rejected is None
    strict = ranked(registry.get("cpu-edge").case, indexes(*records), {"int8": 0.965})
    assert strict.winner.backend == "onnxruntime" and "openvino int8" in strict.rejected


def test_a_cell_whose_accuracy_was_not_scored_is_not_rejected():
    result = cpu_edge(_int8("openvino", 8.0, None), _int8("onnxruntime", 12.0, 0.97))
    assert result.winner.backend == "openvino" and result.rejected is None


def test_accuracy_floor_option_overrides_one_precision_and_refuses_nonsense():
    import pytest

    from harness.report.cli import accuracy_floors

    assert accuracy_floors(["int8=0.9"]) == {"fp32": 0.99, "fp16": 0.99, "int8": 0.9}
    for bad in ("int8", "int4=0.9", "fp32=1.5", "fp32=x"):
        with pytest.raises(ValueError, match="--accuracy-floor"):
            accuracy_floors([bad])


# -- use cases from the scenario records (issue 13), on hand-made records marked synthetic -----------------------
def scen(
    backend: str,
    p99: float = 20.0,
    p99_ci: tuple[float, float] | None = None,
    *,
    rss: float = 400.0,
    streams: int = 2,
    multi_p99: float = 25.0,
    multi_ips: float = 80.0,
    rate: float | None = 40.0,
    rate_interval: tuple[float, float | None] = (40.0, 60.0),
    ips: float = 80.0,
    ips_ci: tuple[float, float] | None = None,
    missed: float = 0.0,
    valid: bool = True,
    **extra,
) -> CellRecord:
    """A cell of the scenario profile's workload with all five scenarios (figures invented, marked synthetic)."""
    r = rec(backend, p99 / 1.3, synthetic=True, **extra)
    lo, hi = p99_ci or (0.98 * p99, 1.02 * p99)
    single = {
        "scenario": "single-stream", "metric": "p90 latency", "value": p99 / 1.1, "unit": "ms", "valid": valid,
        "rule": "at least 1024 queries", "p50": p99 / 1.25, "p90": p99 / 1.1, "p99": p99, "queries": 1024,
        "duration_s": 20.0, "p99_interval": [lo, hi],
    }  # fmt: skip
    r.memory = Memory(host_peak_rss_mib=rss)
    r.latency_e2e_ms = replace(r.latency_ms, p50=p99 / 1.25, p99=p99, timing_scope="end-to-end")
    r.scenario, r.scenario_result = "single-stream", single
    tried = [{"rate": rate_interval[0], "p99_ms": 80.0, "queries": 800, "ok": True}]
    if rate_interval[1] is not None:
        tried.append({"rate": rate_interval[1], "p99_ms": 140.0, "queries": 1200, "ok": False})
    r.scenarios = {
        "single-stream": single,
        "multi-stream": {
            "scenario": "multi-stream", "metric": "p99 per query", "value": multi_p99, "unit": "ms", "valid": True,
            "rule": "r", "streams": streams, "p50": multi_p99 / 1.3, "p99": multi_p99, "queries": 300,
            "throughput_ips": multi_ips, "mechanism": "threads", "p99_interval": [0.98 * multi_p99, 1.02 * multi_p99],
        },
        "server": {
            "scenario": "server", "metric": "queries/s", "value": rate, "unit": "q/s", "valid": rate is not None,
            "rule": "p99 <= 100 ms", "bound_ms": 100.0, "rate_interval": list(rate_interval), "tried": tried,
            "concurrency": 2, "mechanism": "threads",
        },
        "offline": {
            "scenario": "offline", "metric": "images/s", "value": ips, "unit": "images/s", "valid": True, "rule": "r",
            "batch": 8, "concurrency": 2, "sweep": [{"concurrency": 2, "batch": 8, "ips": ips}],
            "ips_interval": list(ips_ci or (0.98 * ips, 1.02 * ips)),
        },
        "camera": {
            "scenario": "camera", "metric": "missed share at 30 FPS", "value": missed, "unit": "share", "valid": True,
            "rule": "r", "fps": {"30": {"missed_share": missed, "frames": 900, "p99_ms": p99},
                                 "60": {"missed_share": 2 * missed, "frames": 1800, "p99_ms": p99}},
        },
    }  # fmt: skip
    return r


def _scenario_only() -> dict:
    """Camera, server and offline ranked on one workload's scenario results only, as the report did before it chose
    from every candidate (harness.decide.by_candidates); kept here to test the scenario figures and checks."""
    from harness.decide import figures as fig
    from harness.decide.by_scenario import FRAME, ScenarioCase, validity
    from harness.decide.load import number
    from harness.decide.scenario_results import e2e_p99, e2e_p99_interval, span

    return {
        "camera": ScenarioCase(
            key="camera", title="Camera, 30 FPS", objective="lowest end-to-end p99 at batch 1",
            constraint=f"e2e p99 within the {FRAME} frame time", scenario="single-stream", value=e2e_p99,
            higher_is_better=False, checks=(("frame time", fig.camera_check), validity("single-stream")),
            interval=e2e_p99_interval, figure=fig.camera_figure, numbers=fig.camera_numbers,
            tie_words="their e2e p99 95% intervals overlap", batch1=True,
        ),
        "server": ScenarioCase(
            key="server", title="Server", objective="highest request rate (queries/s) served",
            constraint="the server scenario's percentile within its bound at that rate", scenario="server",
            value=lambda r: number(fig.server(r), "value"), higher_is_better=True,
            checks=(("latency bound", fig.server_check), validity("server")),
            interval=lambda r: span(fig.server(r), "rate_interval"), figure=fig.server_figure,
            numbers=fig.server_numbers, tie_words="their rate intervals (last passing to first failing rate) overlap",
            strict_overlap=True, describe=fig.server_bound,
        ),
        "offline": ScenarioCase(
            key="offline", title="Offline batch processing", objective="highest images/s, any batch and concurrency",
            constraint="no latency bound", scenario="offline", value=lambda r: number(fig.offline(r), "value"),
            higher_is_better=True, checks=(("measured", fig.offline_check), validity("offline")),
            interval=lambda r: span(fig.offline(r), "ips_interval"), figure=fig.offline_figure,
            numbers=fig.offline_numbers, tie_words="their images/s intervals overlap",
        ),
    }  # fmt: skip


SCENARIO_ONLY = _scenario_only()


def use_case(key: str, *records: CellRecord, cap: float | None = None, floors: dict | None = None):
    from harness.decide.by_scenario import scenario_pick
    from harness.decide.picks import Constraints

    case = SCENARIO_ONLY[key] if key in SCENARIO_ONLY else registry.get(key).case
    idx = indexes(*records)
    return scenario_pick(case, idx[0], idx, Constraints(floors, cap))


def test_camera_picks_the_lowest_e2e_p99_within_the_frame_time_and_names_the_rest():
    result = use_case(
        "camera", scen("openvino", 20.0, missed=0.01), scen("onnxruntime", 25.0), scen("torch-eager", 40.0)
    )
    assert result.winner.backend == "openvino" and result.runner_up.backend == "onnxruntime"
    assert (
        "e2e p99 20.0 ms ≤ 33.3 ms" in result.winner.figure
        and "1.0% of frames missed" in result.winner.figure
    )
    (rejected,) = result.rejections
    assert rejected.backend == "torch-eager" and rejected.constraint == "frame time"
    assert "e2e p99 40.0 ms over the 33.3 ms frame time at 30 FPS" in rejected.why
    assert result.machine and result.measured


def test_camera_overlapping_p99_intervals_tie_and_separated_ones_do_not():
    tied = use_case("camera", scen("openvino", 20.0, (19.0, 22.0)), scen("onnxruntime", 21.0, (20.5, 23.0)))
    assert tied.winner is None and [p.backend for p in tied.tied] == ["openvino", "onnxruntime"]
    assert "e2e p99 95% intervals overlap" in tied.tie_reason
    apart = use_case("camera", scen("openvino", 20.0, (19.0, 20.4)), scen("onnxruntime", 21.0, (20.5, 23.0)))
    assert apart.winner.backend == "openvino" and not apart.tied


def test_camera_cell_past_the_frame_time_cannot_win_however_fast_its_model():
    """The model-only ranking would pick openvino (lowest model p50); end to end its p99 breaks the frame time."""
    fast_model = scen("openvino", 35.0)
    fast_model.latency_ms = replace(fast_model.latency_ms, p50=5.0)
    result = use_case("camera", fast_model, scen("onnxruntime", 30.0))
    assert result.winner.backend == "onnxruntime"
    assert result.rejections[0].backend == "openvino" and "35.0 ms over" in result.rejections[0].why
    assert ranked(
        registry.get("cpu-edge").case, indexes(fast_model, scen("onnxruntime", 30.0))
    ).winner.backend == ("openvino")


def test_memory_cap_rejects_the_fastest_with_its_figure():
    cells = (scen("openvino", 20.0, rss=900.0), scen("onnxruntime", 26.0, rss=450.0))
    assert use_case("camera", *cells).winner.backend == "openvino"
    capped = use_case("camera", *cells, cap=512)
    assert capped.winner.backend == "onnxruntime" and capped.runner_up is None
    (rejected,) = capped.rejections
    assert (
        rejected.constraint == "memory cap" and "host peak RSS 900.0 MiB over the 512 MiB cap" in rejected.why
    )
    # a cell without a memory figure is not known to fit
    unknown = scen("openvino", 20.0)
    unknown.memory = None
    result = use_case("camera", unknown, cells[1], cap=512)
    assert result.winner.backend == "onnxruntime" and "not known to fit" in result.rejections[0].why
    # the model-only use cases apply the cap as well
    model_only = ranked(registry.get("cpu-edge").case, indexes(*cells), None, 512)
    assert model_only.winner.backend == "onnxruntime" and "memory cap" in model_only.rejected


def test_server_rate_intervals_that_overlap_are_tied():
    a = scen("openvino", rate=60.0, rate_interval=(60.0, 80.0))
    b = scen("onnxruntime", rate=70.0, rate_interval=(70.0, 90.0))
    tied = use_case("server", a, b)
    assert tied.winner is None and [p.backend for p in tied.tied] == ["onnxruntime", "openvino"]
    assert "rate intervals" in tied.tie_reason
    # one passed at the rate where the other failed: apart
    c = scen("onnxruntime", rate=80.0, rate_interval=(80.0, 100.0))
    apart = use_case("server", a, c)
    assert apart.winner.backend == "onnxruntime" and apart.runner_up.backend == "openvino"
    assert "80.0 q/s at p99 ≤ 100 ms" in apart.winner.figure


def test_server_cell_that_served_no_rate_within_the_bound_is_rejected():
    none = scen("torch-eager", rate=None, rate_interval=(0.0, 5.0))
    result = use_case("server", none, scen("openvino"))
    assert result.winner.backend == "openvino"
    (rejected,) = result.rejections
    assert rejected.constraint == "latency bound" and "no rate kept p99 within 100 ms" in rejected.why


def test_offline_ips_intervals_decide_ties():
    tied = use_case("offline", scen("openvino", ips=100.0, ips_ci=(96, 104)), scen("onnxruntime", ips=98.0))
    assert tied.winner is None and len(tied.tied) == 2 and "images/s" in tied.tie_reason
    apart = use_case("offline", scen("openvino", ips=100.0), scen("onnxruntime", ips=80.0))
    assert apart.winner.backend == "openvino" and "100 img/s at batch 8 × 2" in apart.winner.figure


def test_an_invalid_scenario_result_is_rejected_by_its_rule():
    result = use_case("camera", scen("openvino", 20.0, valid=False), scen("onnxruntime", 25.0))
    assert result.winner.backend == "onnxruntime"
    assert (
        result.rejections[0].constraint == "validity" and "at least 1024 queries" in result.rejections[0].why
    )


def test_scenario_use_cases_keep_the_accuracy_floor():
    low = scen("openvino", 20.0, accuracy={"ratio": 0.9, "map50_95": 0.27, "tier": "below"})
    result = use_case("camera", low, scen("onnxruntime", 25.0))
    assert result.winner.backend == "onnxruntime"
    assert "openvino fp32 keeps 0.900 of the reference mAP50-95 (floor 0.99)" in result.rejected


def test_records_without_scenarios_say_the_use_case_was_not_measured():
    from harness.decide.decision import decide

    recs = decide(indexes(rec("openvino", 10.0), rec("onnxruntime", 12.0))).answers
    by_key = {r.key: r for r in recs}
    for key in ("camera", "camera-capacity", "server", "offline"):
        assert not by_key[key].measured and by_key[key].winner is None
        assert by_key[key].none_reason.startswith("not measured")
    assert by_key["cpu-edge"].winner.backend == "openvino"  # the model-only answer stands in, as before
    assert by_key["lowest-memory"].measured
