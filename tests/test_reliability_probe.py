"""The reliability probe (issue 30): 26 cases a skeptical CI user tries on a fresh clone (kills, full disks, races,
crafted caches and records, bad options), each run for real: real worker processes, a real tmpfs (a private mount
namespace) for a full disk, real SQLite files, real suite runs where the suite is what is probed.

    PYTHONPATH=. python -m pytest tests/test_reliability_probe.py -p no:randomly -q

Probes 1-7 are the seven the probe of be3597b found failing (issue 30's items 1-7); probes 8-26 are the nineteen it
found holding, kept here so they keep holding. Item 8's smaller fixes are tests/test_reliability_smaller.py.

 #  probe                                                             expected
 1  merge -o an existing run directory                                refused in one line; --replace swaps it whole
 2  a cache entry whose meta.json names a path outside the entry      a miss, with the reason
 3  the parent of a hung export worker is killed; a worker overruns   the worker is gone within seconds
 4  two runs on one run id at once                                    the second refused, naming the holder
 5  a run interrupted by SIGINT / SIGTERM                             env.json and the history say incomplete
 6  the export cache's disk is full                                   export_failed (environment), OS error, stop
 7  history commands on a directory / a non-SQLite file / no dir      one error line, no traceback
 8  a truncated cached artifact                                       a miss (content hash), re-exported
 9  a cached entry copied to another cache                            runs its own artifact
10  a killed export's staging debris                                  no entry; removed by the next lock holder
11  two processes sharing a cache entry                               one holds the lock, the other waits
12  a torn last line of cells.jsonl                                   moved aside, never glued to
13  a failed record append (ENOSPC)                                   file as it was, one line naming what is kept
14  a full results disk (tmpfs)                                       appends stop; every record written reads back
15  env.json written on a failing disk                                the old env.json intact, no temp file
16  run ids that escape --results-dir                                 refused
17  a pickle payload given as weights                                 refused; the payload never runs
18  telemetry / network at run time                                   ultralytics' sync off, no hub download
19  a NaN figure in a record                                          null with a reason at write; refused at import
20  hostile record text in the report                                 escaped
21  a record of an unknown schema version                             refused at import, the database unchanged
22  a hung export                                                     killed at --export-timeout, recorded timeout
23  a segfaulting export                                              crashed with SIGSEGV, the next export runs
24  out-of-range numeric options                                      one error line
25  an existing run id without --resume                               refused, nothing appended
26  two importers at once                                             a consistent database
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.core.results_dir import read_records
from harness.execute.export_cache import META, ExportCache, export_limits
from harness.execute.isolate import ExportOutcome
from harness.history.cli import main_compare, main_import, main_merge
from harness.history.synthetic import Noise, cell, make_env, make_record, noisy_samples, write_run
from harness.measure.stats import latency_from_samples
from tests.conftest import REPO
from tests.interrupt_after import started_workers
from tests.reliability_helpers import (
    alive,
    child_env,
    children,
    gpu_cells,
    kill_quietly,
    request_payload,
    suite,
    tmpfs_prefix,
    wait_for,
    write_json,
)


def _run(root: Path, host: str, i: int, run_id: str | None = None) -> Path:
    """A small synthetic results directory (3 ok cells) of machine `host`."""
    rid = run_id or f"nightly-{i:03d}"
    rng = random.Random(f"{host}-{i}")
    env = make_env(rid, f"2026-11-{i:02d}T02:00:00Z", hostname=host)
    cells = [cell("tensorrt"), cell("onnxruntime"), cell("torch", "s")]
    recs = [
        make_record(rid, c, samples_ms=noisy_samples(rng, 2.0 + k, 30, Noise())) for k, c in enumerate(cells)
    ]
    return write_run(root / host, env, recs)


# ---- 1. merge never overwrites a run --------------------------------------------------------------------------


@pytest.mark.process
def test_p01_merge_refuses_an_existing_run_dir_and_replace_swaps_it_whole(tmp_path, caplog):
    db = tmp_path / "h.sqlite"
    a, b = _run(tmp_path / "a", "box-a", 1), _run(tmp_path / "b", "box-b", 1)
    target = _run(tmp_path / "t", "box-t", 5, run_id="precious")  # an existing run directory
    before = {p.name: p.read_bytes() for p in target.iterdir()}
    assert main_merge([str(a), str(b), "-o", str(target), "--db", str(db)]) == 2
    assert {p.name: p.read_bytes() for p in target.iterdir()} == before, "the run's records are untouched"
    assert not db.exists(), "refused before the database was touched"
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and "already holds" in errors[0] and "--replace" in errors[0], errors

    assert main_merge([str(a), str(b), "-o", str(target), "--db", str(db), "--replace"]) == 0  # the other way
    recs = read_records(target)
    assert {r.machine for r in recs} == {"box-a", "box-b"} and len(recs) == 6
    siblings = sorted(p.name for p in target.parent.iterdir())
    assert siblings == [target.name], f"nothing left beside it: {siblings}"
    # merging the same runs again into its own output is a no-op, not a refusal
    assert main_merge([str(a), str(b), "-o", str(target), "--db", str(db)]) == 0


# ---- 2. the cache checks containment on read --------------------------------------------------------------------


def _ok_entry(cache: ExportCache, name: str) -> Path:
    entry = cache.entry_dir(name, "0" * 64)
    with cache.locked(entry, 10):
        staging = cache.staging_dir(entry)
        (staging / "model.onnx").write_bytes(b"onnx" * 64)
        cache.store(
            entry, staging, ExportOutcome("ok", 1.0, artifact=str(staging / "model.onnx"), wall_s=1.0), {}
        )
    return entry


@pytest.mark.parametrize("escape", ["../../../outside.onnx", "ABSOLUTE"])
def test_p02_a_cache_entry_naming_a_path_outside_itself_is_a_miss(tmp_path, escape):
    cache = ExportCache(tmp_path / "cache")
    entry = _ok_entry(cache, "cell")
    outside = tmp_path / "outside.onnx"
    outside.write_bytes(b"not the export")
    rel = str(outside) if escape == "ABSOLUTE" else escape
    assert (entry / rel).resolve() == outside.resolve()
    meta = json.loads((entry / META).read_text())
    digest = hashlib.sha256(
        outside.read_bytes()
    ).hexdigest()  # a hash that matches: only containment refuses it
    meta["outcome"]["artifact"] = rel
    meta["files"] = {rel: digest}
    (entry / META).write_text(json.dumps(meta))
    with cache.locked(entry, 10):
        found = cache.lookup(entry, export_limits(None))
    assert found.outcome is None, f"taken as a hit: artifact {found.outcome and found.outcome.artifact}"
    assert "outside itself" in found.miss and rel in found.miss
    # the other way: the untouched entry is a hit inside the entry
    good = _ok_entry(cache, "good")
    with cache.locked(good, 10):
        hit = cache.lookup(good, export_limits(None)).outcome
    assert hit is not None and Path(hit.artifact).resolve().is_relative_to(good.resolve())


# ---- 3. export workers end with the run -------------------------------------------------------------------------

_PARENT = """
import sys
from pathlib import Path
from harness.backends.base import ExportRequest
from harness.execute.isolate import run_export
out = Path(sys.argv[1])
req = ExportRequest(backend="test-hang", device="cpu", checkpoint="unused.pt", size="n", task="detect", head="raw",
                    height=320, width=320, dynamic=False, batch=1, precision="fp32", out_dir=str(out / "export"))
