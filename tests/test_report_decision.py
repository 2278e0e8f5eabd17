"""What to ship (issue 28), on hand-made records: every measured configuration competes, accuracy is labelled by
source and traded accuracy is said, ties only where intervals overlap (or the paired ratio says so), the nearest
miss names the command that would measure what could meet the use case, and the same records decide again under
other options. Each verdict has its case where it must come out the other way."""

from __future__ import annotations

import json
from pathlib import Path

from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.record import CellRecord, Memory, new_record
from harness.core.record_codec import record_to_json
from harness.core.results_dir import Run
from harness.decide import registry
from harness.decide.accuracy import PUBLISHED, PUBLISHED_MAP_640, accuracy_of
from harness.decide.by_candidates import decide
from harness.decide.index import index_runs
from harness.decide.picks import ACCURACY_FLOORS, Constraints
from harness.measure.stats import latency_from_samples
from harness.report.cli import main
from harness.report.front import non_dominated

CAMERA, SERVER, OFFLINE = (registry.get(k).case for k in ("camera", "server", "offline"))
REF_MAP_640 = 0.30


def rounds(center: float, n: int, spread: float = 0.01) -> list[float]:
    """n rounds within +-spread of center, spread evenly (a steady cell)."""
    return [round(center * (1 + spread * (2 * k / (n - 1) - 1)), 5) for k in range(n)]


def cell(
    backend: str,
    e2e_ms: float,
    *,
    side: int = 640,
    precision: str = "fp32",
    size: str = "n",
    ratio: float | None = 1.0,
    ref_map: float = REF_MAP_640,
    memory: float = 300.0,
    n: int = 120,
    **extra,
) -> CellRecord:
    """An ok CPU cell timed end to end around `e2e_ms` (n rounds: p99 recorded from 100) and scored `ratio` of its
    fp32 reference's mAP `ref_map` (None: not scored)."""
    c = Cell(size, "detect", "e2e", backend, "cpu", Shape(side, side), 1, precision)
    r = new_record("t", c, "random-init:0")
    r.status = "ok"
    r.samples_ms = rounds(0.7 * e2e_ms, 30)
    r.latency_ms = latency_from_samples(r.samples_ms, "model")
    r.throughput_ips = 1000.0 / r.latency_ms.p50
    r.latency_e2e_ms = latency_from_samples(rounds(e2e_ms, n), "end-to-end")
    r.memory = Memory(host_peak_rss_mib=memory)
    if ratio is not None:
        r.accuracy = {"map50_95": ref_map * ratio, "reference_map50_95": ref_map, "ratio": ratio}
    for k, v in extra.items():
        setattr(r, k, v)
    return r


def machine(*records: CellRecord):
    return index_runs([Run(Path("/x"), "t", {"host": {"cpu_model": "AMD EPYC"}}, list(records))])


def camera(records: list[CellRecord], **cons):
    idx = machine(*records)
    return decide(CAMERA, idx[0], idx, Constraints(**{"floors": dict(ACCURACY_FLOORS), **cons}))


def test_an_int8_cell_of_another_workload_wins_where_it_meets_the_floor_and_loses_where_it_misses_it():
    records = [
        cell("onnxruntime", 40.0),  # fp32 640: over the 33.3 ms frame time
        cell("torch-eager", 30.0),  # fp32 640: meets it
        cell("openvino", 20.0, precision="int8", ratio=0.97),  # another workload: int8
    ]
    won = camera(records)
    # the fp32 cell is the more accurate (measured 0.300 against 0.291): the pick; the int8 one the fastest
    assert won.pick.cand.rec.backend == "torch-eager" and not won.tied  # 20 ms and 30 ms: apart
    fast = won.fastest.cand
    assert fast.rec.backend == "openvino" and fast.rec.precision_requested == "int8"
    assert "fp32→int8: keeps 0.970 of the fp32 mAP (measured on your data)" in fast.accuracy.cost
    # the same records under a floor the int8 cell misses: rejected with its figure, nothing faster is named
    lost = camera(records, floors={**ACCURACY_FLOORS, "int8": 0.98})
    assert lost.pick.cand.rec.backend == "torch-eager" and lost.fastest is None
    floor = [m for m in lost.misses if m.rejection.constraint == "accuracy floor"]
    assert len(floor) == 1 and "keeps 0.970" in floor[0].rejection.why


