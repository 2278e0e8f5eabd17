"""`yolo26-bench check` (issue 36, item 7): the relations between a record's figures, on the real H100 records
(tests/data/gpu_h100), on every committed CPU sample, and on copies of real records with one figure broken (each
relation is shown to break, and to hold)."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from harness.check import cli
from harness.check.relations import RELATIONS, check_record, check_records
from harness.core.record import CellRecord, Roofline
from harness.core.results_dir import read_records

DATA = Path(__file__).parent / "data" / "gpu_h100"
H100_FILES = sorted(DATA.glob("*.jsonl"))
SAMPLES = Path(__file__).resolve().parents[1] / "results" / "samples"

#: the seven ok CUDA records of the first H100 run whose NVML process peak is below torch's max reserved
SEVEN = {
    (
        "eager-cudagraph-fp32-fp16-cells.jsonl",
        "yolo26n-detect-e2e-torch-eager-cudagraph-cuda-640x640-b1-fp32",
    ),
    ("eager-cudagraph-fp32-fp16-cells.jsonl", "yolo26n-detect-e2e-torch-eager-cuda-640x640-b1-fp16"),
    (
        "eager-cudagraph-fp32-fp16-cells.jsonl",
        "yolo26n-detect-e2e-torch-eager-cudagraph-cuda-640x640-b1-fp16",
    ),
    ("kit-cells-n.jsonl", "yolo26n-detect-e2e-torch-eager-cuda-640x640-b1-fp32"),
    ("kit-cells-n.jsonl", "yolo26n-detect-e2e-torch-eager-cudagraph-cuda-640x640-b1-fp32"),
    ("kit-cells-s.jsonl", "yolo26s-detect-e2e-torch-eager-cuda-640x640-b1-fp32"),
    ("kit-cells-s.jsonl", "yolo26s-detect-e2e-torch-eager-cudagraph-cuda-640x640-b1-fp32"),
}

#: the findings on the committed CPU samples: records whose own e2e check already says it did not hold (stages
#: 0.874 x the whole call; torch-compile on a loaded 2-core machine; the families sample's five, below). Its cause is in the e2e measurement
#: (harness/measure/pipeline.py), where it is to be fixed: the check reports it, it does not hide it.
CPU_KNOWN = {
    ("2026-11-25-cpu-2core-compile", "yolo26n-detect-e2e-torch-compile-cpu-192x192-b1-fp32", "e2e-stage-sum"),
    # the families sample, measured beside other engineers' training and benchmark on the same 2 cores (its
    # README): 6 end-to-end pairs per cell, and five records' own e2e check says it did not hold
    *(
        ("2026-11-29-cpu-2core-families", f"{cell}-cpu-640x640-b1-fp32", "e2e-stage-sum")
        for cell in (
            "yolo11n-detect-raw-torch-eager",
            "yolo11n-detect-raw-executorch-xnnpack",
            "yolo11n-detect-raw-onnxruntime",
            "yolo26s-detect-e2e-torch-eager",
            "yolo11s-detect-raw-torch-eager",
        )
    ),
    # the tasks sample, its first two sessions beside the whole test suite (its README): each record's own e2e
    # check says it did not hold
    *(
        ("2026-11-29-cpu-2core-tasks", cell, relation)
        for cell, relation in (
            ("yolo26n-detect-e2e-executorch-xnnpack-cpu-640x640-b1-fp32", "e2e-stage-sum"),
            ("yolo26n-detect-e2e-onnxruntime-cpu-640x640-b1-fp32", "e2e-stage-sum"),
            ("yolo26n-detect-e2e-openvino-cpu-320x320-b1-int8", "e2e-stage-sum"),
            ("yolo26n-detect-e2e-openvino-cpu-640x640-b1-fp32", "e2e-stage-sum"),
            ("yolo26n-detect-e2e-torch-eager-cpu-320x320-b1-fp32", "e2e-stage-sum"),
            ("yolo26n-detect-e2e-torch-eager-cpu-640x640-b1-fp32", "e2e-stage-sum"),
            ("yolo26n-detect-raw-executorch-xnnpack-cpu-320x320-b1-fp32", "e2e-stage-sum"),
            ("yolo26n-detect-raw-openvino-cpu-320x320-b1-fp32", "e2e-stage-sum"),
            ("yolo26n-detect-raw-openvino-cpu-640x640-b1-fp32", "e2e-stage-sum"),
            ("yolo26n-detect-raw-torch-eager-cpu-320x320-b1-fp32", "e2e-stage-sum"),
            ("yolo26n-detect-raw-torch-eager-cpu-320x320-b1-fp32", "e2e-stages-vs-whole"),
            ("yolo26n-detect-raw-torch-eager-cpu-640x640-b1-fp32", "e2e-stage-sum"),
            ("yolo26n-obb-raw-onnxruntime-cpu-320x320-b1-fp32", "e2e-stage-sum"),
            ("yolo26n-obb-raw-openvino-cpu-320x320-b1-fp32", "e2e-stage-sum"),
            ("yolo26n-obb-raw-torch-eager-cpu-320x320-b1-fp32", "e2e-stage-sum"),
            ("yolo26n-pose-e2e-executorch-xnnpack-cpu-320x320-b1-fp32", "e2e-stage-sum"),
            ("yolo26n-pose-e2e-onnxruntime-cpu-320x320-b1-fp32", "e2e-stage-sum"),
            ("yolo26n-pose-e2e-onnxruntime-cpu-320x320-b1-int8", "e2e-stage-sum"),
            ("yolo26n-pose-e2e-onnxruntime-cpu-640x640-b1-fp32", "e2e-stage-sum"),
            ("yolo26n-pose-e2e-openvino-cpu-320x320-b1-fp32", "e2e-stage-sum"),
            ("yolo26n-pose-e2e-torch-eager-cpu-320x320-b1-fp32", "e2e-stage-sum"),
            ("yolo26n-pose-e2e-torch-eager-cpu-640x640-b1-fp32", "e2e-stage-sum"),
            ("yolo26n-pose-raw-executorch-xnnpack-cpu-320x320-b1-fp32", "e2e-stage-sum"),
            ("yolo26n-pose-raw-executorch-xnnpack-cpu-640x640-b1-fp32", "e2e-stage-sum"),
            ("yolo26n-pose-raw-onnxruntime-cpu-640x640-b1-fp32", "e2e-stage-sum"),
            ("yolo26n-pose-raw-onnxruntime-cpu-640x640-b1-fp32", "e2e-stages-vs-whole"),
            ("yolo26n-pose-raw-openvino-cpu-320x320-b1-fp32", "e2e-stage-sum"),
            ("yolo26n-pose-raw-torch-eager-cpu-320x320-b1-fp32", "e2e-stage-sum"),
            ("yolo26n-seg-e2e-onnxruntime-cpu-320x320-b1-fp32", "e2e-stage-sum"),
            ("yolo26n-seg-e2e-onnxruntime-cpu-320x320-b1-int8", "e2e-stage-sum"),
            ("yolo26n-seg-e2e-openvino-cpu-320x320-b1-int8", "e2e-stage-sum"),
            ("yolo26n-seg-raw-executorch-xnnpack-cpu-640x640-b1-fp32", "e2e-stage-sum"),
            ("yolo26n-seg-raw-openvino-cpu-320x320-b1-fp32", "e2e-stage-sum"),
            ("yolo26n-seg-raw-openvino-cpu-640x640-b1-fp32", "e2e-stage-sum"),
            ("yolo26n-seg-raw-torch-eager-cpu-320x320-b1-fp32", "e2e-stage-sum"),
        )
    ),
}


def _ok(path: Path) -> list[CellRecord]:
    return [r for r in read_records(path) if r.status == "ok"]


def test_the_h100_records_break_exactly_the_seven_memory_relations():
    found = {(p.name, f.cell_id, f.relation) for p in H100_FILES for f in check_records(read_records(p))}
    assert found == {(name, cid, "gpu-memory") for name, cid in SEVEN}
    ok_cuda = [(p.name, r.cell_id) for p in H100_FILES for r in _ok(p) if r.device == "cuda"]
    assert len(ok_cuda) == 11
    # the other four hold: NVML's process peak is at or above torch's reserved memory there
    for name, cid in set(ok_cuda) - SEVEN:
        rec = next(r for r in read_records(DATA / name) if r.cell_id == cid)
        assert rec.memory.torch_max_reserved_mib <= rec.memory.device_peak_process_mib


def test_every_committed_cpu_sample_breaks_no_relation_but_the_known_one():
    runs = sorted(p.parent for p in SAMPLES.rglob("cells.jsonl") if "cpu" in p.relative_to(SAMPLES).parts[0])
    assert len(runs) >= 10
    found = {(run.name, f.cell_id, f.relation) for run in runs for f in check_records(read_records(run))}
    assert found == CPU_KNOWN
    for run, cid, _ in CPU_KNOWN:
        rec = next(r for r in read_records(SAMPLES / run) if r.cell_id == cid)
        assert rec.e2e["check"]["held"] is False  # the record says so itself


@pytest.fixture
def good() -> CellRecord:
    """A real record that breaks nothing: the H100 CUDA-graph fp32 cell of the scenarios run."""
    rec = _ok(DATA / "scenarios-cudagraph-cells.jsonl")[0]
    assert check_record(rec) == []
    return rec


def _broken(rec: CellRecord, **changes) -> CellRecord:
    return dataclasses.replace(rec, **changes)


def _scaled(lat, k: float):
    """`lat` with every time multiplied by `k` (the percentiles and the interval still in order)."""
    times = ("p50", "p90", "p99", "mean", "min", "max", "stdev")
    changed = {f: getattr(lat, f) * k for f in times if getattr(lat, f) is not None}
    ci = [v * k for v in lat.p50_ci] if lat.p50_ci is not None else None
    return dataclasses.replace(lat, **changed, p50_ci=ci)


def _no_gap(rec: CellRecord, stages: float = 1.0, scatter: float | None = None) -> CellRecord:
    """`rec` without `e2e.gap` (its stage_sum_ms as it was), each stage's p50 multiplied by `stages`."""
    e2e = {k: v for k, v in rec.e2e.items() if k != "gap"}
    staged = {k: v * stages if v is not None else None for k, v in rec.stages_ms.items()}
    lat = rec.latency_e2e_ms if scatter is None else dataclasses.replace(rec.latency_e2e_ms, scatter=scatter)
    return _broken(rec, e2e=e2e, stages_ms=staged, latency_e2e_ms=lat)