run_export(req, out / "export.log", timeout_s=3600, imports=("tests.fault_backends",))
"""


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
@pytest.mark.process
def test_p03_a_worker_dies_with_its_parent(tmp_path, how):
    script = tmp_path / "parent.py"
    script.write_text(_PARENT)
    parent = subprocess.Popen([sys.executable, str(script), str(tmp_path)], env=child_env(), cwd=REPO)
    workers: list[int] = []
    try:
        assert wait_for(lambda: bool(workers.extend(children(parent.pid)) or workers), 60), (
            "no worker started"
        )
        worker = workers[0]
        assert wait_for(lambda: "[worker] exporting" in _text(tmp_path / "export.log"), 60), (
            "worker not running"
        )
        os.kill(parent.pid, how)
        parent.wait(10)
        assert wait_for(lambda: not alive(worker), 5), f"worker {worker} outlived its parent by 5 s"
    finally:
        kill_quietly(parent.pid)
        for w in workers:
            kill_quietly(w)


@pytest.mark.process
def test_p03_a_worker_enforces_its_own_time_limit(tmp_path):
    req = write_json(tmp_path / "req.json", request_payload("test-hang", tmp_path / "out", time_limit_s=2))
    t0 = time.monotonic()
    p = subprocess.Popen(
        [sys.executable, "-m", "harness.execute.worker", str(req), str(tmp_path / "res.json")],
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = p.communicate(timeout=60)
    finally:
        kill_quietly(p.pid)
    assert p.returncode == -signal.SIGKILL, out[-2000:]
    assert "exceeded its own time limit of 2 s" in out
    assert time.monotonic() - t0 < 30
    # the other way: a worker within its limit finishes normally
    ok = write_json(tmp_path / "ok.json", request_payload("test-ok", tmp_path / "ok", time_limit_s=60))
    done = subprocess.run(
        [sys.executable, "-m", "harness.execute.worker", str(ok), str(tmp_path / "ok-res.json")],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and json.loads((tmp_path / "ok-res.json").read_text())["status"] == "ok"


def _text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


# ---- 6. a full cache disk ---------------------------------------------------------------------------------------

_FULL_DISK_EXPORT = """
import json, os, sys
from dataclasses import asdict
from pathlib import Path
from harness.backends.base import ExportRequest
from harness.diagnosis.classify import classify
from harness.execute.isolate import run_export
mount, logs = Path(sys.argv[1]), Path(sys.argv[2])
out = mount / "staging"
out.mkdir()
fillers = []
try:  # fill the disk page by page, then free one page: room for the request, none for the artifact or result
    while True:
        f = mount / f"fill-{len(fillers)}"
        fillers.append(f)
        f.write_bytes(b"x" * 4096)
