"""--resume runs again every recorded cell whose failure may not recur, says so per cell, and keeps the others.

A failure that may not recur is one of the machine or the moment (harness.diagnosis.recurrence): the statuses
crashed and timeout, and the failure classes environment (a full export-cache disk), out_of_memory, killed, timeout
and crash. Before, only the statuses were: a cell that ended export_failed, class environment, with the advice "free
space on that disk ... and run again" was skipped by the same command with --resume as "already recorded", and the
run called whole.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.core.axes import Shape
from harness.core.cell import Cell
from tests.reliability_helpers import suite


def test_which_recorded_failures_run_again():
    from harness.diagnosis.recurrence import rerun_reason

    runs_again = [
        ("crashed", "crash"),
        ("timeout", "timeout"),
        ("crashed", None),
        ("export_failed", "environment"),
        ("export_failed", "out_of_memory"),
        ("run_failed", "out_of_memory"),
        ("load_failed", "killed"),
    ]
    kept = [
        ("export_failed", "unsupported_op"),
        ("export_failed", "guard_violation"),
        ("run_failed", "runtime_error"),
        ("parity_failed", "numerical_mismatch"),
        ("ok", None),
        ("skipped", None),
    ]
    assert all(rerun_reason(status, cls) for status, cls in runs_again)
    assert not any(rerun_reason(status, cls) for status, cls in kept)
    assert rerun_reason("export_failed", "environment").startswith("recorded as export_failed (environment: ")


def _cells(results: Path, run_id: str, shapes: str) -> list[str]:
    """onnxruntime CUDA cells: skipped on a machine without a GPU, so the suite runs do no export."""
    return [
        "--sizes", "n", "--tasks", "detect", "--heads", "e2e", "--backends", "onnxruntime", "--devices", "cuda",
        "--shapes", shapes, "--precisions", "fp32", "--results-dir", str(results),
        "--cache-dir", str(results / "cache"), "--run-id", run_id, "--no-report", "--no-history", "-v",
    ]  # fmt: skip


def _failed(rec: dict, status: str, cls: str, message: str) -> dict:
    return {
        **rec,
        "status": status,
        "reason": message,
        "failure": {"class": cls, "stage": "export", "message": message, "ops": [], "guards": []},
    }


@pytest.mark.slow
@pytest.mark.process
def test_resume_runs_again_a_full_disk_and_out_of_memory_and_keeps_an_unsupported_op(tmp_path):
    full, oom, unsupported = (
        Cell("n", "detect", "e2e", "onnxruntime", "cuda", Shape(s, s)) for s in (160, 192, 224)
    )
    first = suite(*_cells(tmp_path, "r", "160,192,224"))
    assert first.returncode == 0, first.stdout[-3000:]
    run_dir = tmp_path / "r"
    recs = {
        json.loads(ln)["cell_id"]: json.loads(ln) for ln in (run_dir / "cells.jsonl").read_text().splitlines()
    }
    disk = "cannot write the worker's result to /x: [Errno 28] No space left on device (filesystem /x, 0 bytes free)"
    edited = [
        _failed(recs[full.id], "export_failed", "environment", disk),
        _failed(recs[oom.id], "run_failed", "out_of_memory", "probe-192x192 ran out of memory at 0.3 GB"),
        _failed(recs[unsupported.id], "export_failed", "unsupported_op", "Unsupported operator aten::foo"),
    ]
    (run_dir / "cells.jsonl").write_text("".join(json.dumps(r) + "\n" for r in edited))

    resumed = suite(*_cells(tmp_path, "r", "160,192,224"), "--resume", "-rs")
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    out = resumed.stdout
    # said per cell: which run again and why, which is kept and why
    assert f"{full.id}: recorded as export_failed (environment: the machine's disk" in out, out[-3000:]
    assert f"{oom.id}: recorded as run_failed (out_of_memory: memory ran out" in out, out[-3000:]
    assert "running it again (1 earlier records moved to cells.jsonl.superseded)" in out
    assert (
        "already recorded in run r as export_failed (unsupported_op: a failure of the cell, which would recur) "
        "(--resume)"
    ) in out, out[-3000:]
    after = {
        json.loads(ln)["cell_id"]: json.loads(ln) for ln in (run_dir / "cells.jsonl").read_text().splitlines()
    }
    assert len(after) == 3, "one record per cell"
    assert after[full.id]["status"] == after[oom.id]["status"] == "skipped"  # run again: no GPU here
    assert after[unsupported.id]["status"] == "export_failed"  # kept as it was
    superseded = [json.loads(ln) for ln in (run_dir / "cells.jsonl.superseded").read_text().splitlines()]
    assert sorted(r["cell_id"] for r in superseded) == sorted([full.id, oom.id])