def test_a_smaller_shape_wins_the_camera_with_its_accuracy_cost_and_loses_under_min_shape():
    records = [
        cell("openvino", 40.0),  # 640: misses the frame time
        cell(
            "openvino", 12.0, side=320, ref_map=0.27
        ),  # 320: its fp32 reference scored 0.27 against 0.30 at 640
    ]
    won = camera(records)
    assert won.pick.cand.rec.height == 320
    assert (
        "640→320: 0.900× the 640 mAP (measured on your data, fp32 reference)" in won.pick.cand.accuracy.cost
    )
    page = won.pick.cand.accuracy.text() + "; " + won.pick.cand.accuracy.cost
    from harness.decide.by_candidates import answer_of

    assert "640→320: 0.900×" in answer_of(won).winner.accuracy and "640→320" in page
    lost = camera(records, min_shape=640)
    assert lost.pick is None
    assert any(m.rejection.constraint == "min shape" for m in lost.misses)
    # the nearest miss is the 640 cell (the 320 one is excluded by the user's choice, not near)
    assert lost.nearest["configuration"]["shape"] == "640"
    assert "over the 33.3 ms frame time" in lost.nearest["misses_by"]


def test_accuracy_not_scored_is_not_known_and_a_random_init_size_at_640_is_the_published_figure():
    idx = machine(cell("openvino", 20.0, size="s", ratio=None), cell("openvino", 8.0, side=320, ratio=None))
    s640, n320 = (accuracy_of(r, idx[0].cells) for r in idx[0].cells)
    assert s640.source == PUBLISHED and s640.coco == PUBLISHED_MAP_640["e2e"]["s"]
    assert "published, not measured here" in s640.text()
    assert n320.source == "not known" and n320.coco is None
    assert "640→320: accuracy cost not known" in n320.cost


def offline_cell(backend: str, ips: float, lo: float, hi: float, **kw) -> CellRecord:
    r = cell(backend, 1000.0 / ips, **kw)
    r.scenarios = {
        "offline": {"value": ips, "valid": True, "ips_interval": [lo, hi], "batch": 1, "concurrency": 1}
    }
    return r


def offline(records: list[CellRecord]):
    idx = machine(*records)
    return decide(OFFLINE, idx[0], idx, Constraints(dict(ACCURACY_FLOORS)))


def test_a_tie_only_where_the_intervals_overlap_and_a_175x_difference_is_not_one():
    apart = offline(
        [offline_cell("openvino", 27.7, 27.0, 28.4), offline_cell("torch-eager", 15.8, 15.4, 16.2)]
    )
    assert apart.pick.cand.rec.backend == "openvino" and apart.tied == []
    close = offline(
        [offline_cell("openvino", 27.7, 27.0, 28.4), offline_cell("onnxruntime", 27.5, 26.9, 28.1)]
    )
    assert close.pick.cand.rec.backend == "openvino"
    assert [s.cand.rec.backend for s in close.tied] == ["onnxruntime"]
    assert "intervals overlap" in close.tie_reason


def test_without_per_slice_rates_the_offline_interval_comes_from_the_e2e_p50_and_says_so():
    a, b = offline_cell("openvino", 27.7, 0, 0), offline_cell("torch-eager", 15.8, 0, 0)
    for r in (a, b):
        del r.scenarios["offline"]["ips_interval"]
    dec = offline([a, b])
    assert dec.pick.fig.interval is not None and "e2e p50's 95% interval" in dec.pick.fig.interval_how
    assert dec.tied == []  # 1.75x apart: the derived intervals do not overlap


def _pair(a: CellRecord, b: CellRecord, lo: float, hi: float) -> None:
    """Record that a and b were timed interleaved: a's p50 over b's within [lo, hi]."""
    a.paired = {"reference": b.cell_id, "ratio": (lo + hi) / 2, "ratio_ci": [lo, hi], "others": {}}


