"""Issue 39's smaller items, each for real where it can be: a worker the harness kills on SIGTERM (a real worker,
a real SIGKILL), env.json's incomplete reason kept whole, a real ultralytics checkpoint saved with pickle protocol 4.
(The console's one-line unknown command, its usage names and a closed stdout: tests/test_console.py.)"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.core.results_dir import read_env, write_env
from harness.diagnosis.classify import classify
from harness.execute import isolate
from harness.execute.isolate import kill_live_workers, run_export
from harness.pytest_plugin.plugin import INCOMPLETE_KEY, mark_run_end
from harness.yolo.models import WeightsError, check_checkpoint
from tests.reliability_helpers import FAULTS, children, kill_quietly, wait_for
from tests.test_reliability_smaller import _importable_tests, _request  # noqa: F401 (a fixture)

REPO = Path(__file__).resolve().parent.parent
STANDIN = REPO / "weights" / "standin" / "yolo26n-detect.pt"


@pytest.mark.process
def test_a_worker_the_harness_kills_on_sigterm_is_not_killed_from_outside(tmp_path, _importable_tests):  # noqa: F811
    """Was: the progress line said the worker was "killed by SIGKILL from outside" when the harness killed it, as
    the run's SIGTERM handler does (harness.pytest_plugin.plugin._interrupt_on_sigterm)."""
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
        kill_live_workers("the run was interrupted by SIGTERM")  # what the SIGTERM handler calls
        t.join(30)
    finally:
        for w in workers:
            kill_quietly(w)
    o = got["o"]
    assert (o.status, o.signal) == ("crashed", "SIGKILL"), o
    assert "from outside" not in o.message and "killed by the harness" in o.message, o.message
    assert "interrupted by SIGTERM" in o.message
    assert classify(o.message, signal=o.signal, status=o.status)["class"] == "killed"
    assert not isolate._KILLED_BY_RUN, "the note is used once"
    # the other way (a kill from outside) keeps its wording: tests/test_reliability_smaller.py -k from_outside


def test_the_incomplete_reason_is_kept_whole_in_env_json(tmp_path):
    """Was: `incomplete.reason` cut at 300 characters, mid-sentence."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_env(run_dir, {"run_id": "r"})
    stopped = (
        "cannot append to " + "/very/long/path" * 40 + "/cells.jsonl: [Errno 28] No space left on device"
    )
    assert len(stopped) > 300
    session = SimpleNamespace(
        run_config=SimpleNamespace(run_dir=run_dir),
        stopped=stopped,
        planned_ids=lambda: {"a", "b"},
        planned=[],
    )
    mark_run_end(session, pytest.ExitCode.INTERRUPTED, SimpleNamespace(write_line=print))
    reason = read_env(run_dir)[INCOMPLETE_KEY]["reason"]
    assert reason == f"stopped: {stopped}" and reason.endswith("No space left on device")
    # the other way: a run that ended whole carries no mark
    session.stopped = None
    mark_run_end(session, pytest.ExitCode.OK, SimpleNamespace(write_line=print))
    assert INCOMPLETE_KEY not in read_env(run_dir)


@pytest.fixture(scope="module")
def protocol4(tmp_path_factory) -> Path:
    """The committed stand-in (a real ultralytics checkpoint) saved again with pickle protocol 4."""
    import torch

    ckpt = torch.load(STANDIN, map_location="cpu", weights_only=False)  # our own committed file
    path = tmp_path_factory.mktemp("p4") / "yolo26n.pt"
    torch.save(ckpt, path, pickle_protocol=4)
    with open(path, "rb") as f:
        assert f.read(2) == b"PK"  # a torch.save archive, as any checkpoint
    return path


def test_a_protocol_4_checkpoint_is_a_checkpoint_under_allow_unsafe_weights(protocol4, monkeypatch):
    """Was: refused as "not a PyTorch checkpoint" even with --allow-unsafe-weights (torch's opcode reader knows
    protocol 2 only)."""
    check_checkpoint(protocol4, allow_unsafe=True)
    # without --allow-unsafe-weights it is refused for what it is (needs full unpickling), not as "not a checkpoint"
    with pytest.raises(WeightsError) as refused:
        check_checkpoint(protocol4, allow_unsafe=False)
    assert "not a PyTorch checkpoint" not in str(refused.value), refused.value
    assert "--allow-unsafe-weights" in str(refused.value)


def test_a_text_file_is_still_not_a_checkpoint_with_allow_unsafe_weights(tmp_path):
    """The other way: the protocol-4 reader does not take any file for a checkpoint."""
    bad = tmp_path / "yolo26n.pt"
    bad.write_text("these are not weights\n")
    with pytest.raises(WeightsError, match="not a PyTorch checkpoint"):
        check_checkpoint(bad, allow_unsafe=True)
