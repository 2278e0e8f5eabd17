"""Bad input gets one clear error line before any work starts; a real suite run writes records and env.json."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO


def _pytest_suites(*args, cwd=REPO, timeout=600):
    return subprocess.run(
        [sys.executable, "-m", "pytest", "suites/", "--benchmark-only", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--backends", "onnxruntime,tensorflow"],
            "--backends: unknown 'tensorflow'; valid: torch-eager, onnxruntime",
        ),
        (["--sizes", "n,xl"], "--sizes: unknown 'xl'; valid: n, s, m, l, x"),
        (["--tasks", "segment"], "--tasks: unknown 'segment'; valid: detect, seg, pose, obb, cls"),
        (["--shapes", "640x-1"], "shape '640x-1': expected a positive integer"),
        (["--shapes", "0"], "shape 0x0: height and width must be positive integers"),
        (["--batches", "two"], "--batches: 'two' is not a positive integer"),
        (
            ["--profile", "weekly"],
            "--profile: unknown 'weekly'; valid: quick, default, tasks, families, claims, nightly",
        ),
    ],
)
@pytest.mark.process
def test_bad_selection_is_one_error_line(args, message, tmp_path):
    p = _pytest_suites(*args, "--results-dir", str(tmp_path / "res"))
    assert p.returncode == 4, p.stdout + p.stderr
    errors = [line for line in p.stderr.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1 and message in errors[0], p.stderr
    assert not (tmp_path / "res").exists(), "no work starts on bad input"


@pytest.mark.process
def test_missing_weights_file_is_one_error_line(tmp_path):
    (tmp_path / "w").mkdir()
    p = _pytest_suites(
        "--weights-dir", str(tmp_path / "w"), "--sizes", "n", "--results-dir", str(tmp_path / "r")
    )
    assert p.returncode == 4
    assert "ERROR: weights file" in p.stderr and "yolo26n.pt" in p.stderr
    assert not (tmp_path / "r").exists()


def test_unreadable_weights_file_is_one_error_line(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("running as root: file permissions do not stop reads")
    w = tmp_path / "w"
    w.mkdir()
    (w / "yolo26n.pt").write_bytes(b"x")
    (w / "yolo26n.pt").chmod(0)
    p = _pytest_suites("--weights-dir", str(w), "--sizes", "n", "--results-dir", str(tmp_path / "r"))
    assert p.returncode == 4 and "is not readable" in p.stderr


@pytest.mark.process
def test_unwritable_results_dir_is_one_error_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a dir")
    p = _pytest_suites("--results-dir", str(blocker / "results"))
    assert p.returncode == 4
    assert "ERROR: --results-dir" in p.stderr and "is not a directory" in p.stderr


@pytest.mark.slow
@pytest.mark.export
def test_suite_run_writes_records_env_and_summary(tmp_path, cache_dir):
    p = _pytest_suites(
        "--profile",
        "quick",
        "--backends",
        "onnxruntime,torch-eager",
        "--shapes",
        "160",
        "--results-dir",
        str(tmp_path),
        "--cache-dir",
        str(cache_dir),
        "--run-id",
        "e2e",
        "--max-time",
        "0.2",
        "--no-report",
        # scenarios and accuracy have their own suite-run tests (test_scenarios, test_accuracy_cells): here they
        # were 100 of this run's 125 s
        "--scenarios",
        "none",
        "--no-accuracy",
        f"--benchmark-json={tmp_path / 'bench.json'}",
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    recs = [json.loads(line) for line in (tmp_path / "e2e" / "cells.jsonl").read_text().splitlines()]
    by_status = {}
    for r in recs:
        by_status.setdefault(r["status"], []).append(r["cell_id"])
    assert sorted(by_status["ok"]) == [
        "yolo26n-detect-e2e-onnxruntime-cpu-160x160-b1-fp32",
        "yolo26n-detect-e2e-torch-eager-cpu-160x160-b1-fp32",
    ]
    assert all("cuda" in c for c in by_status["skipped"])  # GPU cells are skips, never passes
    env = json.loads((tmp_path / "e2e" / "env.json").read_text())
    assert env["run_id"] == "e2e" and env["libraries"]["onnxruntime"]
    assert "yolo26-bench summary" in p.stdout and "2 ok, 2 skipped" in p.stdout
    assert "exporting (onnxruntime)" in p.stdout or "export cache hit" in p.stdout  # progress is shown
    # the export phase ran ahead of timing, then the workload's two backends were timed together
    assert p.stdout.index("export phase done") < p.stdout.index("timing 2 runner(s) interleaved")
    ok = {r["backend"]: r for r in recs if r["status"] == "ok"}
    assert ok["onnxruntime"]["paired"]["reference"] == ok["torch-eager"]["cell_id"]
    assert ok["onnxruntime"]["timing"]["mode"] == "interleaved"
    # pytest-benchmark's JSON holds exactly the rounds of each record
    bench = {
        b["extra_info"]["cell_id"]: b for b in json.loads((tmp_path / "bench.json").read_text())["benchmarks"]
    }
    for r in ok.values():
        stats = bench[r["cell_id"]]["stats"]
        assert stats["rounds"] == r["latency_ms"]["rounds"] == len(r["samples_ms"])
        assert stats["median"] * 1000 == pytest.approx(r["latency_ms"]["p50"], rel=1e-3)
        assert stats["min"] * 1000 == pytest.approx(r["latency_ms"]["min"], rel=1e-3)
    # the drift canary: read around the workload, summarised in env.json
    canary = env["canary"]
    assert 0 < canary["min"] <= canary["median"] <= canary["max"] and len(canary["readings"]) >= 2
    assert ok["onnxruntime"]["canary_ms"]["before"] > 0


@pytest.mark.slow
@pytest.mark.export
def test_export_timeout_is_recorded_and_the_next_cell_still_runs(tmp_path, cache_dir):
    p = _pytest_suites(
        "--profile",
        "quick",
        "--backends",
        "executorch-xnnpack,torch-eager",
        "--devices",
        "cpu",
        "--shapes",
        "160",
        "--export-timeout",
        "3",
        "--results-dir",
        str(tmp_path),
        "--cache-dir",
        str(tmp_path / "fresh-cache"),
        "--run-id",
        "to",
        "--max-time",
        "0.2",
        "--no-report",
        "--no-history",
        # what this test reads is the timeout and the next cell's status: no scenarios, accuracy or e2e pairs
        "--scenarios",
        "none",
        "--no-accuracy",
        "--no-e2e",
    )
    assert p.returncode == 1, p.stdout[-3000:]  # the timeout is an unexpected failure
    recs = {
        json.loads(line)["cell_id"]: json.loads(line) for line in (tmp_path / "to" / "cells.jsonl").open()
    }
    slow = recs["yolo26n-detect-e2e-executorch-xnnpack-cpu-160x160-b1-fp32"]
    assert slow["status"] == "timeout" and slow["failure"]["class"] == "timeout"
    assert "3 s timeout" in slow["reason"]
    assert "killed after the 3 s timeout" in (tmp_path / "to" / slow["log"]).read_text()
    assert recs["yolo26n-detect-e2e-torch-eager-cpu-160x160-b1-fp32"]["status"] == "ok"