def test_cells_of_one_workload_are_tied_by_their_paired_ratio_not_by_overlap():
    # overlapping offline intervals, but the paired ratio (timed interleaved) separates them: no tie
    a, b = offline_cell("openvino", 27.7, 27.0, 28.4), offline_cell("onnxruntime", 27.5, 26.9, 28.1)
    _pair(b, a, 1.02, 1.05)  # onnxruntime's p50 above openvino's
    assert offline([a, b]).tied == []
    # apart on their intervals, but the paired ratio holds 1: a tie, said why
    c, d = offline_cell("openvino", 27.7, 27.0, 28.4), offline_cell("onnxruntime", 24.0, 23.5, 24.5)
    _pair(d, c, 0.98, 1.03)
    tie = offline([c, d])
    assert len(tie.tied) == 1 and "paired p50 ratio" in tie.tie_reason


def test_a_nearest_miss_names_what_it_misses_by_and_the_command_that_would_measure_what_could_meet_it():
    # torch-eager has no int8: the cheapest configuration left is the largest smaller shape estimated to fit
    # (40.4 ms needs 0.83x: 576x576 is 0.81x the pixels of 640x640)
    dec = camera([cell("torch-eager", 40.0), cell("onnxruntime", 60.0)])
    assert dec.pick is None
    nm = dec.nearest
    assert nm["configuration"]["backend"] == "torch-eager" and nm["configuration"]["shape"] == "640"
    assert "over the 33.3 ms frame time at 30 FPS" in nm["misses_by"]
    assert nm["command"] == (
        "pytest suites/ --benchmark-only --sizes n --tasks detect --heads e2e --shapes 576 --backends torch-eager "
        "--devices cpu --batches 1 --precisions fp32 --scenarios all"
    )
    # where this machine measured what int8 buys (onnxruntime: 0.5x the fp32 e2e p50), a backend with int8 on this
    # device is asked for int8 before a smaller shape (the floor bounds what int8 may lose)
    ov = camera(
        [cell("openvino", 40.0), cell("onnxruntime", 88.0), cell("onnxruntime", 44.0, precision="int8")]
    )
    assert ov.nearest["configuration"]["backend"] == "openvino"
    assert (
        "--shapes 640 --backends openvino --devices cpu --batches 1 --precisions int8"
        in ov.nearest["command"]
    )
    assert "0.50× the fp32 e2e p50" in ov.nearest["measure"]["estimate"]
    # not knowing what int8 buys here, the estimate that fits comes first: a smaller shape
    unknown = camera([cell("openvino", 40.0)])
    assert "--shapes 576" in unknown.nearest["command"] and "--precisions fp32" in unknown.nearest["command"]
    # once that int8 cell was measured (and still misses), the suggestion moves on to a smaller shape
    both = camera([cell("openvino", 40.0), cell("openvino", 36.0, precision="int8", ratio=0.97)])
    assert both.nearest["configuration"]["precision"] == "int8"
    assert "--precisions int8" in both.nearest["command"] and "--shapes 640" not in both.nearest["command"]


def server_cell(backend: str, e2e_ms: float, tried: list[tuple[float, float]], **kw) -> CellRecord:
    r = cell(backend, e2e_ms, **kw)
    rates = sorted(t[0] for t in tried if t[1] <= 100.0)
    fails = sorted(t[0] for t in tried if t[1] > 100.0)
    r.scenarios = {
        "server": {
            "value": rates[-1],
            "valid": True,
            "bound_ms": 100.0,
            "rate_interval": [rates[-1], fails[0]],
            "tried": [{"rate": q, "p99_ms": p, "queries": 100, "ok": p <= 100.0} for q, p in tried],
        }
    }
    return r


def _write_run(path: Path, records: list[CellRecord]) -> Path:
    path.mkdir(parents=True)
    (path / "cells.jsonl").write_text("".join(record_to_json(r) + "\n" for r in records))
    (path / "env.json").write_text(json.dumps({"run_id": "t", "host": {"cpu_model": "AMD EPYC"}}))
    return path


def _decisions(out: Path) -> dict[str, dict]:
    doc = json.loads(next(out.glob("*/decision.json")).read_text())
    return {e["use_case"]: e for e in doc["decisions"]}


