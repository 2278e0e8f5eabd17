"""Inputs validated before any work: safe run ids, every numeric option in range, weights files that are
loadable checkpoints, and a pickle payload in a .pt file that never runs."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core import run_id
from harness.yolo.models import ModelSource, WeightsError, check_checkpoint, load_yolo, materialize
from tests.conftest import REPO


def _pytest_suites(tmp_path: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """The suite on `args`, with results, cache and reports inside tmp_path/work (absent unless work starts)."""
    work = tmp_path / "work"
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "suites/",
            "--benchmark-only",
            "--results-dir",
            str(work / "results"),
            "--cache-dir",
            str(work / "cache"),
            "--reports-dir",
            str(work / "reports"),
            *args,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _one_error(p: subprocess.CompletedProcess) -> str:
    errors = [line for line in p.stderr.splitlines() if line.startswith("ERROR:")]
    assert p.returncode == 4 and len(errors) == 1, p.stdout[-2000:] + p.stderr[-2000:]
    return errors[0]


BAD = [
    (["--run-id", "../escaped"], "--run-id '../escaped': use letters, digits"),
    (["--run-id", "/tmp/abs"], "--run-id '/tmp/abs'"),
    (["--run-id", ".."], "--run-id '..'"),
    (["--run-id", "a/b"], "--run-id 'a/b'"),
    (["--run-id", ".hidden"], "--run-id '.hidden'"),
    (["--run-id", "a..b"], "--run-id 'a..b'"),
    (["--shapes", "99999"], "--shapes: 99999x99999 is outside 32..4096 pixels per side (--force-shapes"),
    (["--shapes", "640x16"], "--shapes: 640x16 is outside 32..4096"),
    (["--batches", "5000"], "--batches: 5000 is above 1024"),
    (["--export-timeout", "0"], "--export-timeout: 0.0 is out of range (must be > 0 and <= 604800 s)"),
    (["--export-timeout", "-5"], "--export-timeout: -5.0 is out of range"),
    (["--export-timeout", "nan"], "--export-timeout: nan is out of range"),
    (["--max-time", "-1"], "--max-time: -1.0 is out of range (must be > 0 and <= 86400 s)"),
    (["--max-time", "inf"], "--max-time: inf is out of range"),
    (["--export-memory-gb", "-1"], "--export-memory-gb: -1.0 is out of range (must be > 0 and"),
    (["--export-memory-gb", "0"], "--export-memory-gb: 0.0 is out of range"),
    (["--warmup", "-1"], "--warmup: -1 is out of range (must be >= 0 and <= 100000 rounds)"),
    (["--rounds", "0"], "--rounds: 0 is out of range (must be >= 1 and"),
    (["--timing-episodes", "0"], "--timing-episodes: 0 is out of range (must be >= 1 and <= 20)"),
    (["--malloc", "jemalloc"], "--malloc: unknown 'jemalloc'; valid: retain, system"),
    (["--seed", "-1"], "--seed: -1 is out of range (must be >= 0 and <= 4294967295)"),
    (["--camera-fps", "0"], "--camera-fps: 0.0 is out of range (must be > 0"),
    (["--min-shape", "8"], "--min-shape: 8 is out of range (must be >= 32"),
    (["--accuracy-floor", "int8=2"], "--accuracy-floor 'int8=2': expected PRECISION=SHARE"),
    # issue 39: text and huge values of numeric options, once argparse's usage block, are one line too
    (["--seed", "abc"], "--seed: 'abc' is not a whole number"),
    (["--camera-fps", "inf"], "--camera-fps: inf is out of range (must be > 0 and <= 10000 fps)"),
    (["--memory-cap", "1e400"], "--memory-cap: inf is out of range"),
    (["--server-bound-ms", "nan"], "--server-bound-ms: nan is out of range"),
    (["--rounds", "1.5"], "--rounds: '1.5' is not a whole number"),
]


#: the fast tier's cases (a path rule, a float range); the others
#: are the same check on other options, each a suite process of its own, and are slow
FAST_BAD = {"--run-id ../escaped", "--export-timeout nan"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(a, m, id=" ".join(a), marks=[] if " ".join(a) in FAST_BAD else [pytest.mark.slow])
        for a, m in BAD
    ],
)
@pytest.mark.process
def test_bad_value_is_one_error_line_before_any_work(tmp_path, args, message):
    error = _one_error(_pytest_suites(tmp_path, *args))
    assert message in error, error
    assert not (tmp_path / "work").exists(), "no directory is created on bad input"


@pytest.mark.slow
def test_the_limits_themselves_and_forced_shapes_are_accepted(tmp_path):
    """The other way: boundary values pass validation (collection only: no cell runs, nothing is written)."""
    p = _pytest_suites(
        tmp_path,
        "--collect-only",
        "-q",
        "--run-id",
        "nightly_2026-11-22.a",
        "--shapes",
        "32,4096,99999",
        "--force-shapes",
        "--batches",
        "1,1024",
        "--export-timeout",
        "0.5",
        "--max-time",
        "0.01",
        "--export-memory-gb",
        "0.5",
        "--warmup",
        "0",
        "--rounds",
        "1",
        "--seed",
        "4294967295",
        "--sizes",
        "n",
        "--backends",
        "onnxruntime",
    )
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "99999x99999" in p.stdout and "4096x4096" in p.stdout and "32x32" in p.stdout


def test_run_id_rule_and_default():
    for good in ("a", "20261122T020000Z-host", "v1.2_rc-3", "A" * run_id.MAX_LENGTH):
        assert run_id.check(good) == good
    for bad in ("", ".", "..", "../x", "x/..", "a/b", "/abs", ".x", "a..b", "a b", "a\\b", "A" * 129, "é"):
        with pytest.raises(run_id.RunIdError):
            run_id.check(bad)
    assert run_id.check(run_id.default())


# -- weights -------------------------------------------------------------------------------------------------
class Payload:
    """Unpickling this creates `marker`: what a hostile .pt file could do with any code at all."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def payload_weights(tmp_path: Path) -> tuple[Path, Path]:
    """tmp_path/w/yolo26n.pt carrying the payload, and the marker it would create."""
    import torch

    w = tmp_path / "w"
    w.mkdir()
    marker = tmp_path / "payload-ran"
    torch.save({"model": Payload(marker), "train_args": {}}, w / "yolo26n.pt")
    return w / "yolo26n.pt", marker


