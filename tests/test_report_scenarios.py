"""The report's first screen, scenario and end-to-end sections, and the folded matrix, rendered from a recorded run
with invented scenario fields added (issue 13's record fields: latency_e2e_ms, stages_ms, e2e, scenario,
scenario_result, scenarios; issue 27's LoadGen fields: each LoadGen scenario's verdict, percentile and the path of
its LoadGen summary, written beside the records). The run is marked `synthetic: true`, as the report's banner then
says: the scenario figures are generated from each cell's recorded model-only p50, nothing here was measured.

`scenario_run(dest)` is also the browser test's page.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
from test_report_render import parse, write_records

from harness.core.record import CellRecord
from harness.core.results_dir import read_records
from harness.report import render_report
from harness.report.cli import main

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "results" / "samples" / "2026-11-22-cpu-2core-accuracy"
FIXTURE = Path(__file__).parent / "data" / "report" / "cpu_run"
#: the workload of the scenario profile: size, task, batch, height, requested precision
SCENARIO_WORKLOAD = ("n", "detect", 1, 640, "fp32")
SERVER_RATES = (5, 10, 20, 40, 60, 80, 100, 140, 200)
SERVER_BOUND_MS = 100.0
SERVER_PERCENTILE = 0.9
CORES = 2
LOADGEN_SCENARIOS = ("single-stream", "multi-stream", "camera-capacity", "server", "offline")


def _loadgen(rec: CellRecord, name: str) -> dict:
    """The `loadgen` section of a LoadGen scenario: its durations and the path of its summary in the run dir."""
    return {
        "durations": "short",
        "result": "VALID",
        "logs": f"loadgen/{rec.cell_id}/{name}/mlperf_log_summary.txt",
    }


def _interval(v: float, lo: float = 0.97, hi: float = 1.04) -> list[float]:
    return [round(v * lo, 4), round(v * hi, 4)]


def _e2e(rec: CellRecord) -> None:
    """latency_e2e_ms, stages_ms, e2e and the single-stream scenario, from the cell's model-only p50."""
    lat = rec.latency_ms
    assert lat is not None
    scale = (rec.height or 640) * (rec.width or 640) / 640**2 * rec.batch
    pre, post, model = 1.8 * scale, 0.6 * rec.batch, lat.p50
    p50 = model + pre + post + 0.1
    p99 = 1.25 * p50
    rec.latency_e2e_ms = dataclasses.replace(
        lat,
        p50=p50,
        p90=1.1 * p50,
        p99=p99,
        mean=1.05 * p50,
        timing_scope="end-to-end",
        p50_ci=_interval(p50, 0.99, 1.01),
    )
    rec.stages_ms = {"preprocess": pre, "h2d": None, "model": model, "d2h": None, "postprocess": post}
    rec.null_reasons["stages_ms.h2d"] = "cpu cell: no host-to-device copy"
    rec.null_reasons["stages_ms.d2h"] = "cpu cell: no device-to-host copy"
    rec.e2e = {
        "postprocess": "ultralytics.utils.ops.scale_boxes after the end-to-end head (no NMS)",
        "rounds": 60,
        "stage_sum_ms": pre + model + post,
        "wall_ms": p50,
        "gap": 0.1 / (pre + model + post),
        "check": {"rule": "wall within 10% of the stage sum", "held": True},
    }
    rec.scenario = "single-stream"
    rec.scenario_result = {
        "scenario": "single-stream",
        "metric": "p90 latency",
        "value": 1.1 * p50,
        "unit": "ms",
        "valid": True,
        "rule": "at least 1024 queries and 60 s (shortened: 256 queries)",
        "p50": p50,
        "p90": 1.1 * p50,
        "p99": p99,
        "queries": 256,
        "duration_s": 256 * p50 / 1000,
        "p99_interval": _interval(p99),
    }