except OSError:
    pass
fillers[0].unlink()
req = ExportRequest(backend="test-ok", device="cpu", checkpoint="unused.pt", size="n", task="detect", head="raw",
                    height=320, width=320, dynamic=False, batch=1, precision="fp32", out_dir=str(out))
o = run_export(req, logs / "export.log", timeout_s=120, imports=("tests.fault_backends",))
f = classify(o.message, o.traceback, o.exception_type, signal=o.signal, status=o.status)
print(json.dumps({"outcome": asdict(o), "class": f["class"], "left": sorted(p.name for p in out.iterdir())}))
"""


@pytest.mark.process
def test_p06_a_worker_that_cannot_write_its_result_reports_the_os_error(tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    prefix = tmpfs_prefix(mount, "64k")
    if prefix is None:
        pytest.skip("no private mount namespace here (unshare): no small disk to fill")
    script = tmp_path / "export.py"
    script.write_text(_FULL_DISK_EXPORT)
    p = subprocess.run(
        [*prefix, sys.executable, str(script), str(mount), str(tmp_path)],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=300,
    )
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    o = got["outcome"]
    assert o["status"] == "export_failed", o
    assert "No space left on device" in o["message"] and str(mount / "staging") in o["message"], o["message"]
    assert f"filesystem {mount}" in o["message"], o["message"]
    assert "JSONDecodeError" not in json.dumps(o)
    assert got["class"] == "environment"
    assert not [n for n in got["left"] if n.endswith("result.json") or ".result.json." in n], got["left"]


@pytest.mark.slow
def test_p06_a_full_cache_disk_stops_the_run_with_one_line_and_no_debris(tmp_path):
    mount = tmp_path / "cache"
    mount.mkdir()
    # 1 MiB holds the locks, not a yolo26n ONNX export (~10 MB); list the staging area before the tmpfs goes
    prefix = tmpfs_prefix(mount, "1m", after=f'echo "STAGING: $(ls -A "{mount}/exports/.staging" | wc -l)"')
    if prefix is None:
        pytest.skip("no private mount namespace here (unshare): no small disk to fill")
    args = [
        "--sizes", "n", "--tasks", "detect", "--heads", "e2e", "--backends", "onnxruntime,torch-eager",
        "--devices", "cpu", "--shapes", "160", "--precisions", "fp32", "--results-dir", str(tmp_path / "results"),
        "--cache-dir", str(mount), "--run-id", "full", "--no-report", "--no-history", "--max-time", "0.2",
        "--no-accuracy", "--scenarios", "none", "--no-e2e", "--timing-episodes", "1",
    ]  # fmt: skip
    p = suite(*args, prefix=prefix)
    out = p.stdout + p.stderr
    assert p.returncode == 2, out[-4000:]
    stops = [line for line in out.splitlines() if "yolo26-bench stopped:" in line]
    assert len(stops) == 1 and "ran out of disk space" in stops[0], out[-4000:]
    assert "Traceback" not in out and "JSONDecodeError" not in out
    recs = {r.cell_id: r for r in read_records(tmp_path / "results" / "full")}
    onnx = next(r for k, r in recs.items() if "onnxruntime" in k)
    assert onnx.status == "export_failed" and onnx.failure["class"] == "environment", onnx
    assert "No space left on device" in onnx.reason
    # the run stopped before timing anything: every record is a failure on the full disk (torch-eager's probe,
    # run beside the export, may have met it too), none is a measurement
    assert all(r.failure["class"] == "environment" for r in recs.values()), {
        k: (r.status, r.reason) for k, r in recs.items()
    }
    assert "not cached: an I/O error" in out  # store() dropped the entry and its staging directory
    assert "STAGING: 0" in p.stdout, p.stdout[-2000:]


# ---- 7. history commands: one line, never a traceback -----------------------------------------------------------


def _history_case(tmp_path: Path, case: str) -> tuple[list[str], dict]:
    if case == "directory":
        d = tmp_path / "db-dir"
        d.mkdir()
        return ["--db", str(d)], {}
    if case == "not-sqlite":
        f = tmp_path / "notes.sqlite"
        f.write_text("these are my notes, not a database\n" * 200)
        return ["--db", str(f)], {}
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    return [], {"YOLO26_BENCH_HISTORY": str(blocker / "missing" / "history.sqlite")}


@pytest.mark.parametrize("case", ["directory", "not-sqlite", "env-in-missing-dir"])
@pytest.mark.parametrize("command", ["import", "compare"])
@pytest.mark.process
def test_p07_history_commands_end_in_one_line_not_a_traceback(tmp_path, case, command):
    run = _run(tmp_path, "box", 1)
    args, env = _history_case(tmp_path, case)
    p = subprocess.run(
        [sys.executable, "-m", "harness", command, str(run), *args],
        capture_output=True,
        text=True,
        env=child_env(**env),
        cwd=tmp_path,
        timeout=120,
    )
    assert p.returncode == 2, p.stdout + p.stderr
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    errors = [line for line in p.stderr.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1, p.stderr
    assert "history database" in errors[0] and ";" in errors[0], errors[0]  # the path, the error, what to do


def test_p07_a_good_database_still_works(tmp_path):
    db = tmp_path / "h.sqlite"
    assert main_import([str(_run(tmp_path, "box", 1)), "--db", str(db)]) == 0  # the other way
    assert main_compare([str(_run(tmp_path, "box", 2)), "--db", str(db)]) == 0
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 2


# ---- 4. one run id, one writer ----------------------------------------------------------------------------------

_CLAIMER = """
import json, sys, time
from harness.core.run_claim import RunClaimed, claim
start = float(sys.argv[2])
while time.time() < start:  # every contender starts its claim at the same moment
    time.sleep(0.001)
