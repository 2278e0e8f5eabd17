"""A native crash in an isolated worker leaves its Python stack in the log and `failure.where` in the record."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.diagnosis import native_stack
from harness.diagnosis.failure import failure_from_outcome
from harness.diagnosis.native_fault import module_of, parse_fault
from harness.diagnosis.outcome import ExportOutcome
from tests.test_isolation import REPO, export

pytestmark = pytest.mark.process  # starts worker processes

H100 = Path(__file__).parent / "data" / "gpu_h100_2026-11-26"
#: the aoti probe's log on the H100 (2026-11-26): faulthandler's stack of the SIGSEGV in torch's package loader
TORCH_LOADER_FAULT = (H100 / "aoti-probe-fault.log").read_text()
#: the native frames of the same crash (a one-convolution AOTInductor package loaded on that machine; the handler
#: was then an LD_PRELOAD'ed prototype of harness/diagnosis/native_backtrace.c, without the pc line)
TORCH_LOADER_NATIVE = (H100 / "aoti-toy-native-backtrace.log").read_text()


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
    # the native frames, printed before faulthandler's: the null read was in the C library, called through ctypes
    native = failure["native"]
    assert native is not None, failure.get("native_reason")
    assert (native["signal"], native["code"], native["address"]) == (11, 1, "0x0")  # SEGV_MAPERR at address 0
    assert Path(native["frames"][0]["library"]).name.startswith("libc"), native["frames"][:3]
    assert native["where"].endswith(Path(native["frames"][0]["library"]).name)
    assert any("_ctypes" in f["library"] for f in native["frames"][1:6])
    assert "natively in " in outcome.message and "native_reason" not in failure
    assert log.index("=== native fault") < log.index("Fatal Python error")  # the handler runs first


def test_without_the_native_handler_a_crash_says_why_it_has_no_native_frames(tmp_path, monkeypatch):
    monkeypatch.setattr(native_stack, "_built", (None, "no C compiler (cc, gcc or clang) to build it (test)"))
    outcome = export("test-native-fault", tmp_path, timeout_s=60)
    assert (outcome.status, outcome.signal) == ("crashed", "SIGSEGV")
    assert (
        outcome.fault["where"] == "tests.fault_backends.dereference_null"
    )  # faulthandler's frames as before
    assert outcome.fault["native"] is None
    assert outcome.fault["native_reason"] == "no C compiler (cc, gcc or clang) to build it (test)"
    assert "=== native fault" not in Path(outcome.log).read_text() and "natively" not in outcome.message


def test_a_signal_sent_from_outside_has_no_native_frames_of_a_runtime(tmp_path):
    # SIGSEGV sent by os.kill: faulthandler still prints the stack, which ends in the backend's own Python code
    outcome = export("test-segv", tmp_path, timeout_s=60)
    assert outcome.fault is not None and outcome.fault["where"] == "tests.fault_backends.export"


def test_a_crash_in_torchs_loader_is_torchs_and_names_the_load_step():
    """The H100's aoti probe: the crashing thread is the loader's, not the memory sampler's or the watchdog's."""
    fault = parse_fault(TORCH_LOADER_FAULT)
    assert fault is not None
    assert fault.error == "Segmentation fault"
    assert (
        fault.where == "torch.export.pt2_archive._package._load_aoti"
    )  # the crashing thread, not the sampler's
    assert fault.in_library == "torch"
    assert fault.step == "load"
    assert "torch's own code, called from harness.backends.aoti.load_package" in fault.summary()
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


def test_the_h100_loader_crash_natively_is_in_the_packages_own_cpp():
    """The native frames of the AOTInductor crash on the H100: inside std::regex, built by
    torch::aot_inductor::parse_device_str in AOTInductorModel's constructor, all in the package's wrapper.so."""
    stack = native_stack.parse(TORCH_LOADER_NATIVE)
    assert stack is not None and (stack.signal, stack.address) == (11, "(nil)")
    native = stack.to_dict()
    assert "parse_device_str" in native["where"] and native["where"].endswith(".wrapper.so")
    assert native["library"].endswith(".wrapper.so")
    assert native["innermost_in_std"] is True  # the faulting frame's symbol is the C++ library's
    assert (
        "segv_bt" not in native["frames"][0]["library"]
    )  # the handler's own frame and the trampoline dropped
    assert any("AOTIModelPackageLoader" in (f["symbol"] or "") for f in native["frames"])
    assert native_stack.summary(native).startswith(
        "natively in the C++ standard library's code called from torch::aot_inductor::parse_device_str in "
    )


def test_native_frames_where_and_their_absence():
    """Where: the innermost frame outside namespace std, a frame without a symbol included; the other way: with
    only std frames it is the innermost, and a log the handler never wrote to has no native stack."""
    lines = [
        "=== native fault: signal 7 (code 2) at address 0x10",
        "pc: /l/libstdc++.so.6 +0x10 _ZNSt6locale7classicEv+0x4",
        "#0 /tmp/native_backtrace-x.so +0x13a6 ?+0x0",
        "#1 /lib/libc.so.6 +0x3c050 ?+0x0",
        "#2 /l/libstdc++.so.6 +0x10 _ZNSt6locale7classicEv+0x4",
        "#3 /l/librt.so +0x99 ?+0x0",
        "#4 /l/libx.so +0x20 _ZN1x3runEv+0x8",
        "=== end of native fault",
        "#9 /after/the/end.so +0x1 ignored+0x0",
    ]
    d = native_stack.parse("noise\n" + "\n".join(lines)).to_dict()
    assert [Path(f["library"]).name for f in d["frames"]] == ["libstdc++.so.6", "librt.so", "libx.so"]
    assert d["where"] == "+0x99 in librt.so" and d["innermost_in_std"] is True
    only_std = native_stack.parse("\n".join(lines[:3] + lines[3:5])).to_dict()
    assert only_std["where"] == only_std["innermost"] and "locale" in only_std["where"]
    assert native_stack.parse("Fatal Python error: Segmentation fault\n") is None
    assert native_stack.parse(TORCH_LOADER_FAULT) is None  # the kit's run had no handler yet


def test_the_handler_is_built_only_in_a_folder_that_is_this_users_alone(tmp_path, monkeypatch):
    """Every worker loads the built library: in a folder others may write to it is not built (nor loaded), and a
    crash record then says why; in a private one it is built, and found there the next time."""
    import stat
    import tempfile

    if not native_stack.handler_library()[0]:
        pytest.skip(f"no handler here: {native_stack.handler_library()[1]}")
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    shared = tmp_path / f"yolo26-bench-{os.getuid()}"
    shared.mkdir()
    shared.chmod(0o777)
    lib, why = native_stack._build()
    assert lib is None and "is not this user's alone" in why
    shared.chmod(0o700)
    lib, why = native_stack._build()
    assert why is None and lib.parent == shared and lib.is_file()
    assert not lib.stat().st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    assert native_stack._build() == (lib, None)