def _roofline(rec: CellRecord, bound_share: float) -> Roofline:
    """A roofline section for `rec` whose achieved rate (5.4 GFLOP over its p50) is `bound_share` of its bound."""
    achieved = 5.4e9 / (rec.latency_ms.p50 / 1000)
    return Roofline(
        flops=5.4e9, achieved_flops_s=achieved, precision="fp32", peak_flops_s=achieved / bound_share,
        bound_flops_s=achieved / bound_share, bound_by="compute", peak_of="fp32",
    )  # fmt: skip


def test_each_relation_breaks_on_a_record_with_one_figure_changed(good):
    lat, dev, mem, en = good.latency_ms, good.device_latency_ms, good.memory, good.energy
    cases = {
        "gpu-memory": [
            _broken(
                good, memory=dataclasses.replace(mem, torch_max_reserved_mib=mem.device_peak_process_mib + 3)
            ),
            _broken(
                good, memory=dataclasses.replace(mem, torch_max_allocated_mib=mem.torch_max_reserved_mib + 1)
            ),
        ],
        "percentiles": [
            _broken(good, latency_ms=dataclasses.replace(lat, p90=lat.p99 + 0.1)),
            _broken(
                good, device_latency_ms=dataclasses.replace(dev, p50_ci=[dev.p50 + 0.01, dev.p50 + 0.02])
            ),
            _broken(good, latency_ms=dataclasses.replace(lat, max=lat.p99 - 0.01)),
        ],
        "e2e-stage-sum": [_broken(good, e2e={**good.e2e, "gap": 0.08})],
        # issue 40: stages twice the whole call, the record without e2e.gap (stage_sum_ms left as it was)
        "e2e-stages-vs-whole": [_no_gap(good, stages=2.0), _no_gap(good, stages=0.5)],
        "device-within-host": [
            _broken(
                good,
                device_samples_ms=[
                    h + 0.05 if i == 3 else d
                    for i, (d, h) in enumerate(zip(good.device_samples_ms, good.samples_ms, strict=True))
                ],
            ),
        ],
        # issue 40: a device p50 twice the host p50 while the per-round samples are recorded (and without them)
        "device-p50-within-host": [
            _broken(good, device_latency_ms=_scaled(dev, 2 * lat.p50 / dev.p50)),
            _broken(good, device_latency_ms=_scaled(dev, 2 * lat.p50 / dev.p50), device_samples_ms=None),
        ],
        "energy-window": [
            _broken(good, energy=dataclasses.replace(en, inferences=en.inferences + 1)),
            _broken(good, energy=dataclasses.replace(en, window_s=0.5)),
        ],
        # a cell that beats its machine's measured bound (tests/test_roofline.py has the rest)
        "roofline-bound": [_broken(good, roofline=_roofline(good, bound_share=1.2))],
    }
    assert set(cases) == set(RELATIONS)
    for relation, recs in cases.items():
        for rec in recs:
            assert [f.relation for f in check_record(rec)] == [relation], relation