try:
    c = claim(sys.argv[1])
    print(json.dumps({"won": True}), flush=True)
    time.sleep(float(sys.argv[3]))
except RunClaimed as e:
    print(json.dumps({"won": False, "error": str(e)}), flush=True)
"""


@pytest.mark.slow
@pytest.mark.process
def test_p04_runs_started_together_on_one_id_one_wins_the_others_name_it(tmp_path):
    script = tmp_path / "claim.py"
    script.write_text(_CLAIMER)
    start = time.time() + 3
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(tmp_path / "results" / "same-id"), str(start), "3"],
            env=child_env(),
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outs = [(p.pid, json.loads(p.communicate(timeout=60)[0].strip())) for p in procs]
    winners = [pid for pid, o in outs if o["won"]]
    assert len(winners) == 1, outs
    for _, o in outs:
        if not o["won"]:
            assert f"being written by pid {winners[0]} on " in o["error"], o


_HOLDER = """
import sys, time
from harness.core.run_claim import claim
c = claim(sys.argv[1])
print("held", flush=True)
time.sleep(120)
"""


@pytest.mark.slow
def test_p04_a_second_run_on_a_held_id_is_refused_resume_or_not(tmp_path):
    script = tmp_path / "hold.py"
    script.write_text(_HOLDER)
    holder = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "r")], env=child_env(), stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        for extra in ([], ["--resume"]):
            p = suite(*gpu_cells(tmp_path, "r"), "--no-history", *extra)
            assert p.returncode == 4, (p.stdout + p.stderr)[-3000:]
            errors = [line for line in p.stderr.splitlines() if line.startswith("ERROR:")]
            assert len(errors) == 1 and f"being written by pid {holder.pid} on " in errors[0], p.stderr
        assert not (tmp_path / "r" / "cells.jsonl").exists(), "nothing recorded"
    finally:
        kill_quietly(holder.pid)
        holder.wait(10)
    # the other way: the holder is gone (the kernel dropped its lock), so the id is free
    p = suite(*gpu_cells(tmp_path, "r"), "--no-history")
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    assert len(read_records(tmp_path / "r")) == 1


def test_p04_import_says_so_when_a_run_holds_two_records_of_one_cell(tmp_path, capsys):
    run = _run(tmp_path, "box", 1)
    lines = (run / "cells.jsonl").read_text().splitlines()
    (run / "cells.jsonl").write_text("\n".join([*lines, lines[0]]) + "\n")  # a second writer's record
    assert main_import([str(run), "--db", str(tmp_path / "h.sqlite")]) == 0
    out = capsys.readouterr().out
    assert "1 cell(s) recorded more than once" in out and json.loads(lines[0])["cell_id"] in out, out
    assert main_import([str(_run(tmp_path, "box", 2)), "--db", str(tmp_path / "h.sqlite")]) == 0
    assert "recorded more than once" not in capsys.readouterr().out  # the other way


# ---- 5. an interrupted run is marked incomplete -----------------------------------------------------------------


#: the cells a run holds (of the 2 it plans) when the signal comes at each moment (tests/interrupt_after.py)
_RECORDED_AT = {"between": 1, "finalizer": 1, "skip": 1, "summary": 2, "ended": 2, "worker": 0}


def _cpu_cells(results: Path, run_id: str) -> list[str]:
    """Two onnxruntime CPU cells, exported one at a time: the run starts a real worker (an export)."""
    return [
        "--sizes", "n", "--tasks", "detect", "--heads", "e2e", "--backends", "onnxruntime", "--devices", "cpu",
        "--shapes", "160,192", "--precisions", "fp32", "--results-dir", str(results), "--cache-dir",
        str(results / "cache"), "--run-id", run_id, "--no-report", "--export-workers", "1", "--no-accuracy",
        "--scenarios", "none", "--no-e2e", "--timing-episodes", "1", "--max-time", "0.2",
    ]  # fmt: skip


def _interrupted_run(tmp_path: Path, sig: str, at: str, sigint: str = "default"):
    """A suite run of 2 cells that sends itself `sig` at the moment `at` (tests/interrupt_after.py)."""
    cells = _cpu_cells(tmp_path, "cut") if at == "worker" else gpu_cells(tmp_path, "cut", "160,192")
    env = child_env(
        YOLO26_TEST_INTERRUPT=sig,
        YOLO26_TEST_INTERRUPT_AT=at,
        YOLO26_TEST_INTERRUPT_LOG=str(tmp_path / "workers.txt"),
    )
    return suite("-p", "tests.interrupt_after", *cells, env=env, sigint=sigint)


def _assert_interrupted(tmp_path: Path, p, sig: str, recorded: int) -> None:
    out = p.stdout + p.stderr
    assert p.returncode == 2, out[-3000:]
    env = json.loads((tmp_path / "cut" / "env.json").read_text())
    assert env["incomplete"] == {
        "reason": f"interrupted by {sig}",
        "cells_recorded": recorded,
        "cells_planned": 2,
    }, env
    assert f"run cut is incomplete: {recorded} of 2 cells (interrupted by {sig})" in p.stdout, out[-3000:]
    assert not (tmp_path / "history.sqlite").exists(), "the end-of-run import skipped it"
    assert "history: imported" not in out


#: the fast tier keeps one of these (a worker being started: the moment with the most to lose), the rest are slow
_MOMENTS = [
    pytest.param(
        sig, at, id=f"{sig}-{at}", marks=[] if (sig, at) == ("SIGTERM", "worker") else [pytest.mark.slow]
    )
    for sig in ("SIGINT", "SIGTERM")
    for at in _RECORDED_AT
]


@pytest.mark.process
@pytest.mark.parametrize(("sig", "at"), _MOMENTS)
def test_p05_a_signal_at_any_moment_ends_the_run_as_interrupted(tmp_path, sig, at):
    p = _interrupted_run(tmp_path, sig, at)
    _assert_interrupted(tmp_path, p, sig, _RECORDED_AT[at])
    started = started_workers(tmp_path / "workers.txt")
    if at == "worker":
        # the worker being started when the signal came is ended, and the export queued behind it never starts
        assert len(started) == 1, f"workers started: {started}\n{(p.stdout + p.stderr)[-3000:]}"
        assert wait_for(lambda: not alive(started[0]), 10), f"worker {started[0]} outlived the run"
        assert not list((tmp_path / "cut" / "cache").rglob("meta.json")), "the export was cut, not finished"
    else:
        assert started == [], "these cells start no worker"


@pytest.mark.process
def test_p05_a_sigint_reaches_a_run_started_with_it_ignored(tmp_path):
    # a shell starts a background job (`pytest ... &` in a script, a CI step) with SIGINT ignored: the run takes
    # it all the same, so that a kill -INT or a Ctrl-C to the script does not leave it running to be imported
    p = _interrupted_run(tmp_path, "SIGINT", "between", sigint="ignored")
    _assert_interrupted(tmp_path, p, "SIGINT", 1)
    db = tmp_path / "h.sqlite"
    imported = subprocess.run(
        [sys.executable, "-m", "harness", "import", str(tmp_path / "cut"), "--db", str(db)],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=120,
    )
    assert imported.returncode == 0 and "incomplete: 1 of 2 cells" in imported.stdout, imported
    cmp = subprocess.run(
        [sys.executable, "-m", "harness", "compare", "cut", "--db", str(db)],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=120,
    )
    assert "this run is incomplete: 1 of 2 cells" in cmp.stdout, cmp.stdout + cmp.stderr


@pytest.mark.slow
def test_p05_a_run_that_ends_whole_carries_no_mark(tmp_path):
    p = suite(*gpu_cells(tmp_path, "whole", "160,192"))
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    assert "incomplete" not in json.loads((tmp_path / "whole" / "env.json").read_text())
    assert (tmp_path / "history.sqlite").exists(), "imported at the end of the run"
    assert "incomplete" not in p.stdout


def test_p04_p05_the_report_labels_a_run_that_is_not_whole(tmp_path):
    from harness.report import render_report

    whole = _run(tmp_path / "w", "box", 1)
    cut = _run(tmp_path / "c", "box", 2)
    env = json.loads((cut / "env.json").read_text())
    env["incomplete"] = {"reason": "interrupted by SIGINT", "cells_recorded": 2, "cells_planned": 4}
    (cut / "env.json").write_text(json.dumps(env))
    lines = (cut / "cells.jsonl").read_text().splitlines()
    (cut / "cells.jsonl").write_text("\n".join([*lines, lines[1]]) + "\n")
    html = render_report([cut], tmp_path / "reports").read_text()
    assert "is not whole:</strong>" in html
    assert "incomplete: 2 of 4 cells (interrupted by SIGINT)" in html
    assert "1 cell(s) recorded more than once" in html
    md = (tmp_path / "reports" / "latest" / "summary.md").read_text()
    assert "**not whole**: incomplete: 2 of 4 cells" in md
    html = render_report([whole], tmp_path / "reports2").read_text()  # the other way
    assert "is not whole" not in html


# =================================================================================================================
# Probes 8-26: what the probe of be3597b found holding, kept holding.
# =================================================================================================================


def _lookup(cache: ExportCache, entry: Path):
    with cache.locked(entry, 10):
        return cache.lookup(entry, export_limits(None))


def test_p08_a_truncated_cached_artifact_is_a_miss(tmp_path):
    cache = ExportCache(tmp_path)
    entry = _ok_entry(cache, "cell")
    assert _lookup(cache, entry).outcome is not None  # the other way: whole, it is a hit
    with open(entry / "model.onnx", "r+b") as f:
        f.truncate(10)  # a copy cut short, a disk that lost blocks
    found = _lookup(cache, entry)
    assert found.outcome is None and "model.onnx content hash mismatch" in found.miss


def test_p09_a_copied_cache_runs_its_own_artifacts(tmp_path):
    import shutil

    cache = ExportCache(tmp_path / "a")
    entry = _ok_entry(cache, "cell")
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    copy = ExportCache(tmp_path / "b")
    hit = _lookup(copy, copy.entry_dir("cell", "0" * 64)).outcome
    assert hit is not None and Path(hit.artifact).is_relative_to(tmp_path / "b"), hit
    assert not Path(hit.artifact).is_relative_to(entry)


def test_p10_a_killed_exports_debris_is_no_entry_and_is_removed(tmp_path):
    # the same check as the export cache's own test: one copy of it, run here as the probe's case
    import tests.test_export_cache as export_cache

    export_cache.test_a_killed_export_leaves_no_entry_and_its_debris_is_removed(tmp_path)


_LOCK_HOLDER = """
import sys, time
from pathlib import Path
from harness.execute.export_cache import ExportCache
cache = ExportCache(Path(sys.argv[1]))
with cache.locked(cache.entry_dir("cell", "2" * 64), 10):
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
"""


@pytest.mark.process
def test_p11_two_processes_sharing_a_cache_entry_take_turns(tmp_path):
    from filelock import Timeout

    script = tmp_path / "hold.py"
    script.write_text(_LOCK_HOLDER)
    other = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path), "4"], env=child_env(), stdout=subprocess.PIPE, text=True
    )
    try:
        assert other.stdout.readline().strip() == "locked"
        cache = ExportCache(tmp_path)
        waited = []
        with (
            pytest.raises(Timeout),
            cache.locked(cache.entry_dir("cell", "2" * 64), 0.5, lambda: waited.append(1)),
        ):
            pass
        assert waited == [1], "the waiter was told the entry is held"
        t0 = time.monotonic()
        with cache.locked(cache.entry_dir("cell", "2" * 64), 60):  # the other way: it gets it once released
            assert time.monotonic() - t0 < 30
    finally:
        kill_quietly(other.pid)
        other.wait(10)


def _record(cell_id_suffix: str = "", status: str = "skipped"):
    from harness.core.axes import Shape
    from harness.core.cell import Cell
    from harness.core.record import new_record

    rec = new_record("r", Cell("n", "detect", "e2e", "onnxruntime", "cpu", Shape(160, 160)), "unknown")
    rec.status, rec.reason = status, "probe"
    rec.cell_id += cell_id_suffix
    return rec


def test_p12_a_torn_last_line_is_moved_aside_never_glued_to(tmp_path):
    from harness.core.results_dir import RecordWriter

    RecordWriter(tmp_path).write(_record("-a"))
    with open(tmp_path / "cells.jsonl", "ab") as f:
        f.write(b'{"schema_version": 2, "cell_id": "yolo26n-det')
    notes = []
    RecordWriter(tmp_path, notify=notes.append).write(_record("-b"))
    lines = (tmp_path / "cells.jsonl").read_text().splitlines()
    assert [json.loads(line)["cell_id"][-2:] for line in lines] == ["-a", "-b"]
    assert (
        (tmp_path / "cells.jsonl.torn")
        .read_bytes()
        .startswith(b'{"schema_version": 2, "cell_id": "yolo26n-det')
    )
    assert len(notes) == 1 and "torn" in notes[0]


_FILL_RECORDS = """
import json, sys
from pathlib import Path
from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.record import new_record
from harness.core.results_dir import RecordWriteError, RecordWriter, read_records
run_dir = Path(sys.argv[1])
w, n = RecordWriter(run_dir), 0
try:
    while n < 1000:
        rec = new_record("r", Cell("n", "detect", "e2e", "onnxruntime", "cpu", Shape(160, 160)), "unknown")
        rec.status, rec.reason = "skipped", "x" * 1500
        rec.cell_id += f"-{n}"
        w.write(rec)
        n += 1
    print(json.dumps({"written": n, "error": None}))