def test_the_same_records_decide_again_under_other_options(tmp_path):
    records = [
        cell("openvino", 12.0, side=320, ref_map=0.27, memory=250.0),
        cell("onnxruntime", 20.0, precision="int8", ratio=0.965, memory=280.0),
    ]
    run = _write_run(tmp_path / "run", records)
    assert main([str(run), "-o", str(tmp_path / "a"), "-q"]) == 0
    first = _decisions(tmp_path / "a")
    # the int8 640 cell keeps more of the measured mAP (0.290 against 0.270): the pick; the 320 one the fastest
    assert first["camera"]["pick"]["configuration"]["precision"] == "int8"
    assert first["camera"]["fastest"]["configuration"]["shape"] == "320"
    for e in first.values():
        assert set(e) >= {
            "use_case",
            "machine",
            "objective",
            "constraints",
            "pick",
            "tied_with",
            "nearest_miss",
        }
        assert "reason" in e
    assert first["camera"]["pick"]["accuracy_source"] == "measured"
    assert first["camera"]["pick"]["figure_source"] == "screen"  # no single-stream result: said so
    assert first["camera"]["screened"]
    # 60 FPS, a 50 ms bound, a tighter int8 floor and a 300 MiB cap, from the same records, without re-running
    argv = [
        "--camera-fps",
        "60",
        "--server-bound-ms",
        "50",
        "--accuracy-floor",
        "int8=0.97",
        "--memory-cap",
        "300",
    ]
    assert main([str(run), "-o", str(tmp_path / "b"), "-q", *argv]) == 0
    again = _decisions(tmp_path / "b")
    assert again["camera"]["constraints"]["camera_fps"] == 60
    assert again["camera"]["pick"]["configuration"]["shape"] == "320"  # 12 ms keeps a 16.7 ms frame
    # under --min-shape 640 the 320 cell is out, and the int8 one misses the 0.97 floor: no pick, a nearest miss
    assert main([str(run), "-o", str(tmp_path / "c"), "-q", *argv, "--min-shape", "640"]) == 0
    none = _decisions(tmp_path / "c")["camera"]
    assert none["pick"] is None and none["nearest_miss"]["configuration"]["precision"] == "int8"
    assert "keeps 0.965" in none["nearest_miss"]["misses_by"]
    # without --min-shape the int8 cell would be picked at 30 FPS were the 320 one not faster
    assert main([str(run), "-o", str(tmp_path / "d"), "-q", "--min-shape", "640"]) == 0
    assert _decisions(tmp_path / "d")["camera"]["pick"]["configuration"]["precision"] == "int8"


def test_the_server_rate_is_decided_again_from_the_rates_it_tried(tmp_path):
    srv = server_cell("openvino", 25.0, [(10, 20.0), (20, 45.0), (40, 90.0), (80, 400.0)])
    slow = cell("torch-eager", 60.0)  # screened: its e2e p99 alone is over a 50 ms bound
    run = _write_run(tmp_path / "run", [srv, slow])
    assert main([str(run), "-o", str(tmp_path / "a"), "-q"]) == 0
    pick = _decisions(tmp_path / "a")["server"]["pick"]
    assert pick["configuration"]["cell_id"] == srv.cell_id
    assert pick["value"] == 40 and pick["interval"] == [40, 80] and pick["figure_source"] == "scenario"
    assert main([str(run), "-o", str(tmp_path / "b"), "-q", "--server-bound-ms", "50"]) == 0
    again = _decisions(tmp_path / "b")["server"]
    assert again["pick"]["value"] == 20 and again["pick"]["interval"] == [20, 40]
    assert again["tied_with"] == []
    assert main([str(run), "-o", str(tmp_path / "c"), "-q", "--server-bound-ms", "15"]) == 0
    none = _decisions(tmp_path / "c")["server"]
    assert none["pick"] is None and none["nearest_miss"]["command"]


def test_bad_options_are_one_line_before_any_work(tmp_path, capsys):
    run = _write_run(tmp_path / "run", [cell("openvino", 12.0)])
    for argv in (["--camera-fps", "0"], ["--server-bound-ms", "-1"], ["--min-shape", "0"]):
        assert main([str(run), "-o", str(tmp_path / "x"), *argv]) == 2
        assert capsys.readouterr().err.count("\n") == 1
    assert not (tmp_path / "x").exists()


