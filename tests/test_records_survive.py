"""Records survive: a torn last line is moved aside, never glued to; a write error stops the run with one line;
env.json is written whole; an existing run id is refused unless --resume, which skips the cells already recorded.

Each test reproduces a failure of the old writer (issue 12): a record appended after a torn line was destroyed; on
a full disk every cell raised a traceback while the run went on benchmarking; re-running into a run id appended
duplicates in silence.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core import envinfo
from harness.core import results_dir as rd
from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.record import CellRecord, new_record
from harness.core.results_dir import RecordWriteError, RecordWriter, read_records
from tests.conftest import REPO

CELL_160 = Cell("n", "detect", "e2e", "onnxruntime", "cuda", Shape(160, 160))
CELL_192 = Cell("n", "detect", "e2e", "onnxruntime", "cuda", Shape(192, 192))


def _rec(cell: Cell = CELL_160, status: str = "ok", run_id: str = "r") -> CellRecord:
    rec = new_record(run_id, cell, "random-init:0")
    rec.status, rec.reason = status, None if status == "ok" else f"{status} for the test"
    return rec


def _lines(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "cells.jsonl").read_text().splitlines()]


# ---- torn lines ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fragment",
    [
        b'{"schema_version": 2, "cell_id": "yolo26n-det',  # a write cut short: no final newline
        b"\0\0\0\0\0\0\0\0",  # zeroed blocks a crash can leave at the end of a file
        b'{"schema_version": 2, "cell\n',  # a whole line, but not a JSON record
    ],
)
def test_torn_last_line_is_moved_aside_never_glued_to(tmp_path, fragment):
    notices: list[str] = []
    w = RecordWriter(tmp_path, notify=notices.append)
    w.write(_rec(CELL_160))
    with open(tmp_path / "cells.jsonl", "ab") as f:
        f.write(fragment)  # a run killed mid-write, or a disk that filled up
    RecordWriter(tmp_path, notify=notices.append).write(_rec(CELL_192))
    assert [r["cell_id"] for r in _lines(tmp_path)] == [CELL_160.id, CELL_192.id], (
        "old and new records both kept"
    )
    assert (tmp_path / "cells.jsonl.torn").read_bytes().rstrip(b"\n") == fragment.rstrip(b"\n")
    assert len(notices) == 1 and "torn" in notices[0] and "cells.jsonl.torn" in notices[0], notices


def test_a_whole_last_line_is_left_alone(tmp_path):
    notices: list[str] = []
    for cell in (CELL_160, CELL_192):
        RecordWriter(tmp_path, notify=notices.append).write(_rec(cell))  # a fresh writer checks the tail
    assert len(_lines(tmp_path)) == 2
    assert notices == [] and not (tmp_path / "cells.jsonl.torn").exists()


# ---- write errors ----------------------------------------------------------------------------------------------


def test_failed_append_leaves_the_file_as_it_was_and_says_what_was_kept(tmp_path, monkeypatch):
    w = RecordWriter(tmp_path)
    w.write(_rec(CELL_160))
    before = (tmp_path / "cells.jsonl").read_bytes()

    def disk_fills(fd, data):
        os.write(fd, data[: len(data) // 2])  # half the line reaches the disk
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(rd, "_write_all", disk_fills)
    with pytest.raises(RecordWriteError) as e:
        w.write(_rec(CELL_192))
    msg = str(e.value)
    assert "\n" not in msg and "No space left on device" in msg and CELL_192.id in msg
    assert "the 1 records already in cells.jsonl (intact)" in msg
    assert (tmp_path / "cells.jsonl").read_bytes() == before, "no half record is left for the next append"


def test_env_json_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    envinfo.write(tmp_path, {"run_id": "r", "host": {"hostname": "a"}})
    before = (tmp_path / "env.json").read_text()

    def fsync_fails(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(rd.os, "fsync", fsync_fails)
    with pytest.raises(
        RecordWriteError, match=r"cannot write .*env\.json: \[Errno 28\] No space left on device"
    ):
        envinfo.write(tmp_path, {"run_id": "r", "host": {"hostname": "b"}})
    monkeypatch.undo()
    assert (tmp_path / "env.json").read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["env.json"], "no temp file left behind"


def _tmpfs_command(mount: Path, size: str, inner: str) -> list[str] | None:
    """A command running `inner` (sh) with a `size` tmpfs mounted at `mount`, in a private mount namespace;
    None when this machine allows no such namespace."""
    if shutil.which("unshare") is None:
        return None
    flags = ["-m"] if os.geteuid() == 0 else ["-r", "-m"]
    probe = subprocess.run(["unshare", *flags, "true"], capture_output=True)
    if probe.returncode != 0:
        return None
    return ["unshare", *flags, "sh", "-c", f"mount -t tmpfs -o size={size} none {mount} && {inner}"]


_FILL = """
import json, sys
from pathlib import Path
from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.record import new_record
from harness.core.results_dir import RecordWriteError, RecordWriter, read_records
run_dir = Path(sys.argv[1])
w = RecordWriter(run_dir)
n = 0
try:
    while n < 1000:
        rec = new_record("r", Cell("n", "detect", "e2e", "onnxruntime", "cpu", Shape(160, 160)), "random-init:0")
        rec.status, rec.reason = "ok", "x" * 1000
        w.write(rec)
        n += 1
    print(json.dumps({"written": n, "error": None}))