except RecordWriteError as e:
    raw = (run_dir / "cells.jsonl").read_bytes()
    whole = all(json.loads(line) for line in raw.splitlines())
    print(json.dumps({"written": n, "error": str(e), "read_back": len(read_records(run_dir)), "whole": whole,
                      "ends_in_newline": raw.endswith(b"\\n")}))
"""


def _on_tmpfs(tmp_path: Path, size: str, script_text: str) -> dict:
    mount = tmp_path / "disk"
    mount.mkdir()
    prefix = tmpfs_prefix(mount, size)
    if prefix is None:
        pytest.skip("no private mount namespace here (unshare): no small disk to fill")
    script = tmp_path / "script.py"
    script.write_text(script_text)
    p = subprocess.run(
        [*prefix, sys.executable, str(script), str(mount)],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=300,
    )
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.process
def test_p13_p14_a_full_results_disk_stops_appends_with_every_record_intact(tmp_path):
    out = _on_tmpfs(tmp_path, "32k", _FILL_RECORDS)
    assert out["error"] and "No space left on device" in out["error"], out
    assert f"the {out['written']} records already in cells.jsonl (intact)" in out["error"]
    assert 0 < out["written"] == out["read_back"] and out["whole"] and out["ends_in_newline"], out


@pytest.mark.slow
def test_p14_a_full_results_disk_stops_a_suite_run_with_one_line(tmp_path):
    from tests import test_records_survive

    test_records_survive.test_full_results_disk_stops_the_run_with_one_line(tmp_path)


_ENV_ON_FULL_DISK = """
import json, sys
from pathlib import Path
from harness.core.results_dir import RecordWriteError, write_env
d = Path(sys.argv[1])
write_env(d, {"run_id": "r", "v": 1})
i = 0
try:
    while True:
        (d / f"fill-{i}").write_bytes(b"x" * 4096)
        i += 1
