"""A run killed by SIGKILL keeps every finished cell, and --resume then runs only what is missing; the paired ratios
are set from the timing, before any cell's later stages, so each record is whole when its cell's stages end.

The issue: killed during OpenVINO's scenarios, the ONNX Runtime cell of the same workload, whose stages had all
ended (its scenarios and mAP logged), left no record, because a workload wrote its records only when every cell of
it had ended. A SIGKILL cannot be caught: only what is on disk survives it. Here a real suite run of one workload
(onnxruntime and openvino, yolo26n at 160x160) SIGKILLs its process group from inside openvino's scenarios stage
(tests/kill_at_stage.py), after the onnxruntime cell's stages have ended.

The tests of `run_workload` below run it on states timed with a fake clock and a pipeline of fake later stages: when
each record is written, and what a cell that fails after timing (and the others) carry in `paired`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.null_reasons import unexplained_nulls
from harness.core.record_codec import record_from_dict
from harness.core.results_dir import RecordWriter, read_records
from harness.decide.paired import ratio
from harness.execute import workload
from harness.execute.config import RunConfig
from harness.execute.recording import start
from harness.execute.services import RunState
from harness.execute.stages import Pipeline, Stage
from harness.execute.state import Attempt, AttemptState
from harness.measure.interleave import Contestant, RoundsPolicy, run_interleaved
from harness.measure.stats import latency_from_samples
from tests.conftest import REPO
from tests.fake_clock import FakeClock
from tests.reliability_helpers import child_env

ORT = "yolo26n-detect-e2e-onnxruntime-cpu-160x160-b1-fp32"
OV = "yolo26n-detect-e2e-openvino-cpu-160x160-b1-fp32"


def _suite(results: Path, cache_dir: Path, *extra: str, env: dict) -> subprocess.CompletedProcess:
    """A suite run of the one workload, in a session (and process group) of its own: the hook's SIGKILL of its
    group reaches the run and its workers, never this test."""
    cmd = [
        sys.executable, "-m", "pytest", "suites/", "--benchmark-only", "-p", "no:randomly",
        "--sizes", "n", "--tasks", "detect", "--heads", "e2e", "--backends", "onnxruntime,openvino",
        "--devices", "cpu", "--shapes", "160", "--precisions", "fp32",
        "--results-dir", str(results), "--cache-dir", str(cache_dir), "--run-id", "k",
        "--max-time", "0.2", "--scenarios", "none", "--no-accuracy", "--no-e2e", "--no-report", "--no-history",
        *extra,
    ]  # fmt: skip
    return subprocess.run(
        cmd, cwd=REPO, capture_output=True, text=True, timeout=900, env=env, start_new_session=True
    )


def _lines(run_dir: Path) -> list[dict]:
    path = run_dir / "cells.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.slow
@pytest.mark.export
@pytest.mark.process
def test_sigkill_keeps_the_finished_cell_and_resume_runs_only_the_missing_one(tmp_path, cache_dir):
    results, note = tmp_path / "results", tmp_path / "kill-note.json"
    run_dir = results / "k"
    env = child_env(YOLO26_TEST_KILL_AT="openvino:scenarios", YOLO26_TEST_KILL_NOTE=str(note))
    t0 = time.monotonic()
    killed = _suite(results, cache_dir, "-p", "tests.kill_at_stage", env=env)
    out = killed.stdout[-3000:] + killed.stderr[-3000:]
    assert killed.returncode == -9, out  # SIGKILLed, from inside openvino's scenarios stage
    moment = json.loads(note.read_text())
    assert moment["cell_id"] == OV, moment
    # the finished cell's record was on disk before the second cell's later stages ran, and is there, whole
    assert moment["recorded"] == [ORT], f"onnxruntime's stages had ended, its record not written: {moment}"
    lines = _lines(run_dir)
    assert [r["cell_id"] for r in lines] == [ORT]
    rec = record_from_dict(lines[0])
    assert rec.status == "ok", rec.reason
    assert rec.latency_ms.p50 > 0 and rec.parity["ok"] and rec.timing["mode"] == "interleaved"
    # its paired ratio was taken from the interleaved timing before its record was written
    assert rec.paired["reference"] == ORT and rec.paired["ratio"] == 1.0 and OV in rec.paired["others"]
    assert unexplained_nulls(rec) == []
    ort_line = (run_dir / "cells.jsonl").read_text().splitlines()[0]
    kill_s = time.monotonic() - t0

    resumed = _suite(results, cache_dir, "--resume", "-v", "-rs", env=child_env())
    out = resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert resumed.returncode == 0, out
    assert f"{ORT}] SKIPPED" in resumed.stdout and f"{OV}] PASSED" in resumed.stdout, out
    assert "already recorded in run k as ok (--resume)" in resumed.stdout, out
    lines = _lines(run_dir)
    assert [r["cell_id"] for r in lines] == [ORT, OV], "the missing cell recorded, no duplicates"
    assert (run_dir / "cells.jsonl").read_text().splitlines()[0] == ort_line, "the finished record untouched"
    ov = record_from_dict(lines[1])
    assert ov.status == "ok", ov.reason
    assert ov.timing["mode"] == "solo"  # its partner is not timed again: no paired ratio, said why
    assert ov.paired is None and "not timed with it" in ov.null_reasons["paired"], ov.null_reasons["paired"]
    assert unexplained_nulls(ov) == []
    # issue 66: the kept record's ratio to OpenVINO came from the killed run's timing, OpenVINO's rounds from the
    # resumed one's: read back, no pair across the two timings, one comparison whichever way it is read
    assert rec.timing["session"] != ov.timing["session"]
    read = {r.cell_id: r for r in read_records(run_dir)}
    assert (
        read[ORT].paired is None and "another interleaved timing session" in read[ORT].null_reasons["paired"]
    )
    one_way, other_way = ratio(read[ORT], read[OV]), ratio(read[OV], read[ORT])
    assert not one_way.paired and not other_way.paired
    assert one_way.value * other_way.value == pytest.approx(1.0)
    print(f"killed run {kill_s:.0f} s, resumed run {time.monotonic() - t0 - kill_s:.0f} s")


# ---- run_workload on fake stages ---------------------------------------------------------------------------------
SHAPE = Shape(160, 160)
#: each backend's round on the fake clock (ms): the paired ratios are these over torch-eager's
ROUND_MS = {"torch-eager": 2.0, "onnxruntime": 1.0, "openvino": 3.0}


class FakeRun:
    """One workload of three CPU cells timed interleaved on a fake clock, waiting for `run_workload` as the timing
    phase leaves it; later stages are fakes: `fail` maps a backend to (stage, "parity_failed" | "crash" |
    "run_failed"). `on_disk` notes, at each cell's first later stage, the cell ids cells.jsonl held."""

    def __init__(self, tmp_path: Path, fail: dict[str, tuple[str, str]] | None = None) -> None:
        self.config = RunConfig(
            run_id="u", results_dir=tmp_path, cache_dir=tmp_path / "cache", e2e=False, remedies=False
        )
        (self.config.run_dir / "logs").mkdir(parents=True)
        self.writer = RecordWriter(self.config.run_dir)
        self.progress = lambda msg: None
        self.fail = fail or {}
        self.on_disk: dict[str, list[str]] = {}
        self.cells = [
            Cell("n", "detect", "e2e", b, "cpu", SHAPE) for b in ("onnxruntime", "torch-eager", "openvino")
        ]
        self.stages = Pipeline(
            tuple(
                Stage(name, lambda s, name=name: self._stage(s, name))
                for name in ("timed_rounds", "end_to_end", "parity", "scenarios", "accuracy")
            ),
            lambda s, stage: False,
        )
        clock = FakeClock()
        timed = run_interleaved(
            [Contestant(c.id, clock.taking(ROUND_MS[c.backend]), ROUND_MS[c.backend]) for c in self.cells],
            RoundsPolicy(fixed_rounds=40, block_s=0.01, min_trials=10),
            clock=clock,
        )
        states = []
        for c in self.cells:
            s = start(Attempt(c, c.id), "u", self.config.run_dir)
            s.timed = timed
            states.append(s)
        self.run = RunState()
        self.run.timed_workloads[workload.workload_label(self.cells[0])] = (states, states)

    def _stage(self, s: AttemptState, name: str) -> bool:
        if name == "timed_rounds":  # as the real stage records its rounds and how they were timed
            s.rec.timing = s.timed.section(s.attempt.cell_id)
            s.rec.latency_ms = latency_from_samples(s.timed.timings[s.attempt.cell_id].samples, "model")
        if name == "end_to_end":
            self.on_disk[s.cell.backend] = [r["cell_id"] for r in _lines(self.config.run_dir)]
        if name == "parity":
            s.rec.status = "ok"
        how = self.fail.get(s.cell.backend)
        if how and how[0] == name:
            if how[1] == "crash":
                raise RuntimeError(f"a harness bug in {name}")
            s.rec.status, s.rec.reason = how[1], f"{how[1]} on purpose"
            return name == "parity"  # parity goes on to the later stages; a timing failure ends the attempt
        return True

    def records(self) -> dict[str, dict]:
        out = workload.run_workload(self.cells, self, self.run, self.stages)
        assert list(out) == [c.id for c in self.cells] and all(len(v) == 1 for v in out.values())
        return {r["backend"]: r for r in _lines(self.config.run_dir)}