def test_what_each_relation_lets_pass(good):
    mem, en = good.memory, good.energy
    # within the stated memory tolerance (2 MiB), a window under 1 s that says so, a gap inside +-5%, a device
    # round a few microseconds over its host round, figures that are null
    near = dataclasses.replace(mem, torch_max_reserved_mib=mem.device_peak_process_mib + 2)
    short = dataclasses.replace(
        en, window_s=0.5, source=en.source + "; energy window 0.50 s is shorter than 1.0 s"
    )
    assert check_record(_broken(good, memory=near)) == []
    assert check_record(_broken(good, roofline=_roofline(good, bound_share=1.09))) == []  # within +10%
    assert check_record(_broken(good, e2e={**good.e2e, "gap": -0.049})) == []
    dev = [d + 0.005 if i == 0 else d for i, d in enumerate(good.device_samples_ms)]
    assert check_record(_broken(good, device_samples_ms=dev)) == []
    nulls = dataclasses.replace(mem, device_peak_process_mib=None)
    assert check_record(_broken(good, memory=nulls, energy=None, device_samples_ms=None)) == []
    # (without the host rounds, whose sum is 2.2 s: a window of 0.5 s could not have covered them)
    assert check_record(_broken(good, energy=short, samples_ms=None, device_samples_ms=None)) == []
    unsaid = dataclasses.replace(short, source=en.source)
    assert [f.relation for f in check_record(_broken(good, energy=unsaid, samples_ms=None))] == [
        "energy-window"
    ]