except OSError:
    pass
try:
    write_env(d, {"run_id": "r", "v": 2, "pad": "y" * 20000})
    err = None
except RecordWriteError as e:
    err = str(e)
print(json.dumps({"error": err, "env": json.loads((d / "env.json").read_text()),
                  "others": sorted(p.name for p in d.iterdir() if not p.name.startswith("fill-"))}))
"""


@pytest.mark.process
def test_p15_env_json_on_a_full_disk_stays_whole(tmp_path):
    out = _on_tmpfs(tmp_path, "64k", _ENV_ON_FULL_DISK)
    assert out["error"] and "No space left on device" in out["error"] and "env.json" in out["error"], out
    assert out["env"] == {"run_id": "r", "v": 1} and out["others"] == ["env.json"], out


@pytest.mark.parametrize("bad", ["../escaped", "a/b", ".."])
@pytest.mark.slow
def test_p16_a_run_id_that_escapes_the_results_dir_is_refused(tmp_path, bad):
    args = gpu_cells(tmp_path / "res", "x")
    args[args.index("--run-id") + 1] = bad
    p = suite(*args, timeout=120)
    assert p.returncode == 4, p.stdout + p.stderr
    errors = [line for line in p.stderr.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1 and "--run-id" in errors[0]
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "res").exists()


class _Payload:
    """Unpickling this creates `marker`: what a hostile .pt file could do with any code at all."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_p17_a_pickle_payload_given_as_weights_never_runs(tmp_path):
    import torch

    from harness.yolo.models import WeightsError, check_checkpoint

    marker = tmp_path / "payload-ran"
    pt = tmp_path / "yolo26n.pt"
    torch.save({"model": _Payload(marker), "train_args": {}}, pt)
    with pytest.raises(WeightsError, match="needs full unpickling"):
        check_checkpoint(pt, allow_unsafe=False)
    assert not marker.exists()
    torch.load(pt, weights_only=False)  # the other way: unpickled in full, the file does run its code
    assert marker.exists()