def _id(backend: str) -> str:
    return Cell("n", "detect", "e2e", backend, "cpu", SHAPE).id


def test_each_record_is_written_when_its_cell_ends_and_is_paired_already(tmp_path):
    fake = FakeRun(tmp_path)
    recs = fake.records()
    # the reference first (its accuracy pass is the others' reference), then the cells in their order
    assert list(recs) == ["torch-eager", "onnxruntime", "openvino"]
    assert fake.on_disk == {
        "torch-eager": [],
        "onnxruntime": [_id("torch-eager")],
        "openvino": [_id("torch-eager"), _id("onnxruntime")],
    }
    for backend, rec in recs.items():
        assert rec["status"] == "ok"
        assert rec["paired"]["reference"] == _id("torch-eager")
        assert rec["paired"]["ratio"] == pytest.approx(ROUND_MS[backend] / 2.0, rel=1e-6)
        assert sorted(rec["paired"]["others"]) == sorted(_id(b) for b in ROUND_MS if b != backend)


def test_a_cell_failing_after_timing_loses_its_own_ratio_and_the_others_keep_theirs_to_it(tmp_path):
    recs = FakeRun(tmp_path, fail={"openvino": ("parity", "parity_failed")}).records()
    ov = recs["openvino"]
    assert ov["status"] == "parity_failed" and ov["paired"] is None
    assert ov["null_reasons"]["paired"].startswith(
        "not an ok cell (parity_failed): it was ok when its workload's"
    )
    for backend in ("torch-eager", "onnxruntime"):  # their ratio to it is a fact of the rounds they shared
        other = recs[backend]["paired"]["others"][_id("openvino")]
        assert other["ratio"] == pytest.approx(ROUND_MS[backend] / 3.0, rel=1e-6)