def _scenarios(rec: CellRecord) -> None:
    """The five scenarios of the scenario profile's workload."""
    assert rec.scenario_result is not None and rec.latency_ms is not None
    single = rec.scenario_result
    p50, p99 = single["p50"], single["p99"]
    streams = 2
    q50 = p50 * streams / CORES * 1.05
    capacity = 1000.0 / p50 * 1.6
    tried = []
    for rate in SERVER_RATES:
        load = min(rate / capacity, 0.97)
        tail = p99 / (1 - load)
        tried.append(
            {
                "rate": rate,
                "p99_ms": round(tail, 3),
                "target_ms": round(0.8 * tail, 3),
                "queries": 20 * rate,
                "ok": 0.8 * tail <= SERVER_BOUND_MS,
            }
        )
    passing = [t["rate"] for t in tried if t["ok"]]
    failing = [t["rate"] for t in tried if not t["ok"] and t["rate"] > max(passing, default=0)]
    ips = 1000.0 / rec.latency_ms.p50 * 1.7
    sweep = [
        {"concurrency": c, "batch": b, "ips": round(ips * f, 2)}
        for c, b, f in ((1, 1, 0.6), (2, 1, 0.85), (1, 8, 0.9), (2, 8, 1.0))
    ]
    cam = {
        str(fps): {"missed_share": max(0.0, (p99 - 1000 / fps) / p99) * 0.2, "frames": 30 * fps}
        for fps in (30, 60)
    }
    for fps, row in cam.items():
        row["p99_ms"] = p99 * (1.3 if fps == "60" else 1.0)
    rec.scenarios = {
        "single-stream": dict(single, loadgen=_loadgen(rec, "single-stream"), driver="mlperf_loadgen"),
        "multi-stream": {
            "scenario": "multi-stream",
            "metric": "p99 latency per query",
            "value": 1.3 * q50,
            "unit": "ms",
            "valid": True,
            "rule": "at least 270 queries",
            "streams": streams,
            "p50": q50,
            "p99": 1.3 * q50,
            "queries": 300,
            "throughput_ips": streams * 1000.0 / q50,
            "mechanism": "one process, a thread per stream sharing the session",
            "p99_interval": _interval(1.3 * q50),
        },
        "camera-capacity": {
            "scenario": "camera-capacity",
            "metric": "most cameras at 30 FPS",
            "value": 2,
            "unit": "cameras",
            "valid": True,
            "fps": 30.0,
            "percentile": 0.9,
            "interval": [2, 3],
            "possibly": None,
            "decided": True,
            "mechanism": "split",
            "deploy": "2 InferenceSessions x 1 thread",
            "rule": "every mechanism the runner declares; ...",
            "tried": [],
            "mechanisms": {
                "serial": {"applies": True, "value": 1, "interval": [1, 2], "settled": False},
                "streams": {"applies": True, "value": 1, "interval": [1, 2], "settled": False},
                "split": {
                    "applies": True,
                    "value": 2,
                    "interval": [2, 3],
                    "settled": True,
                    "deploy": "2 InferenceSessions x 1 thread",
                },
                "batched": {"applies": False, "why_not": "a static batch-1 export", "value": None},
            },
            "cost": {"seconds": 31.5, "runs": 11},
        },
        "server": {
            "scenario": "server",
            "metric": "queries/s at p99 within the bound",
            "value": max(passing) if passing else None,
            "unit": "q/s",
            "valid": bool(passing),
            "rule": f"LoadGen's verdict: p90 <= {SERVER_BOUND_MS:g} ms, Poisson arrivals",
            "bound_ms": SERVER_BOUND_MS,
            "percentile": SERVER_PERCENTILE,
            "rate_interval": [max(passing) if passing else 0, min(failing) if failing else None],
            "tried": tried,
            "concurrency": CORES,
            "mechanism": "2 worker threads",
        },
        "offline": {
            "scenario": "offline",
            "metric": "images/s",
            "value": max(s["ips"] for s in sweep),
            "unit": "images/s",
            "valid": True,
            "rule": "at least 24576 images (shortened: 2048)",
            "batch": 8,
            "concurrency": 2,
            "sweep": sweep,
            "ips_interval": _interval(max(s["ips"] for s in sweep)),
        },
        "camera": {
            "scenario": "camera",
            "driver": "harness (LoadGen has no camera scenario)",
            "metric": "missed frame share at 30 FPS",
            "value": cam["30"]["missed_share"],
            "unit": "share",
            "valid": True,
            "rule": "30 s of frames at each rate, the newest frame wins",
            "fps": cam,
        },
    }


