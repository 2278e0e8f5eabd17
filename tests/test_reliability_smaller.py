"""Issue 30's smaller items (item 8), each for real: the torn-line notice under -q (a suite run), a worker killed
from outside (a real worker, a real SIGKILL), a FIFO given as weights, and a very large plan."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest

from harness.backends.base import ExportRequest
from harness.core import envinfo
from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.record import new_record
from harness.core.results_dir import RecordWriter
from harness.diagnosis.classify import classify
from harness.diagnosis.kernel_oom import oom_record, sigkill_detail
from harness.execute.isolate import run_export
from tests.reliability_helpers import FAULTS, alive, children, gpu_cells, kill_quietly, suite, wait_for

CELL_160 = Cell("n", "detect", "e2e", "onnxruntime", "cuda", Shape(160, 160))


@pytest.mark.process
def test_the_torn_line_notice_is_shown_under_quiet(tmp_path):
    run_dir = tmp_path / "torn"
    run_dir.mkdir()
    rec = new_record("torn", CELL_160, "unknown")
    rec.status, rec.reason = "skipped", "recorded before the tear"
    RecordWriter(run_dir).write(rec)
    envinfo.write(run_dir, {"run_id": "torn", "host": {"hostname": "h"}})
    with open(run_dir / "cells.jsonl", "ab") as f:
        f.write(b'{"schema_version": 2, "cell_id": "yolo26n-det')  # a write cut short by a kill
    p = suite(*gpu_cells(tmp_path, "torn", "160,192"), "--resume", "--no-history", "-q")
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    notices = [line for line in p.stdout.splitlines() if "moved to cells.jsonl.torn" in line]
    assert len(notices) == 1 and "its last line was torn" in notices[0], p.stdout[-3000:]
    assert "[yolo26-bench " not in p.stdout.replace("[yolo26-bench] ", ""), (
        "progress lines stay hidden under -q"
    )
    assert (
        (run_dir / "cells.jsonl.torn")
        .read_bytes()
        .startswith(b'{"schema_version": 2, "cell_id": "yolo26n-det')
    )


def _request(out: Path) -> ExportRequest:
    return ExportRequest(
        backend="test-hang", device="cpu", checkpoint="unused.pt", size="n", task="detect", head="raw",
        height=320, width=320, dynamic=False, batch=1, precision="fp32", out_dir=str(out),
    )  # fmt: skip


@pytest.fixture
def _importable_tests(monkeypatch):
    from tests.conftest import REPO

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH")))))


@pytest.mark.process
def test_a_worker_killed_from_outside_is_killed_not_out_of_memory(tmp_path, _importable_tests):
    before = set(children(os.getpid()))
    got = {}
    t = threading.Thread(
        target=lambda: got.update(
            o=run_export(_request(tmp_path / "out"), tmp_path / "x.log", 600, imports=(FAULTS,))
        )
    )
    t.start()
    workers: list[int] = []
    try:
        assert wait_for(lambda: bool(workers.extend(set(children(os.getpid())) - before) or workers), 60)
        assert wait_for(lambda: "[worker] exporting" in (tmp_path / "x.log").read_text(errors="replace"), 60)
        os.kill(workers[0], signal.SIGKILL)  # from outside: a user, a scheduler, a container runtime
        t.join(30)
    finally:
        for w in workers:
            kill_quietly(w)
    o = got["o"]
    assert (o.status, o.signal) == ("crashed", "SIGKILL"), o
    assert "out of memory" not in o.message.lower() or "no out-of-memory kill" in o.message, o.message
    f = classify(o.message, o.traceback, o.exception_type, signal=o.signal, status=o.status)
    assert f["class"] == "killed", (f, o.message)
    assert not alive(workers[0])


def test_sigkill_is_out_of_memory_only_on_the_kernels_record(monkeypatch, tmp_path):
    line = "[ 812.3] Out of memory: Killed process 4242 (python) total-vm:9000kB, anon-rss:8000kB"
    assert oom_record(4242, line) == line  # the other way: the kernel's record of this pid
    assert oom_record(424, line) is None and oom_record(
        4242, "oom-kill:constraint=NONE,task=python,pid=4242,"
    )
    oom = f"probe process killed by SIGKILL: the kernel's OOM killer ended it ({line})"
    assert classify(oom, signal="SIGKILL", status="crashed")["class"] == "out_of_memory"
    monkeypatch.setenv("PATH", str(tmp_path))  # no dmesg here: the kernel log cannot be read
    detail = sigkill_detail(4242)
    assert detail.startswith("killed by signal 9 (SIGKILL); the kernel log (dmesg) could not be read")
    assert classify(detail, signal="SIGKILL", status="crashed")["class"] == "killed"


@pytest.mark.slow
def test_a_fifo_given_as_weights_is_not_a_regular_file(tmp_path):
    w = tmp_path / "w"
    w.mkdir()
    os.mkfifo(w / "yolo26n.pt")
    p = suite("--weights-dir", str(w), "--sizes", "n", "--results-dir", str(tmp_path / "r"), timeout=120)
    assert p.returncode == 4, p.stdout + p.stderr
    errors = [line for line in p.stderr.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1 and "yolo26n.pt is not a regular file" in errors[0], p.stderr
    (w / "yolo26n.pt").unlink()  # the other way: a missing file is still "not found"
    p = suite("--weights-dir", str(w), "--sizes", "n", "--results-dir", str(tmp_path / "r"), timeout=120)
    assert p.returncode == 4 and "yolo26n.pt not found" in p.stderr


@pytest.mark.parametrize(("n_shapes", "warned"), [(300, True), (100, False)])
@pytest.mark.slow
def test_a_very_large_plan_is_said_before_any_work(tmp_path, n_shapes, warned):
    shapes = ",".join(f"{32 + 2 * i}x64" for i in range(n_shapes))
    args = gpu_cells(tmp_path, "big", shapes)
    args[args.index("--heads") + 1] = "e2e,raw"  # two cells per shape
    p = suite(*args, "--collect-only", "-q", timeout=300)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    lines = [line for line in p.stderr.splitlines() if "warning: this selection plans" in line]
    assert bool(lines) == warned, p.stderr[-2000:]
    if warned:
        assert f"plans {2 * n_shapes} cells" in lines[0] and "more than 500" in lines[0]
    assert not (tmp_path / "big").exists(), "collecting leaves no run directory behind"