def test_the_payload_is_live_under_a_full_unpickle(tmp_path):
    """The other way for the tests below: unpickled in full, the file does run its code."""
    import torch

    pt, marker = payload_weights(tmp_path)
    torch.load(pt, weights_only=False)
    assert marker.exists()


@pytest.mark.process
def test_pickle_payload_weights_never_run_and_are_one_error_line(tmp_path):
    pt, marker = payload_weights(tmp_path)
    error = _one_error(_pytest_suites(tmp_path, "--weights-dir", str(pt.parent), "--sizes", "n"))
    assert f"weights file {pt} needs full unpickling (io.open)" in error and "--allow-unsafe-weights" in error
    assert not marker.exists() and not (tmp_path / "work").exists()


@pytest.mark.process
def test_every_load_path_refuses_the_payload(tmp_path):
    """load_yolo is what the export workers, the torch backends and the parity references load through."""
    pt, marker = payload_weights(tmp_path)
    with pytest.raises(WeightsError, match="needs full unpickling"):
        check_checkpoint(pt, allow_unsafe=False)
    with pytest.raises(WeightsError, match="needs full unpickling"):
        load_yolo(pt)
    p = subprocess.run(  # a fresh process, as a worker is: the policy comes from `import harness`
        [sys.executable, "-c", f"from harness.yolo.models import load_yolo; load_yolo({str(pt)!r})"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode != 0 and "WeightsError" in p.stderr and "needs full unpickling" in p.stderr
    assert not marker.exists()


@pytest.mark.slow
def test_allow_unsafe_weights_lets_the_file_through_the_check_without_loading_it(tmp_path):
    pt, marker = payload_weights(tmp_path)
    p = _pytest_suites(
        tmp_path,
        "--weights-dir",
        str(pt.parent),
        "--sizes",
        "n",
        "--allow-unsafe-weights",
        "--collect-only",
        "--backends",
        "torch-eager",  # the weights are checked before any backend: probing ExecuTorch's would add ~8 s of imports
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert not marker.exists()  # the check reads the archive's opcodes; nothing is unpickled before work


@pytest.mark.slow
def test_text_file_named_like_weights_is_one_error_line(tmp_path):
    w = tmp_path / "w"
    w.mkdir()
    (w / "yolo26n.pt").write_text("these are not weights\n")
    error = _one_error(_pytest_suites(tmp_path, "--weights-dir", str(w), "--sizes", "n"))
    assert f"weights file {w / 'yolo26n.pt'} is not a PyTorch checkpoint" in error


@pytest.mark.slow
def test_a_real_checkpoint_passes_the_safe_check_and_loads(tmp_path, cache_dir):
    """The other way: an ultralytics checkpoint (the seeded random init) loads with weights_only=True."""
    mat = materialize(ModelSource("n", "detect"), cache_dir)
    w = tmp_path / "w"
    w.mkdir()
    shutil.copy(mat.checkpoint, w / "yolo26n.pt")
    check_checkpoint(w / "yolo26n.pt", allow_unsafe=False)
    assert load_yolo(w / "yolo26n.pt").task == "detect"
    p = _pytest_suites(
        tmp_path,
        "--weights-dir",
        str(w),
        "--sizes",
        "n",
        "--tasks",
        "detect",
        "--collect-only",
        "-q",
        "--backends",
        "torch-eager",  # the weights are checked before any backend: probing ExecuTorch's would add ~8 s of imports
    )
    assert p.returncode == 0, p.stderr[-2000:]


def test_data_option_problems_are_one_line_each(tmp_path):
    from harness.pytest_plugin.options import dataset_problem

    assert dataset_problem(tmp_path / "none.yaml") == "no such file"
    bad = tmp_path / "bad.yaml"
    bad.write_text("val: [unclosed\n")
    assert dataset_problem(bad).startswith("not readable YAML")
    bad.write_text("just: text\n")
    assert "needs `val` and `names`" in dataset_problem(bad)
    (tmp_path / "images" / "val").mkdir(parents=True)
    bad.write_text("path: .\nval: images/val\nnames: {0: a}\n")
    assert dataset_problem(bad) == "its val split has no images"
    (tmp_path / "images" / "val" / "a.jpg").write_bytes(b"x")
    assert dataset_problem(bad) is None