def scenario_run(dest: Path, source: Path | None = None) -> Path:
    """A copy of a recorded CPU run (the sample run, else the CPU fixture) with the scenario fields added, marked
    synthetic; returns its directory."""
    source = source or (SAMPLE if (SAMPLE / "cells.jsonl").is_file() else FIXTURE)
    run = dest / "scenario-run"
    shutil.copytree(source, run, ignore=shutil.ignore_patterns("report"))
    env = json.loads((run / "env.json").read_text())
    env["synthetic"] = True
    (run / "env.json").write_text(json.dumps(env))
    recs = read_records(run)
    for rec in recs:
        rec.synthetic = True
        if rec.status == "ok" and rec.latency_ms and not rec.dynamic:
            _e2e(rec)
            workload = (rec.size, rec.task, rec.batch, rec.height, rec.precision_requested)
            if workload == SCENARIO_WORKLOAD and rec.device == "cpu":
                _scenarios(rec)
                assert rec.scenarios is not None
                for name in LOADGEN_SCENARIOS:
                    res = rec.scenarios[name]
                    res.setdefault("loadgen", _loadgen(rec, name))
                    summary = run / res["loadgen"]["logs"]
                    summary.parent.mkdir(parents=True, exist_ok=True)
                    summary.write_text(f"MLPerf Results Summary (synthetic)\nScenario : {name}\n")
    write_records(run, recs)
    return run


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("scen")
    run = scenario_run(tmp)
    index = render_report([run], tmp / "reports")
    return run, index, parse(index)


def _scenario_cells(run: Path) -> list[CellRecord]:
    return [r for r in read_records(run) if r.scenarios]


def test_first_screen_names_a_pick_per_use_case(page):
    run, _, doc = page
    table = doc.one("table", cls="decision")
    rows = {tr.attrs["data-key"]: tr for tr in table.all("tr") if "data-key" in tr.attrs}
    for key in ("camera", "camera-capacity", "server", "offline", "lowest-memory", "mobile-embedded"):
        answer = rows[key].one("td", cls="answer")
        assert answer.attrs["data-state"] in ("pick", "tied"), (key, answer.text())
        assert answer.attrs["data-backends"]
    # every configuration competes for the camera (issue 28): the pick is at least as fast as the scenario cell
    # with the lowest e2e p99, or tied with it
    cells = _scenario_cells(run)
    best = min(cells, key=lambda r: r.scenarios["single-stream"]["p99"])
    decision = json.loads((page[1].parent / "decision.json").read_text())
    camera = next(e for e in decision["decisions"] if e["use_case"] == "camera")
    tied = {t["configuration"]["cell_id"] for t in camera["tied_with"]}
    assert camera["pick"]["value"] <= best.scenarios["single-stream"]["p99"] or best.cell_id in tied
    assert (
        camera["pick"]["configuration"]["backend"]
        in rows["camera"].one("td", cls="answer").attrs["data-backends"]
    )
    # each row links to the recommendation that holds its evidence
    ids = {n.attrs.get("id") for n in doc.iter()}
    for tr in rows.values():
        assert tr.one("th").one("a").attrs["href"].lstrip("#") in ids
    # the first screen comes before the machine header and the evidence
    order = [n.attrs.get("id") for n in doc.iter() if n.tag == "section"]
    assert order[:3] == ["decision", "runs", "evidence"]


