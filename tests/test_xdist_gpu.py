"""GPU-per-process pinning, checked without a GPU: the mapping, and real xdist / pytest-split processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.pytest_plugin.xdist_gpu import (
    PINNED_GPU_ENV,
    detect_gpus,
    gpu_for_slot,
    parse_gpus,
    pin_environ,
    pinned_gpu,
)

REPO = Path(__file__).resolve().parents[1]

# A stand-in for a timed cell: records which GPU its process sees.
PROBE = """
import json, os, pathlib
import pytest

@pytest.mark.parametrize("i", range(6))
def test_cell(i):
    out = pathlib.Path(os.environ["PROBE_OUT"]) / f"{i}.json"
    keys = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "YOLO26_BENCH_GPU", "PYTEST_XDIST_WORKER")
    out.write_text(json.dumps({k: os.environ.get(k) for k in keys}))
"""


def test_mapping():
    assert parse_gpus("0, 2,3") == ["0", "2", "3"]
    assert parse_gpus("auto", {"CUDA_VISIBLE_DEVICES": "GPU-aa,GPU-bb"}) == ["GPU-aa", "GPU-bb"]
    assert detect_gpus({"CUDA_VISIBLE_DEVICES": ""}) == []
    with pytest.raises(pytest.UsageError, match="no GPU"):
        parse_gpus("auto", {"CUDA_VISIBLE_DEVICES": ""})
    with pytest.raises(pytest.UsageError, match="twice"):
        parse_gpus("1,1")
    assert [gpu_for_slot(i, 3, ["4", "5", "6", "7"]) for i in range(3)] == ["4", "5", "6"]
    with pytest.raises(pytest.UsageError, match="share a GPU"):
        gpu_for_slot(0, 3, ["0", "1"])
    env = pin_environ("3")
    assert env == {"CUDA_VISIBLE_DEVICES": "3", "CUDA_DEVICE_ORDER": "PCI_BUS_ID", PINNED_GPU_ENV: "3"}
    assert pinned_gpu(env) == "3" and pinned_gpu({}) is None


def run_probe(
    tmp_path: Path, *args: str, plugins: tuple[str, ...] = ()
) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """Run PROBE in a fresh pytest process (and its workers) with only the named plugins loaded."""
    for plugin in plugins:
        pytest.importorskip(plugin)
    (tmp_path / "test_probe.py").write_text(PROBE)
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", PINNED_GPU_ENV)}
    # No plugin autoload: importing every installed plugin (hypothesis, ...) costs seconds per process.
    env.update(PROBE_OUT=str(out), PYTHONPATH=str(REPO), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    env.pop("PYTEST_ADDOPTS", None)
    loads = [arg for plugin in (*plugins, "harness.pytest_plugin.xdist_gpu") for arg in ("-p", plugin)]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *loads, "-p", "no:cacheprovider", "-q", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc, [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]


@pytest.mark.slow
def test_xdist_workers_each_get_their_own_gpu(tmp_path):
    proc, seen = run_probe(tmp_path, "-n", "2", "--gpus", "5,7", plugins=("xdist",))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(seen) == 6
    for s in seen:
        assert s["CUDA_VISIBLE_DEVICES"] == {"gw0": "5", "gw1": "7"}[s["PYTEST_XDIST_WORKER"]]
        assert s["YOLO26_BENCH_GPU"] == s["CUDA_VISIBLE_DEVICES"]
        assert s["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"


@pytest.mark.process
def test_xdist_auto_starts_one_worker_per_gpu(tmp_path):
    proc, seen = run_probe(tmp_path, "-n", "auto", "--gpus", "3", plugins=("xdist",))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert {(s["PYTEST_XDIST_WORKER"], s["CUDA_VISIBLE_DEVICES"]) for s in seen} == {("gw0", "3")}


@pytest.mark.process
def test_more_workers_than_gpus_is_refused(tmp_path):
    proc, seen = run_probe(tmp_path, "-n", "2", "--gpus", "0", plugins=("xdist",))
    assert proc.returncode == 4  # pytest's usage error, before any worker starts
    assert "share a GPU" in proc.stderr
    assert seen == []


@pytest.mark.process
def test_pytest_split_group_takes_its_gpu(tmp_path):
    split = ("pytest_split.plugin",)
    proc, seen = run_probe(tmp_path, "--splits", "2", "--group", "2", "--gpus", "0,1", plugins=split)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert seen and {s["CUDA_VISIBLE_DEVICES"] for s in seen} == {"1"}
    assert len(seen) < 6  # group 2 ran only its share of the cells
    proc, _ = run_probe(tmp_path, "--splits", "3", "--group", "1", "--gpus", "0,1", plugins=split)
    assert proc.returncode == 4 and "share a GPU" in proc.stderr


@pytest.mark.process
def test_without_gpus_option_nothing_is_pinned(tmp_path):
    proc, seen = run_probe(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert {s["CUDA_VISIBLE_DEVICES"] for s in seen} == {None}


BENCH_PROBE = """
import time

def test_timed_cell(benchmark):
    benchmark.pedantic(time.sleep, args=(0.001,), rounds=5, iterations=1)
"""


@pytest.mark.process
def test_pytest_benchmark_times_under_pytest_split_but_not_under_xdist(tmp_path):
    """Why docs/scale-out.md shards timed suites with pytest-split: pytest-benchmark switches itself off under
    xdist (pytest_benchmark/session.py, BenchmarkSession.__init__), even with --benchmark-enable."""
    bench = ("pytest_benchmark.plugin",)
    (tmp_path / "test_bench.py").write_text(BENCH_PROBE)

    def benchmarks(*args: str, plugins: tuple[str, ...]) -> list:
        report = tmp_path / "bench.json"
        report.unlink(missing_ok=True)
        proc, _ = run_probe(tmp_path, "test_bench.py", f"--benchmark-json={report}", *args, plugins=plugins)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return json.loads(report.read_text())["benchmarks"] if report.exists() else []

    split = benchmarks(
        "--splits", "1", "--group", "1", "--gpus", "0", plugins=(*bench, "pytest_split.plugin")
    )
    assert [b["stats"]["rounds"] for b in split] == [5]
    assert benchmarks("-n", "1", "--benchmark-enable", "--gpus", "0", plugins=(*bench, "xdist")) == []