except RecordWriteError as e:
    print(json.dumps({"written": n, "error": str(e), "read_back": len(read_records(run_dir))}))
"""


@pytest.mark.process
def test_a_full_disk_stops_appends_with_the_file_intact(tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    script = tmp_path / "fill.py"
    script.write_text(_FILL)
    cmd = _tmpfs_command(mount, "16k", f'exec "{sys.executable}" "{script}" "{mount}"')
    if cmd is None:
        pytest.skip("no private mount namespace here (unshare); the injected-ENOSPC tests cover the logic")
    p = subprocess.run(
        cmd, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=300
    )
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["error"] and "No space left on device" in out["error"], out
    assert 0 < out["written"] == out["read_back"], "every record written before the disk filled reads back"


# ---- the suite: stop on a write error, refuse an existing run id, --resume ------------------------------------


def _suite(*args: str, env: dict | None = None, prefix: list[str] | None = None, timeout: int = 600):
    cmd = [sys.executable, "-m", "pytest", "suites/", "--benchmark-only", *args]
    return subprocess.run(
        (prefix or []) + cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env
    )


def _gpu_cells(results: Path, run_id: str, shapes: str = "160") -> list[str]:
    """One or two onnxruntime CUDA cells: skipped on a machine without one, so a suite run does no export."""
    return [
        "--sizes", "n", "--tasks", "detect", "--heads", "e2e", "--backends", "onnxruntime", "--devices", "cuda",
        "--shapes", shapes, "--precisions", "fp32", "--results-dir", str(results),
        "--cache-dir", str(results / "cache"),
        "--run-id", run_id, "--no-report", "--no-history", "-v",
    ]  # fmt: skip


@pytest.mark.slow
@pytest.mark.process
def test_record_write_error_stops_the_run_with_one_line(tmp_path):
    env = dict(os.environ, YOLO26_TEST_ENOSPC_AFTER="0")
    p = _suite("-p", "tests.write_faults", *_gpu_cells(tmp_path, "full", "160,192"), env=env)
    out = p.stdout + p.stderr
    assert p.returncode == 2, out[-3000:]
    stops = [line for line in out.splitlines() if "yolo26-bench stopped:" in line]
    assert len(stops) == 1, out[-3000:]
    assert "No space left on device" in stops[0] and "cannot write the record of" in stops[0]
    assert "the 0 records already in cells.jsonl (intact)" in stops[0]
    assert "Traceback" not in out
    assert "192x192" not in p.stdout, "the run stopped: no further cell started"
    assert (tmp_path / "full" / "cells.jsonl").read_bytes() == b"", "the half-written record was cut off"


@pytest.mark.slow
def test_full_results_disk_stops_the_run_with_one_line(tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    prefix = _tmpfs_command(mount, "8k", 'exec "$@"')
    if prefix is None:
        pytest.skip("no private mount namespace here (unshare); the injected-ENOSPC test covers the logic")
    prefix.append("sh")  # $0 of the sh -c command; the suite command follows as "$@"
    args = _gpu_cells(mount, "full", "160,192")
    args[args.index("--cache-dir") + 1] = str(tmp_path / "cache")
    p = _suite(*args, prefix=prefix)
    out = p.stdout + p.stderr
    assert p.returncode == 2, out[-3000:]
    stops = [line for line in out.splitlines() if "yolo26-bench stopped:" in line]
    assert len(stops) == 1 and "No space left on device" in stops[0], out[-3000:]
    assert "Traceback" not in out  # whichever write met the full disk (env.json or a record)


@pytest.mark.slow
def test_existing_run_id_is_refused_and_resume_skips_recorded_cells(tmp_path):
    run_dir = tmp_path / "r"
    first = _suite(*_gpu_cells(tmp_path, "r", "160"))
    assert first.returncode == 0, first.stdout[-3000:]
    assert [r["cell_id"] for r in _lines(run_dir)] == [CELL_160.id]
    RecordWriter(run_dir).write(
        _rec(CELL_192, "crashed")
    )  # a cell whose attempt crashed: resume runs it again
    before = (run_dir / "cells.jsonl").read_bytes()

    again = _suite(*_gpu_cells(tmp_path, "r", "160,192"))
    assert again.returncode == 4, again.stdout[-3000:]
    errors = [line for line in again.stderr.splitlines() if line.startswith("ERROR:")]
    assert (
        len(errors) == 1 and "already holds a run (2 cells recorded)" in errors[0] and "--resume" in errors[0]
    )
    assert (run_dir / "cells.jsonl").read_bytes() == before, "nothing appended"

    resumed = _suite(*_gpu_cells(tmp_path, "r", "160,192"), "--resume", "-rs")
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    assert "already recorded in run r as skipped (--resume)" in resumed.stdout
    assert f"{CELL_192.id}: recorded as crashed; running it again (1 earlier records moved" in resumed.stdout
    recs = _lines(run_dir)
    assert sorted(r["cell_id"] for r in recs) == sorted([CELL_160.id, CELL_192.id]), "no duplicates"
    assert next(r for r in recs if r["cell_id"] == CELL_192.id)["status"] != "crashed"
    superseded = [json.loads(line) for line in (run_dir / "cells.jsonl.superseded").read_text().splitlines()]
    assert [(r["cell_id"], r["status"]) for r in superseded] == [(CELL_192.id, "crashed")]
    assert len(read_records(run_dir)) == 2
