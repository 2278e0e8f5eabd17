"""A native crash in an isolated worker leaves its Python stack in the log and `failure.where` in the record."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.diagnosis.failure import failure_from_outcome
from harness.diagnosis.native_fault import module_of, parse_fault
from harness.diagnosis.outcome import ExportOutcome
from tests.test_isolation import REPO, export

pytestmark = pytest.mark.process  # starts worker processes

# What faulthandler printed when torch's AOTInductor loader crashed, in the shape Python 3.12 prints it (the frames
# are torch 2.11's call path from aoti_load_package to the native loader; the first GPU run had no faulthandler,
# so this text is written from that call path, not copied from a log: SYNTHETIC).
TORCH_LOADER_FAULT = """[worker] probe run of /x/yolo26n-detect-aoti-cuda.pt2 at 640x640 (2 measured rounds)
Fatal Python error: Segmentation fault

Thread 0x00007f0000000001 (most recent call first):
  File "/usr/lib/python3.12/threading.py", line 359 in wait
  File "/repo/harness/measure/host_memory.py", line 80 in run

Current thread 0x00007f0000000000 (most recent call first):
  File "/opt/torch/.venv/lib/python3.12/site-packages/torch/export/pt2_archive/_package.py", line 1075 in _load_aoti
  File "/opt/torch/.venv/lib/python3.12/site-packages/torch/_inductor/package/package.py", line 120 in load_package
  File "/opt/torch/.venv/lib/python3.12/site-packages/torch/_inductor/__init__.py", line 269 in aoti_load_package
  File "/repo/harness/backends/aoti.py", line 210 in load
  File "/repo/harness/execute/worker.py", line 105 in _probe
  File "/repo/harness/execute/worker.py", line 160 in main
  File "<frozen runpy>", line 88 in _run_code

Extension modules: numpy._core._multiarray_umath, torch._C (total: 2)
"""


@pytest.fixture(autouse=True)
def _importable_tests(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH")))))


def test_a_native_fault_in_a_worker_leaves_its_stack_and_where(tmp_path):
    outcome = export("test-native-fault", tmp_path, timeout_s=60)
    assert (outcome.status, outcome.signal) == ("crashed", "SIGSEGV"), outcome
    log = Path(outcome.log).read_text()
    assert "Fatal Python error: Segmentation fault" in log  # faulthandler is on in the worker
    assert outcome.fault is not None
    assert outcome.fault["where"] == "tests.fault_backends.dereference_null"
    assert (
        outcome.fault["step"] == "export"
    )  # the innermost own frame named like a step: the backend's export
    assert outcome.fault["stack"][0]["where"] == "<stdlib>.ctypes.string_at"  # the whole stack is kept
    assert "in tests.fault_backends.dereference_null" in outcome.message
    failure = failure_from_outcome(outcome, "export", "logs/x.log")
    assert failure["class"] == "crash"
    assert failure["where"] == "tests.fault_backends.dereference_null"
    assert failure["in_library"] == "tests"


def test_a_signal_sent_from_outside_has_no_native_frames_of_a_runtime(tmp_path):
    # SIGSEGV sent by os.kill: faulthandler still prints the stack, which ends in the backend's own Python code
    outcome = export("test-segv", tmp_path, timeout_s=60)
    assert outcome.fault is not None and outcome.fault["where"] == "tests.fault_backends.export"


def test_a_crash_in_torchs_loader_is_torchs_and_names_the_load_step():
    fault = parse_fault(TORCH_LOADER_FAULT)
    assert fault is not None
    assert fault.error == "Segmentation fault"
    assert (
        fault.where == "torch.export.pt2_archive._package._load_aoti"
    )  # the crashing thread, not the sampler's
    assert fault.in_library == "torch"
    assert fault.step == "load"
    assert "torch's own code, called from harness.backends.aoti.load" in fault.summary()
    outcome = ExportOutcome(
        "crashed", None, message="probe process killed by SIGSEGV", signal="SIGSEGV", fault=fault.to_dict()
    )
    failure = failure_from_outcome(outcome, "probe", None)
    assert (failure["where"], failure["in_library"], failure["step"]) == (
        "torch.export.pt2_archive._package._load_aoti",
        "torch",
        "load",
    )


def test_no_fault_text_no_fault_and_a_crash_in_the_harness_is_the_harness():
    assert (
        parse_fault("[worker] probe run ...\nTraceback (most recent call last):\n  ValueError: x\n") is None
    )
    own = TORCH_LOADER_FAULT.split("Current thread")[0] + (
        "Current thread 0x1 (most recent call first):\n"
        '  File "/repo/harness/backends/_shared/cuda_streams.py", line 12 in run\n'
    )
    fault = parse_fault(own)
    assert fault is not None and fault.in_library == "harness" and fault.step == "run"
    assert "the project's own code" in fault.summary()
    # a timeout never carries a fault
    assert (
        failure_from_outcome(ExportOutcome("timeout", None, message="t"), "export", None).get("where") is None
    )


def test_module_names_from_paths():
    assert module_of("/x/lib/python3.12/site-packages/torch/_inductor/__init__.py") == "torch._inductor"
    assert module_of(str(REPO / "harness" / "backends" / "aoti.py")) == "harness.backends.aoti"
    assert module_of("/somewhere/else/script.py") == "script"


@pytest.mark.timing
def test_a_worker_killed_at_its_timeout_says_where_it_hung(tmp_path):
    # the first GPU run's AOTInductor probe hung in the loader for over a minute and was killed with no trace
    outcome = export("test-hang", tmp_path, timeout_s=4)
    assert outcome.status == "timeout"
    assert outcome.fault is not None, Path(outcome.log).read_text()[-2000:]
    assert outcome.fault["where"] == "tests.fault_backends.export"  # HangBackend.export's sleep
    assert outcome.fault["error"].startswith("stack printed on request")
    assert "it was in tests.fault_backends.export" in outcome.message
    # the other way: a worker that ends within its timeout is never asked for a stack
    ok = export("test-ok", tmp_path, timeout_s=60)
    assert ok.status == "ok" and ok.fault is None
    assert "most recent call first" not in Path(ok.log).read_text()