def test_a_reference_crashing_after_timing_stays_the_others_reference(tmp_path):
    recs = FakeRun(tmp_path, fail={"torch-eager": ("scenarios", "crash")}).records()
    ref = recs["torch-eager"]
    assert ref["status"] == "crashed" and "a harness bug in scenarios" in ref["reason"]
    assert ref["paired"] is None and "not an ok cell (crashed)" in ref["null_reasons"]["paired"]
    for backend in ("onnxruntime", "openvino"):  # the crash loses no other record; their reference is kept
        rec = recs[backend]
        assert rec["status"] == "ok" and rec["paired"]["reference"] == _id("torch-eager")
        assert rec["paired"]["ratio"] == pytest.approx(ROUND_MS[backend] / 2.0, rel=1e-6)


def test_a_cell_failing_in_its_timing_is_left_out_of_the_pairs(tmp_path):
    recs = FakeRun(tmp_path, fail={"torch-eager": ("timed_rounds", "run_failed")}).records()
    assert recs["torch-eager"]["paired"] is None
    assert recs["torch-eager"]["null_reasons"]["paired"] == "not an ok cell (run_failed)"
    # the reference is then the first ok backend in the registry's order
    ort, ov = recs["onnxruntime"]["paired"], recs["openvino"]["paired"]
    assert ort["reference"] == ov["reference"] and ort["reference"] != _id("torch-eager")
    assert list(ort["others"]) == [_id("openvino")] and list(ov["others"]) == [_id("onnxruntime")]


def test_a_cell_timed_without_its_partners_says_so(tmp_path):
    fake = FakeRun(tmp_path, fail={b: ("timed_rounds", "run_failed") for b in ("torch-eager", "openvino")})
    ort = fake.records()["onnxruntime"]
    assert ort["status"] == "ok" and ort["paired"] is None
    assert ort["null_reasons"]["paired"] == workload.ALONE and "not timed with it" in workload.ALONE


def test_a_partner_timed_in_another_process_is_no_pair_when_read(tmp_path):
    """Issue 66: killed after ONNX Runtime's record, then --resume: the kept record held a paired ratio to OpenVINO
    from the killed run's timing, OpenVINO's record came from the resumed process's, and harness.decide.paired read
    the pair as 1.151 one way and 0.524 the other. Each interleaved timing has its own id in its records
    (`timing.session`); read back, a ratio to a partner of another session is dropped, with why."""
    killed, resumed = FakeRun(tmp_path / "killed"), FakeRun(tmp_path / "resumed")
    kept, again = killed.records(), resumed.records()
    sessions = {r["timing"]["session"] for r in kept.values()}
    assert len(sessions) == 1 and sessions != {again["openvino"]["timing"]["session"]}
    # the other way: the records of one timing read back with every pair standing
    whole = {r.backend: r for r in read_records(killed.config.run_dir)}
    assert ratio(whole["onnxruntime"], whole["openvino"]).paired
    assert set(whole["onnxruntime"].paired["others"]) == {_id("torch-eager"), _id("openvino")}
    # the run as a --resume leaves it: two records of the killed run's timing, OpenVINO's of the resumed one's
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    lines = [kept["torch-eager"], kept["onnxruntime"], again["openvino"]]
    (mixed / "cells.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    recs = {r.backend: r for r in read_records(mixed)}
    ort, ov, eager = recs["onnxruntime"], recs["openvino"], recs["torch-eager"]
    assert set(ort.paired["others"]) == {_id("torch-eager")} and ort.paired["ratio"] is not None
    assert "another interleaved timing session" in ort.null_reasons[f"paired.others.{_id('openvino')}"]
    assert ov.paired is None and "another interleaved timing session" in ov.null_reasons["paired"]
    assert _id("openvino") not in eager.paired["others"]
    one_way, other_way = ratio(ort, ov), ratio(ov, ort)
    assert not one_way.paired and not other_way.paired
    assert one_way.value * other_way.value == pytest.approx(1.0)  # one comparison, whichever way it is read
    assert ratio(ort, eager).paired  # the two that were timed together still are
    assert unexplained_nulls(ort) == [] and unexplained_nulls(ov) == []