def test_the_front_keeps_only_configurations_no_other_beats_on_both():
    pts = [(10.0, 35.0), (20.0, 40.0), (25.0, 39.0), (30.0, 40.0), (8.0, 30.0)]
    assert non_dominated(pts) == [0, 1, 4]


def test_camera_capacity_is_checked_at_the_camera_fps_given():
    from harness.decide.decision import decide as decide_all

    r = cell("openvino", 12.0)
    r.scenarios = {"multi-stream": {"streams": 2, "p99": 25.0, "valid": True, "p99_interval": [24.0, 26.0]}}
    idx = machine(r)
    at30 = next(
        x for x in decide_all(idx, Constraints(dict(ACCURACY_FLOORS))).answers if x.key == "camera-capacity"
    )
    assert at30.winner is not None and at30.title == "Cameras at 30 FPS"
    assert "at least 2 cameras" in at30.winner.figure
    at60 = next(
        x
        for x in decide_all(idx, Constraints(dict(ACCURACY_FLOORS), camera_fps=60.0)).answers
        if x.key == "camera-capacity"
    )
    assert at60.title == "Cameras at 60 FPS"
    # 2 streams at p99 25 ms miss the 16.7 ms frame; one camera (e2e p99 within it) still passes
    assert "1 camera at 60 FPS (passes at 1, fails at 2" in at60.winner.figure


def test_a_scenario_result_not_valid_under_its_rule_says_what_to_change():
    r = offline_cell("openvino", 27.7, 27.0, 28.4)
    r.scenarios["offline"].update(valid=False, rule=">= 10 queries per concurrency")
    dec = offline([r])
    assert dec.pick is None
    why = next(m.rejection.why for m in dec.misses if m.rejection.constraint == "validity")
    assert "more queries or a longer run" in why


def test_the_first_screen_shows_the_nearest_miss_with_its_command_and_absent_devices_in_one_line(tmp_path):
    from test_report_render import parse

    skipped = [
        new_record("t", Cell("n", "detect", "e2e", b, "cuda", Shape(640, 640)), "random-init:0")
        for b in ("tensorrt", "torch-eager", "onnxruntime")
    ]
    for r in skipped:
        r.status, r.reason = "skipped", "no CUDA device visible"
    run = _write_run(tmp_path / "run", [cell("torch-eager", 40.0), *skipped])
    assert main([str(run), "-o", str(tmp_path / "out"), "-q"]) == 0
    doc = parse(tmp_path / "out" / "latest" / "index.html")
    answer = doc.one("table", cls="decision").one("tr", data_key="camera").one("td", cls="answer")
    assert answer.attrs["data-state"] == "none" and "nearest miss" in answer.text()
    assert "--shapes 576 --backends torch-eager" in answer.one("div", cls="command").text()
    absent = doc.one("ul", cls="absent").all("li")
    assert [li.attrs["data-device"] for li in absent] == ["cuda"]
    assert "none of its 3 cells ran (no CUDA device visible)" in absent[0].text()
    # the GPU use cases do not read "3 ran: 3 skipped"
    gpu = doc.one("div", cls="rec", data_key="gpu-latency").text()
    assert "ran:" not in gpu and "all 3 were skipped" in gpu
    # the front has its table and plot
    front = doc.one("section", id="front")
    assert front.one("table", cls="front-table").one("tr", data_cell_id=cell("torch-eager", 40.0).cell_id)
    assert front.one("table", cls="ladder").one("tr", data_cell_id=cell("torch-eager", 40.0).cell_id)