@pytest.mark.process
def test_p18_no_telemetry_leaves_a_harness_process(tmp_path):
    code = (
        "import json, os, harness\n"
        "try:\n    import openvino_telemetry\n    blocked = False\nexcept ImportError:\n    blocked = True\n"
        "print(json.dumps({k: os.environ.get(k) for k in ('YOLO_OFFLINE', 'YOLO_AUTOINSTALL', "
        "'ORT_DISABLE_TELEMETRY')} | {'blocked': blocked}))\n"
    )
    env = child_env(YOLO_OFFLINE="0", ORT_DISABLE_TELEMETRY="0")  # a user's values cannot turn them back on
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert json.loads(p.stdout) == {
        "YOLO_OFFLINE": "1",
        "YOLO_AUTOINSTALL": "0",
        "ORT_DISABLE_TELEMETRY": "1",
        "blocked": True,
    }, p.stderr


def test_p19_a_nan_figure_is_null_with_a_reason_and_refused_at_import(tmp_path, caplog):
    from harness.core.results_dir import RecordWriter

    rec = _record("-nan", status="ok")
    rec.latency_ms = latency_from_samples([float("nan")], "model")
    RecordWriter(tmp_path / "w").write(rec)
    (written,) = read_records(tmp_path / "w")
    assert written.status == "run_failed" and written.latency_ms.p50 is None
    assert "not finite" in written.null_reasons["latency_ms.p50"]
    run = _run(tmp_path, "box", 1)
    text = re.sub(r'"p50": [0-9.e+-]+', '"p50": NaN', (run / "cells.jsonl").read_text(), count=1)  # edited
    assert '"p50": NaN' in text
    (run / "cells.jsonl").write_text(text)
    db = tmp_path / "h.sqlite"
    assert main_import([str(run), "--db", str(db)]) == 2
    assert not db.exists() and "non-finite" in caplog.text


