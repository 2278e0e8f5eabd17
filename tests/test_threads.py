"""The run's CPU thread budget reaches every CPU runtime through its own API and is read back from the runtime.

Real exports of yolo26n at 160x160 (ONNX, OpenVINO IR, ExecuTorch XNNPACK), made once per test session through the
harness's export cache (`exported`, shared with tests/test_precision.py and with the runs of other modules at that
shape), and the checkpoint for torch eager.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import backends, threads
from harness.backends.base import ExportResult
from harness.core import envinfo
from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.measure import machine
from tests.conftest import REPO, shared_export

SHAPE = Shape(160, 160)
CPU_BACKENDS = ("onnxruntime", "openvino", "executorch-xnnpack", "torch-eager")


# -- shared helpers (tests/test_precision.py uses them too) --------------------------------------------------------
def exported(cache_dir: Path, backend: str) -> ExportResult:
    """The real fp32 export of yolo26n at 160x160 for `backend` a run makes (tests/conftest.py shared_export): one
    per test session, shared with the runs of other modules at that shape. Non-exporting backends get the
    checkpoint."""
    return shared_export(cache_dir, backend, SHAPE)


def load_runner(cache_dir: Path, backend: str, precision: str = "fp32"):
    result = exported(cache_dir, backend)
    cell = Cell("n", "detect", "e2e", backend, "cpu", SHAPE, precision=precision)
    return backends.get(backend).load(Path(result.artifact), cell, result.info)


def run_once(runner) -> None:
    from harness.yolo.inputs import letterboxed

    runner.run(runner.prepare(letterboxed(SHAPE.height, SHAPE.width, 1)))
    runner.synchronize()


@pytest.fixture
def restore_budget(monkeypatch):
    """Let a test change the process's budget: its environment variables and torch's threads come back after."""
    import torch

    for var in (threads.ENV, *threads.OMP_VARS):
        if var in os.environ:
            monkeypatch.setenv(var, os.environ[var])
        else:
            monkeypatch.delenv(var, raising=False)
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


# -- every CPU runtime reports the budget ------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.export
@pytest.mark.parametrize("budget", [1, 2])
@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_cpu_runner_reads_back_the_budget(backend, budget, cache_dir, restore_budget):
    import torch

    exported(cache_dir, backend)  # export first: the budget under test is the one at load
    threads.set_budget(budget)
    # something else set torch's threads, as ultralytics' select_device("cpu") does: the load applies the budget
    torch.set_num_threads(7)
    runner = load_runner(cache_dir, backend)
    try:
        run_once(runner)
        got, how = runner.cpu_threads()  # what the harness calls after the timed rounds
        assert got == budget, how
        assert how and "budget" not in how.lower()  # names the runtime call it read, not the setting
    finally:
        runner.close()


@pytest.mark.slow
@pytest.mark.export
def test_openvino_reports_what_it_runs_not_what_it_was_asked(cache_dir, restore_budget):
    """OpenVINO caps INFERENCE_NUM_THREADS at the cores it can use: a budget above them reads back as the cap."""
    over = threads.logical_cpus() * 2
    threads.set_budget(over)
    runner = load_runner(cache_dir, "openvino")
    got, how = runner.cpu_threads()
    assert got is not None and got <= threads.logical_cpus() < over, how


@pytest.mark.slow
@pytest.mark.export
def test_onnxruntime_reads_the_sessions_own_options(cache_dir, restore_budget):
    """The read-back is the options the C++ session holds: changing the Python object afterwards changes nothing."""
    import onnxruntime as ort

    from harness.backends.onnxruntime import OrtRunner, session_options

    so = session_options(2)
    session = ort.InferenceSession(
        exported(cache_dir, "onnxruntime").artifact, sess_options=so, providers=["CPUExecutionProvider"]
    )
    so.intra_op_num_threads = 5
    n, how = OrtRunner(session).cpu_threads()
    assert n == 2 and "inter-op 1" in how and "ORT_SEQUENTIAL" in how


def test_torch_read_back_is_live(restore_budget):
    """torch's read-back is torch.get_num_threads() at the time of the call, not the budget remembered at load."""
    import torch

    from harness.backends.torch_eager import TorchRunner

    threads.set_budget(1)
    runner = TorchRunner(torch.nn.Conv2d(3, 4, 3), "cpu", torch.float32)
    assert runner.cpu_threads()[0] == 1
    torch.set_num_threads(2)
    assert runner.cpu_threads()[0] == 2