def test_a_loadgen_server_rate_is_decided_again_at_the_percentile_it_was_judged_at(tmp_path):
    """LoadGen's short durations judge the server at the p90 (`target_ms`, `percentile` 0.9): a re-decision reads
    each tried rate's p90, and the page says p90; a record from before LoadGen has only the p99, and is read so."""
    srv = server_cell("openvino", 25.0, [(10, 20.0), (20, 45.0), (40, 90.0), (80, 400.0)])
    res = srv.scenarios["server"]
    res["percentile"] = 0.9
    for t, p90 in zip(res["tried"], (12.0, 30.0, 48.0, 200.0), strict=True):
        t["target_ms"] = p90  # the p90s: 40 q/s meets a 50 ms bound at the p90, not at the p99 (90 ms)
    run = _write_run(tmp_path / "run", [srv])
    assert main([str(run), "-o", str(tmp_path / "a"), "-q", "--server-bound-ms", "50"]) == 0
    pick = _decisions(tmp_path / "a")["server"]["pick"]
    assert pick["value"] == 40 and "p90 ≤ 50 ms" in pick["figure"]
    # the other way: the same rates with only their p99s (no target_ms, no percentile) give 20 q/s at the p99
    for t in res["tried"]:
        del t["target_ms"]
    del res["percentile"]
    run = _write_run(tmp_path / "old", [srv])
    assert main([str(run), "-o", str(tmp_path / "b"), "-q", "--server-bound-ms", "50"]) == 0
    pick = _decisions(tmp_path / "b")["server"]["pick"]
    assert pick["value"] == 20 and "p99 ≤ 50 ms" in pick["figure"]


def _single_stream(rec: CellRecord, p99: float, p90_interval: list[float]) -> CellRecord:
    """`rec` with a LoadGen single-stream result of ~100 queries: its p99 interval has no upper end."""
    rec.scenarios = {
        "single-stream": {
            "value": p90_interval[0] + 0.1,
            "valid": True,
            "p90": p90_interval[0] + 0.1,
            "p99": p99,
            "p99_interval": [p99 - 0.4, None],
            "p90_interval": p90_interval,
            "queries": 110,
        }
    }
    return rec


def test_camera_compares_single_stream_results_by_their_bounded_p90_intervals():
    """Two single-stream results whose p99 intervals are open above (100-odd queries) are not tied by that alone:
    their p90 intervals decide; apart, one pick; overlapping, a tie."""
    a = _single_stream(cell("onnxruntime", 9.0, side=320), 10.5, [8.4, 9.3])
    b = _single_stream(cell("openvino", 11.0, side=320), 12.4, [10.2, 11.9])
    dec = camera([a, b])
    assert dec.pick.cand.rec.backend == "onnxruntime" and dec.tied == []
    assert "p90" in dec.pick.fig.interval_how
    # the other way: overlapping p90 intervals are a tie
    b = _single_stream(cell("openvino", 11.0, side=320), 12.4, [9.0, 11.9])
    dec = camera([a, b])
    assert [t.cand.rec.backend for t in dec.tied] == ["openvino"]


def test_a_figure_stands_beside_its_own_interval_and_says_which_statistic_decided():
    """Where the p99's interval is open above (100-odd queries) the p90 decides, bounded by LoadGen's early
    stopping: the figure shown is that p90 beside its own interval, and says so, never a p99 beside the p90's
    interval (which does not contain it); the frame time is still judged on the p99. A p99 with its own bounded
    interval shows it bare."""
    from harness.decide.by_candidates import figure_words

    dec = camera([_single_stream(cell("onnxruntime", 9.0, side=320), 10.5, [8.4, 9.3])])
    assert figure_words(dec.pick) == (
        "e2e p90 8.5 ms [8.4–9.3] (the p90 decided: the p99, 10.5 ms, has no upper bound at 110 queries)"
    )
    assert dec.pick.fig.interval.lo <= dec.pick.fig.value <= dec.pick.fig.interval.hi
    assert dec.pick.fig.limit_value == 10.5
    # the frame time is judged on the p99: a p99 over it is rejected though its p90 is within
    slow = camera([_single_stream(cell("onnxruntime", 9.0, side=320), 40.0, [8.4, 9.3])])
    assert slow.pick is None and "e2e p99 40 ms over the 33.3 ms frame time" in slow.misses[0].rejection.why
    own = _single_stream(cell("onnxruntime", 9.0, side=320), 10.5, [8.4, 9.3])
    own.scenarios["single-stream"]["p99_interval"] = [10.1, 11.0]
    assert figure_words(camera([own]).pick) == "e2e p99 10.5 ms [10.1–11]"