def test_p20_hostile_record_text_is_escaped_in_the_report(tmp_path):
    from harness.report import render_report

    run = _run(tmp_path, "box", 1)
    recs = [json.loads(line) for line in (run / "cells.jsonl").read_text().splitlines()]
    evil = '"><img src=x onerror=alert(1)><script>alert(2)</script>'
    recs[0].update(
        status="export_failed", reason=evil, failure={"class": "unknown", "stage": "export", "message": evil}
    )
    recs[0]["latency_ms"] = recs[0]["samples_ms"] = None
    (run / "cells.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    html = render_report([run], tmp_path / "reports").read_text()
    assert "<script>alert(2)</script>" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in html, "shown as text"


def test_p21_a_record_of_an_unknown_schema_is_refused_and_the_database_unchanged(tmp_path):
    db = tmp_path / "h.sqlite"
    assert main_import([str(_run(tmp_path / "a", "box", 1)), "--db", str(db)]) == 0
    before = db.read_bytes()
    run = _run(tmp_path / "b", "box", 2)
    recs = [json.loads(line) for line in (run / "cells.jsonl").read_text().splitlines()]
    recs[1]["schema_version"] = 99
    (run / "cells.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert main_import([str(run), "--db", str(db)]) == 2
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1
    assert len(db.read_bytes()) == len(before)


def _isolated(backend: str, tmp_path: Path, timeout_s: float):
    from harness.backends.base import ExportRequest
    from harness.execute.isolate import run_export

    req = ExportRequest(
        backend=backend, device="cpu", checkpoint="unused.pt", size="n", task="detect", head="raw",
        height=320, width=320, dynamic=False, batch=1, precision="fp32", out_dir=str(tmp_path / backend),
    )  # fmt: skip
    return run_export(req, tmp_path / f"{backend}.log", timeout_s, imports=("tests.fault_backends",))


@pytest.fixture
def _importable_tests(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH")))))


@pytest.mark.process
def test_p22_a_hung_export_is_killed_at_its_timeout(tmp_path, _importable_tests):
    o = _isolated("test-hang", tmp_path, 3)
    assert o.status == "timeout" and "exceeded the 3 s timeout" in o.message
    assert "killed after the 3 s timeout" in Path(o.log).read_text()


@pytest.mark.process
def test_p23_a_segfaulting_export_is_recorded_and_the_next_runs(tmp_path, _importable_tests):
    from harness.diagnosis.classify import classify

    o = _isolated("test-segv", tmp_path, 60)
    assert (o.status, o.signal) == ("crashed", "SIGSEGV")
    assert classify(o.message, signal=o.signal, status=o.status)["class"] == "crash"
    assert _isolated("test-ok", tmp_path, 60).status == "ok"  # the other way


@pytest.mark.parametrize(("option", "value"), [("--export-timeout", "nan"), ("--rounds", "0")])
@pytest.mark.slow
def test_p24_an_out_of_range_option_is_one_error_line(tmp_path, option, value):
    p = suite(*gpu_cells(tmp_path / "res", "x"), option, value, timeout=120)
    assert p.returncode == 4, p.stdout + p.stderr
    errors = [line for line in p.stderr.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1 and option in errors[0] and "out of range" in errors[0], p.stderr
    assert not (tmp_path / "res").exists()


@pytest.mark.slow
def test_p25_an_existing_run_id_without_resume_is_refused(tmp_path):
    assert suite(*gpu_cells(tmp_path, "r"), "--no-history").returncode == 0
    before = (tmp_path / "r" / "cells.jsonl").read_bytes()
    p = suite(*gpu_cells(tmp_path, "r"), "--no-history")
    assert p.returncode == 4
    errors = [line for line in p.stderr.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1 and "already holds a run" in errors[0] and "--resume" in errors[0]
    assert (tmp_path / "r" / "cells.jsonl").read_bytes() == before


@pytest.mark.process
def test_p26_two_importers_at_once_leave_a_consistent_database(tmp_path):
    db = tmp_path / "h.sqlite"
    runs = [_run(tmp_path / str(i), f"box-{i}", i) for i in (1, 2)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "harness", "import", str(r), "--db", str(db)],
            env=child_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in runs
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 2
        assert conn.execute("SELECT COUNT(*) FROM cells").fetchone()[0] == 6