def test_check_command_exit_status_and_lines(tmp_path, capsys):
    kit = tmp_path / "kit-n"
    kit.mkdir()
    shutil.copy(DATA / "kit-cells-n.jsonl", kit / "cells.jsonl")
    clean = tmp_path / "scen"
    clean.mkdir()
    shutil.copy(DATA / "scenarios-cudagraph-cells.jsonl", clean / "cells.jsonl")

    assert cli.main([str(clean)]) == 0
    out, err = capsys.readouterr()
    assert out == "" and "no relation broken" in err

    assert cli.main([str(clean), str(kit), str(DATA / "kit-cells-s.jsonl")]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4
    assert lines[0].startswith("kit-n: yolo26n-detect-e2e-torch-eager-cuda-640x640-b1-fp32: gpu-memory: ")
    assert all(": gpu-memory: torch_max_reserved " in line for line in lines)

    # bad input: one line, nothing checked
    assert cli.main([str(clean), str(tmp_path / "missing")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "missing: no cells.jsonl" in err


def test_the_command_is_on_the_one_command_line():
    from harness.cli import COMMANDS, command

    assert "check" in COMMANDS and command("check") is cli.main


def test_the_report_shows_the_same_findings(tmp_path):
    from harness.report.render import render_report

    kit = tmp_path / "kit-s"
    kit.mkdir()
    shutil.copy(DATA / "kit-cells-s.jsonl", kit / "cells.jsonl")
    shutil.copy(DATA / "kit-env.json", kit / "env.json")
    html = render_report([kit], tmp_path / "reports").read_text()
    assert html.count('data-relation="gpu-memory"') == 2
    for cid in (
        "yolo26s-detect-e2e-torch-eager-cuda-640x640-b1-fp32",
        "yolo26s-detect-e2e-torch-eager-cudagraph-cuda-640x640-b1-fp32",
    ):
        assert f'data-relation="gpu-memory" data-cell-id="{cid}"' in html


def test_the_gpu_samples_first_runs_memory_contradictions_and_the_new_kits_none():
    """The H100 sample (the first GPU run, before issue 36) holds four of the seven contradictions (the kit's; the
    other three are in tests/data only); the H200 sample of the new kit breaks nothing."""
    h100 = check_records(read_records(SAMPLES / "2026-11-25-h100" / "run"))
    assert {f.relation for f in h100} == {"gpu-memory"} and len(h100) == 4
    assert check_records(read_records(SAMPLES / "2026-11-25-h200-kit" / "call1")) == []
    # the H100 kit's batch-16 fp16 records of the next day: every relation holds there too
    b16 = read_records(SAMPLES / "2026-11-26-h100" / "b16")
    assert [r.status for r in b16] == ["ok", "ok"] and check_records(b16) == []


# ---- issue 40: the two relations added, escaped lines, no records ---------------------------------------------


def test_the_new_relations_name_the_issues_probes(good):
    """The probes of issue 40 item 6, each named by its relation (before: no finding at all)."""
    lat, dev = good.latency_ms, good.device_latency_ms
    twice = _broken(good, device_latency_ms=_scaled(dev, 2 * lat.p50 / dev.p50))
    (f,) = check_record(twice)
    assert f.relation == "device-p50-within-host" and "2.00 x" in f.detail and "summar" not in f.relation
    stages = check_record(_no_gap(good, stages=2.0))
    assert [f.relation for f in stages] == ["e2e-stages-vs-whole"]
    assert "no e2e.gap recorded" in stages[0].detail and "2.0" in stages[0].detail
    # device rounds twice the host rounds: each round breaks, and so does the rounds' p50
    rounds = _broken(
        good,
        device_samples_ms=[2 * h for h in good.samples_ms],
        device_latency_ms=_scaled(dev, 2 * lat.p50 / dev.p50),
    )
    found = {f.relation: f.detail for f in check_record(rounds)}
    assert set(found) == {"device-within-host", "device-p50-within-host"}
    assert "per-round samples" in found["device-p50-within-host"]


def test_what_the_new_relations_let_pass(good):
    lat, dev = good.latency_ms, good.device_latency_ms
    # the device p50 a few microseconds over the host p50 (within 0.01 ms); the stages 4% over the whole call
    near = _scaled(dev, (lat.p50 + 0.005) / dev.p50)
    assert check_record(_broken(good, device_latency_ms=near)) == []
    assert check_record(_no_gap(good, stages=1.04)) == []
    assert check_record(_no_gap(good, stages=0.96)) == []
    # whole calls spread widely (scatter 0.3): 5% + 2 x 0.3 = 65% either way holds, twice does not
    assert check_record(_no_gap(good, stages=1.6, scatter=0.3)) == []
    assert [f.relation for f in check_record(_no_gap(good, stages=2.0, scatter=0.3))] == [
        "e2e-stages-vs-whole"
    ]
    # nothing to relate: no whole call, no stages, no host figures
    bare = _no_gap(good, stages=2.0)
    assert check_record(_broken(bare, e2e={}, latency_e2e_ms=None)) == []
    assert check_record(_broken(bare, stages_ms=None, e2e={"wall_ms": 10.0})) == []
    assert check_record(_broken(good, latency_ms=None, samples_ms=None, energy=None)) == []


def test_every_committed_record_without_its_gap_holds_the_stage_relation():
    """The tolerance of e2e-stages-vs-whole holds on every real record with an e2e section, with its paired gap and
    once it is taken away (the worst: +0.747 at a scatter of 0.426, a torch-compile cell on a loaded 2-core machine)."""
    records = [r for p in H100_FILES for r in read_records(p)]
    # the samples' records, but those CPU_KNOWN names for this relation (their own e2e check says it did not hold)
    records += [
        r
        for p in SAMPLES.rglob("cells.jsonl")
        for r in read_records(p)
        if (p.parent.name, r.cell_id, "e2e-stages-vs-whole") not in CPU_KNOWN
    ]
    with_e2e = [r for r in records if r.e2e and r.e2e.get("gap") is not None]
    assert len(with_e2e) > 100
    for rec in with_e2e:  # with its gap too (issue 66: the relation no longer skips a record that has one)
        for r in (rec, _no_gap(rec)):
            assert [f for f in check_record(r) if f.relation == "e2e-stages-vs-whole"] == [], rec.cell_id


def test_stages_twice_the_whole_are_named_whatever_the_records_gap_says(good):
    """Issue 66: a record whose stages add up to twice its end-to-end p50 passed `check` when its `e2e.gap` was
    present (the relation returned early); the gap it holds says nothing of the stages it also holds."""
    assert good.e2e.get("gap") is not None
    staged = _broken(
        good, stages_ms={k: v * 2.0 if v is not None else None for k, v in good.stages_ms.items()}
    )
    assert staged.e2e["gap"] == good.e2e["gap"]  # the record's own gap still within 5%
    (f,) = check_record(staged)
    assert f.relation == "e2e-stages-vs-whole" and "2.0" in f.detail
    assert f"the record's e2e.gap says {good.e2e['gap']:+.3f}" in f.detail
    # the other way: the same record with its stages 4% over the whole call holds, gap or not
    near = _broken(
        good, stages_ms={k: v * 1.04 if v is not None else None for k, v in good.stages_ms.items()}
    )
    assert check_record(near) == []


def test_check_says_when_a_run_is_marked_incomplete(tmp_path, capsys):
    """Issue 66: `check` said nothing of a run its env.json marks incomplete (killed, interrupted); it says so on
    stderr, and checks the cells the run recorded as any others (the status is the relations')."""
    import json

    run = tmp_path / "r"
    run.mkdir()
    shutil.copy(SAMPLES / "2026-11-25-h200-kit" / "call1" / "cells.jsonl", run / "cells.jsonl")
    env = {"schema_version": 2, "run_id": "r"}
    (run / "env.json").write_text(json.dumps(env))
    assert cli.main([str(run)]) == 0
    assert "incomplete" not in capsys.readouterr().err  # the other way: a run that ended whole
    env["incomplete"] = {"reason": "interrupted by SIGINT", "cells_recorded": 1, "cells_planned": 2}
    (run / "env.json").write_text(json.dumps(env))
    assert cli.main([str(run)]) == 0
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines()[0] == (
        "check: r: incomplete: 1 of 2 cells (interrupted by SIGINT); only the cells it recorded were checked"
    )


def _run_with(tmp_path: Path, cell_id: str) -> Path:
    """A run of one real record (it breaks gpu-memory) whose cell id is `cell_id`."""
    import json

    lines = [json.loads(t) for t in (DATA / "kit-cells-n.jsonl").read_text().splitlines() if t.strip()]
    line = next(r for r in lines if r["cell_id"] == "yolo26n-detect-e2e-torch-eager-cuda-640x640-b1-fp32")
    line["cell_id"] = cell_id
    run = tmp_path / "forged"
    run.mkdir()
    (run / "cells.jsonl").write_text(json.dumps(line) + "\n")
    return run


def test_a_cell_id_with_a_newline_or_escapes_stays_on_its_line(tmp_path, capsys):
    forged = "x\nforged: 0 records of 1 run(s): no relation broken\x1b[2K\r\x1e"
    run = _run_with(tmp_path, forged)
    assert cli.main([str(run)]) == 1
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert len(lines) == 1 and "\x1b" not in out and "\r" not in out
    assert lines[0].startswith(
        "forged: x\\nforged: 0 records of 1 run(s): no relation broken\\x1b[2K\\r\\x1e: "
    )
    assert ": gpu-memory: " in lines[0] and err.count("\n") == 1


def test_an_empty_records_file_is_no_records_status_2(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "cells.jsonl").write_bytes(b"")
    blank = tmp_path / "blank.jsonl"
    blank.write_text("\n  \n\n")
    good = DATA / "kit-cells-n.jsonl"
    for args in ([empty], [blank], [good, empty]):
        assert cli.main([str(a) for a in args]) == 2, args
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and "no records" in err, err


def test_a_records_line_too_deep_to_read_is_one_line_status_2(tmp_path, capsys, caplog):
    deep = tmp_path / "deep.jsonl"
    deep.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    assert cli.main([str(deep)]) == 2  # never a traceback, never status 1
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert "no records" in err and str(deep) in err
    # the reader names the line it skipped
    assert any(f"{deep}:1: nested deeper than" in r.getMessage() for r in caplog.records)


def test_check_usage_errors_are_one_line(capsys):
    assert cli.main([]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and " check: error: the following arguments are required: RUN_DIR" in err
    assert cli.main(["--bogus", "x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unrecognized arguments: --bogus" in err