def test_ultralytics_select_device_gets_the_budget_during_export(restore_budget):
    """ultralytics' exporter calls select_device("cpu"), which sets torch to min(8, cores - 1) threads."""
    import torch
    from ultralytics.utils import torch_utils

    from harness.backends._shared.ultralytics_export import budget_for_select_device

    threads.set_budget(2)
    saved = torch_utils.NUM_THREADS
    with budget_for_select_device():
        torch_utils.select_device("cpu", verbose=False)
        assert torch.get_num_threads() == 2
    restored = torch_utils.NUM_THREADS
    assert restored == saved
    torch_utils.select_device("cpu", verbose=False)  # outside: ultralytics' own default again
    assert torch.get_num_threads() == saved


@pytest.mark.process
def test_subprocesses_inherit_the_budget_before_ultralytics_sets_its_default(restore_budget):
    """Export and probe processes inherit the budget through the environment, ahead of ultralytics' OMP default."""
    threads.set_budget(2)  # ultralytics' default, when OMP_NUM_THREADS is unset, is 1
    code = (
        "import os, torch, ultralytics; from harness.threads import budget; "
        "print(budget(), os.environ['OMP_NUM_THREADS'], torch.get_num_threads())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["2", "2", "2"]


@pytest.mark.process
def test_worker_applies_the_inherited_budget(tmp_path, restore_budget):
    """The isolated worker puts the inherited budget into its own environment and torch before any work."""
    threads.set_budget(2)
    code = (
        "import os, sys, torch; torch.set_num_threads(1); from harness.execute import worker; "
        "rc = worker.main([sys.argv[1]]); "
        "print(os.environ['OMP_NUM_THREADS'], torch.get_num_threads())"
    )
    req = tmp_path / "req.json"
    req.write_text(json.dumps({"mode": "no-such-mode", "backend": "no-such-backend"}))
    out = subprocess.run(
        [sys.executable, "-c", code, str(req)], capture_output=True, text=True, timeout=300, cwd=REPO
    )
    assert out.stdout.split()[-2:] == ["2", "2"], out.stdout + out.stderr


# -- budget parsing, --threads and env.json ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0", "--threads: 0 must be at least 1"),
        ("-1", "--threads: -1 must be at least 1"),
        ("two", "--threads: 'two' is not a whole number of threads"),
        (str(4 * (os.cpu_count() or 1) + 1), "logical CPUs of this machine"),
    ],
)
def test_bad_budget_is_refused(text, message):
    with pytest.raises(ValueError, match="--threads") as e:
        threads.parse(text)
    assert message in str(e.value)


def test_budget_parses_within_the_limit():
    assert threads.parse("1") == 1
    assert threads.parse(str(4 * threads.logical_cpus())) == 4 * threads.logical_cpus()


@pytest.mark.parametrize("value", ["0", "-1", "two", str(4 * (os.cpu_count() or 1) + 1)])
@pytest.mark.process
def test_bad_threads_option_is_one_error_line(value, tmp_path):
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "suites/",
            "--benchmark-only",
            "--threads",
            value,
            "--results-dir",
            str(tmp_path / "res"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 4, p.stdout + p.stderr
    errors = [line for line in p.stderr.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1 and "--threads" in errors[0], p.stderr
    assert not (tmp_path / "res").exists(), "no work starts on bad input"


@pytest.mark.process
def test_env_json_threads(restore_budget):
    env = envinfo.collect("r1", facts=machine.facts(threads=3, threads_source="--threads"))
    t = env["threads"]
    assert t["budget"] == 3 and t["source"] == "--threads"
    assert t["physical_cores"] == threads.physical_cores() and t["logical_cpus"] == threads.logical_cpus()
    assert t["omp_num_threads"] == os.environ.get("OMP_NUM_THREADS")
    os.environ.pop(threads.ENV, None)
    default = threads.info()
    assert default["budget"] == threads.physical_cores() and default["source"] == threads.DEFAULT_SOURCE