def test_scenario_table_shows_each_scenarios_value_unit_and_validity(page):
    run, _, doc = page
    table = doc.one("table", cls="scenarios")
    cells = _scenario_cells(run)
    assert cells
    for rec in cells:
        tr = table.one("tr", data_cell_id=rec.cell_id)
        for td in tr.all("td", cls="scenario"):
            res = rec.scenarios[td.attrs["data-scenario"]]
            assert td.attrs["data-valid"] == ("yes" if res["valid"] else "no")
            if res["value"] is None:
                assert "n/a" in td.text()
            elif res["unit"] == "share":
                assert f"{100 * res['value']:.1f}%" in td.text()
            else:
                assert res["unit"] in td.text()
    assert doc.one("figure", data_plot="latency-throughput-0").all("svg", cls="plot")


def test_the_scenario_table_shows_every_camera_capacity_mechanisms_answer_and_the_searchs_cost(page):
    run, _, doc = page
    table = doc.one("table", cls="scenarios")
    for rec in _scenario_cells(run):
        td = table.one("tr", data_cell_id=rec.cell_id).one("td", data_scenario="camera-capacity")
        text = td.text()
        assert "2 cameras" in text and "by 2 InferenceSessions x 1 thread" in text
        assert "serial 1 [fails at 2] (screened)" in text and "split 2 [fails at 3]" in text
        assert "batched: does not apply" in text and "11 runs, 31.5 s" in text


def test_each_loadgen_scenario_links_its_loadgen_summary_and_the_camera_none(page):
    run, index, doc = page
    table = doc.one("table", cls="scenarios")
    cells = _scenario_cells(run)
    for rec in cells:
        tr = table.one("tr", data_cell_id=rec.cell_id)
        for td in tr.all("td", cls="scenario"):
            name = td.attrs["data-scenario"]
            links = [a for a in td.all("a", cls="log") if a.text() == "LoadGen summary"]
            if name == "camera":
                assert not links
                continue
            (link,) = links
            target = (index.parent / link.attrs["href"]).resolve()
            assert target == (run / rec.scenarios[name]["loadgen"]["logs"]).resolve() and target.is_file()
        # the server's percentile is the one it was judged at, not a p99 by default
        server = tr.one("td", data_scenario="server")
        assert f"p90 ≤ {SERVER_BOUND_MS:g} ms" in server.text()


def test_a_loadgen_log_path_outside_the_run_is_not_linked(tmp_path):
    run = scenario_run(tmp_path)
    recs = read_records(run)
    for rec in recs:
        if rec.scenarios:
            rec.scenarios["offline"]["loadgen"]["logs"] = "../../../../etc/passwd"
    write_records(run, recs)
    doc = parse(render_report([run], tmp_path / "reports"))
    for td in doc.one("table", cls="scenarios").all("td", data_scenario="offline"):
        assert not [a for a in td.all("a", cls="log") if a.text() == "LoadGen summary"]
    assert [a for a in doc.one("table", cls="scenarios").all("a", cls="log") if a.text() == "LoadGen summary"]


def test_e2e_table_shows_model_only_beside_end_to_end_and_stages(page):
    run, _, doc = page
    notes = {li.attrs["id"]: li.text() for li in doc.one("ol", cls="notes").all("li")}
    rec = next(r for r in _scenario_cells(run) if r.backend == "onnxruntime")
    tr = doc.one("table", cls="e2e").one("tr", data_cell_id=rec.cell_id)
    cols = {td.attrs["data-col"]: td for td in tr.all("td") if "data-col" in td.attrs}
    assert float(cols["model_p50"].text()) == pytest.approx(rec.latency_ms.p50, rel=0.006)
    assert float(cols["e2e_p99"].text()) == pytest.approx(rec.latency_e2e_ms.p99, rel=0.006)
    h2d = cols["h2d"]
    assert h2d.text().startswith("n/a")
    assert notes[h2d.one("a").attrs["href"].lstrip("#")] == rec.null_reasons["stages_ms.h2d"]
    assert doc.one("figure", data_plot="stages").all("svg", cls="plot")


def test_devices_without_a_cell_run_fold_into_one_line_each(page):
    run, _, doc = page
    recs = read_records(run)
    by_device: dict[str, set[str]] = {}
    for r in recs:
        by_device.setdefault(r.device, set()).add(r.status)
    gone = {d for d, statuses in by_device.items() if statuses == {"skipped"}}
    assert "cuda" in gone
    lines = doc.one("table", cls="folded").all("tr", cls="folded-line")
    device_lines = [tr.attrs["data-device"] for tr in lines if "data-backend" not in tr.attrs]
    assert sorted(device_lines) == sorted(gone)
    # no matrix has a column of those devices, and each of their cells is still on the page, once
    for table in doc.all("table", cls="matrix"):
        assert not {th.attrs["data-device"] for th in table.all("th", cls="col")} & gone
    for r in recs:
        if r.device in gone and not r.remedy_of:
            assert len(doc.all("div", cls="entry", data_cell_id=r.cell_id)) == 1


def test_memory_cap_rejects_the_fastest_and_is_said_on_the_first_screen(tmp_path, capsys):
    run = scenario_run(tmp_path)
    cells = _scenario_cells(run)
    best = min(cells, key=lambda r: r.scenarios["single-stream"]["p99"])
    cap = best.memory.host_peak_rss_mib - 1
    assert main([str(run), "-o", str(tmp_path / "out"), "--memory-cap", f"{cap}", "-q"]) == 0
    doc = parse(tmp_path / "out" / "latest" / "index.html")
    camera = doc.one("div", cls="rec", data_key="camera", data_task="detect")
    rejected = camera.one("li", data_cell_id=best.cell_id, data_constraint="memory cap")
    assert "over the" in rejected.text() and "MiB cap" in rejected.text()
    answer = doc.one("table", cls="decision").one("tr", data_key="camera").one("td", cls="answer")
    assert best.backend not in answer.attrs["data-backends"].split()
    assert "memory cap" in doc.one("section", id="decision").text()
    assert main([str(run), "-o", str(tmp_path / "bad"), "--memory-cap", "-5"]) == 2
    assert "--memory-cap" in capsys.readouterr().err


def test_a_run_without_scenarios_says_the_use_cases_were_not_measured(tmp_path):
    doc = parse(render_report([FIXTURE], tmp_path))
    rows = {
        tr.attrs["data-key"]: tr
        for tr in doc.one("table", cls="decision").all("tr")
        if "data-key" in tr.attrs
    }
    # one row for the four scenario use cases, not four rows of "not measured"
    row = rows["scenarios"]
    assert row.attrs["data-keys"].split() == ["camera", "camera-capacity", "server", "offline"]
    assert row.one("td", cls="answer").attrs["data-state"] == "not-measured"
    assert "no scenario records in this run" in row.text()
    for key in ("camera", "camera-capacity", "server", "offline"):
        assert key not in rows
        rec = doc.one("div", cls="rec", data_key=key, data_task="detect")
        assert rec.attrs["data-measured"] == "no" and "not measured" in rec.one("div", cls="none").text()
    # the model-only answer stands in, as before the scenarios
    assert rows["cpu-edge"].one("td", cls="answer").attrs["data-state"] in ("pick", "tied")
    assert not doc.all(id="scenarios") and not doc.all(id="e2e")


def test_operator_view_is_shown_when_its_module_exists_and_left_out_when_not(tmp_path, monkeypatch):
    import sys

    from harness.decide.index import index_runs
    from harness.decide.load import load_runs
    from harness.report.render import operators_html

    indexes = index_runs(load_runs([FIXTURE]))
    if "harness.report.operators" not in sys.modules:
        try:
            import harness.report.operators  # noqa: F401
        except ModuleNotFoundError:
            pytest.skip("harness/report/operators.py is not in this checkout yet")
    assert operators_html(indexes) is not None
    assert parse(render_report([FIXTURE], tmp_path / "with")).all(id="operators-view")
    monkeypatch.setitem(sys.modules, "harness.report.operators", None)  # as if the module were missing
    assert operators_html(indexes) is None
    assert not parse(render_report([FIXTURE], tmp_path / "without")).all(id="operators-view")
