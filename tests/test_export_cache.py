"""The export cache can be trusted: corrupt, copied, shared and limit-bound entries, on real yolo26n exports.

Each test reproduces a failure the export cache had (issue 12): a truncated cached .onnx read as `load_failed` and
then "remedy raw-head: ok"; a copied cache ran the original's artifacts; two runs sharing a cache exported twice
and could read each other's half-written files; a failure under --export-memory-gb was replayed without it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.record import FAILED_STATUSES
from harness.execute.export_cache import (
    LOCKS,
    META,
    STAGING,
    ExportCache,
    content_hashes,
    digest_of,
    export_limits,
)
from harness.execute.isolate import ExportOutcome
from harness.execute.runner import CellRunner, RunConfig
from tests.conftest import LEAN_RUN, REPO

CELL = Cell("n", "detect", "e2e", "onnxruntime", "cpu", Shape(160, 160))


def _runner(results: Path, cache: Path, run_id: str, messages: list | None = None, **kw) -> CellRunner:
    cfg = RunConfig(
        run_id=run_id,
        results_dir=results,
        cache_dir=cache,
        max_time_s=0.1,
        block_s=0.02,
        warmup=1,
        rounds=3,
        **{**LEAN_RUN, **kw},  # these tests read the cache and the records' status
    )
    return CellRunner(cfg, progress=(messages.append if messages is not None else lambda m: None))


def _entries(cache: Path) -> list[Path]:
    root = cache / "exports"
    return sorted(p for p in root.iterdir() if p.name not in (LOCKS, STAGING)) if root.is_dir() else []


def _onnx(cache: Path) -> Path:
    (entry,) = _entries(cache)
    (onnx,) = entry.glob("*.onnx")
    return onnx


def _with_checkpoint(golden: Path, cache: Path) -> Path:
    """A cache holding golden's model checkpoints but no exports (each test pays only for its own export); yolo26n
    detect runs on the committed stand-in, so there may be none."""
    if (golden / "models").is_dir():
        shutil.copytree(golden / "models", cache / "models")
    else:
        cache.mkdir(parents=True, exist_ok=True)
    return cache


@pytest.fixture(scope="module")
def golden(tmp_path_factory) -> Path:
    """A cache with one real export (yolo26n detect e2e, ONNX Runtime, 160x160) that the tests copy."""
    cache = tmp_path_factory.mktemp("golden-cache")
    rec = _runner(tmp_path_factory.mktemp("golden-results"), cache, "golden").run_cell(CELL)
    assert rec.status == "ok" and rec.cache_hit is False, rec.reason
    return cache


# ---- real exports ----------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.export
def test_truncated_cached_artifact_is_reexported_not_remedied(golden, tmp_path):
    cache = tmp_path / "cache"
    shutil.copytree(golden, cache)  # the entry of a real export, as a finished run leaves it
    onnx = _onnx(cache)
    with open(onnx, "r+b") as f:  # what a full disk or a killed copy leaves
        f.truncate(onnx.stat().st_size // 2)
    messages: list[str] = []
    recs = _runner(tmp_path, cache, "second", messages).run_cell_all(CELL)
    assert [r.cell_id for r in recs] == [CELL.id], "no remedy ran: the corrupt entry is not a finding"
    (rec,) = recs
    assert rec.status == "ok", rec.reason
    assert rec.cache_hit is False
    assert "content hash mismatch" in rec.export_origin and onnx.name in rec.export_origin
    assert any("content hash mismatch" in m and "exporting again" in m for m in messages), messages
    assert "content hash mismatch" in (tmp_path / "second" / rec.log).read_text()
    assert onnx.stat().st_size > 1_000_000  # the entry holds the fresh export again


@pytest.mark.slow
@pytest.mark.export
def test_copied_cache_dir_runs_its_own_artifacts(golden, tmp_path):
    first = tmp_path / "copy1"
    shutil.copytree(golden, first)
    second = tmp_path / "copy2"
    shutil.copytree(first, second)
    shutil.rmtree(first)  # the copy it was made from is gone: only its own files can serve it
    meta = (_entries(second)[0] / META).read_text()
    assert str(golden) not in meta and str(first) not in meta, "paths are stored relative to the entry"
    rec = _runner(tmp_path, second, "copied").run_cell(CELL)
    assert rec.status == "ok" and rec.cache_hit is True, rec.reason
    assert Path(rec.artifact).resolve().is_relative_to(second.resolve()), rec.artifact
    assert len(_entries(second)) == 1


def _corrupt_undetectably(cache: Path) -> Path:
    """Truncate the cached .onnx and record the truncated file's hash as if it had been exported so (a
    corruption the content hash cannot see); returns the entry."""
    onnx = _onnx(cache)
    with open(onnx, "r+b") as f:
        f.truncate(onnx.stat().st_size // 2)
    entry = onnx.parent
    meta = json.loads((entry / META).read_text())
    meta["files"] = content_hashes(entry)
    (entry / META).write_text(json.dumps(meta))
    return entry


@pytest.mark.slow
@pytest.mark.export
@pytest.mark.parametrize(("stage", "memory_rounds"), [("probe", 3), ("load", 0)])
def test_cached_artifact_that_fails_to_load_is_reexported_once_before_any_remedy(
    golden, tmp_path, stage, memory_rounds
):
    cache = tmp_path / "cache"
    shutil.copytree(golden, cache)
    _corrupt_undetectably(cache)
    messages: list[str] = []
    recs = _runner(tmp_path, cache, "r", messages, memory_rounds=memory_rounds).run_cell_all(CELL)
    assert [r.cell_id for r in recs] == [CELL.id], "no remedy ran"
    (rec,) = recs
    assert rec.status == "ok", rec.reason
    what = "failed to load" if stage == "load" else "failed its probe"
    assert f"the cached artifact {what}" in rec.reason and "re-exported before any remedy" in rec.reason
    assert rec.cache_hit is False and "re-exported before any remedy" in rec.export_origin
    assert sum("exporting (onnxruntime)" in m for m in messages) == 1, messages


@pytest.mark.slow
@pytest.mark.export
@pytest.mark.parametrize("noted_content", ["this", "other"])
def test_cached_artifact_known_to_fail_fresh_is_not_reexported(golden, tmp_path, noted_content):
    """The other way round: a load failure of content whose fresh export failed the same way is genuine, and is
    not exported again; a note about other content (the entry was replaced since) does not count."""
    cache = tmp_path / "cache"
    shutil.copytree(golden, cache)
    entry = _corrupt_undetectably(cache)
    meta = json.loads((entry / META).read_text())
    digest = digest_of(meta["files"]) if noted_content == "this" else "0" * 64
    meta["fresh_failure"] = {
        "stage": "probe",
        "reason": "as exported",
        "run": "earlier",
        "content_sha256": digest,
    }
    (entry / META).write_text(json.dumps(meta))
    messages: list[str] = []
    rec = _runner(tmp_path, cache, "r", messages, remedies=False).run_cell(CELL)
    if noted_content == "this":
        assert rec.status in FAILED_STATUSES and rec.cache_hit is True, rec.reason
        assert rec.failure["stage"] == "run"  # its probe failed, and the failure stands
        assert not any("exporting" in m for m in messages), messages
    else:
        assert rec.status == "ok" and rec.cache_hit is False, rec.reason
        assert sum("exporting (onnxruntime)" in m for m in messages) == 1, messages


@pytest.mark.slow
@pytest.mark.export
def test_fresh_export_that_fails_to_load_is_noted_in_its_entry(golden, tmp_path, monkeypatch):
    """A fresh export whose load fails records that in meta.json, so later runs do not re-export it."""
    from harness.backends.onnxruntime import OnnxRuntime

    def refuse(self, artifact, cell, export_info):
        raise RuntimeError("this runtime refuses the artifact")

    monkeypatch.setattr(OnnxRuntime, "load", refuse)
    cache = _with_checkpoint(golden, tmp_path / "cache")
    kw = {"memory_rounds": 0, "isolate_first_run": False, "remedies": False}
    rec = _runner(tmp_path, cache, "fresh", **kw).run_cell(CELL)
    assert rec.status == "load_failed" and rec.cache_hit is False
    meta = json.loads((_entries(cache)[0] / META).read_text())
    assert meta["fresh_failure"]["stage"] == "load" and "refuses" in meta["fresh_failure"]["reason"]
    messages: list[str] = []
    again = _runner(tmp_path, cache, "later", messages, **kw).run_cell(CELL)
    assert again.status == "load_failed" and again.cache_hit is True
    assert not any("exporting" in m for m in messages), messages


_RACER = """
import json, sys, time
from pathlib import Path
from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.execute.runner import CellRunner, RunConfig

results, cache, run_id, go = sys.argv[1:5]
messages = []
cfg = RunConfig(run_id=run_id, results_dir=Path(results), cache_dir=Path(cache), max_time_s=0.1, block_s=0.02, warmup=1,
                rounds=3, accuracy=False, e2e=False, scenarios="none")
runner = CellRunner(cfg, progress=messages.append)
cell = Cell("n", "detect", "e2e", "onnxruntime", "cpu", Shape(160, 160))
runner.materialize(cell)
Path(results, run_id + ".ready").touch()
while not Path(go).exists():
    time.sleep(0.005)
rec = runner.run_cell(cell)
print(json.dumps({"status": rec.status, "reason": rec.reason, "cache_hit": rec.cache_hit,
                  "artifact": rec.artifact, "messages": messages}))
"""


@pytest.mark.slow
@pytest.mark.export
def test_two_processes_sharing_a_cache_export_an_entry_once(golden, tmp_path):
    cache = _with_checkpoint(golden, tmp_path / "cache")
    go = tmp_path / "go"
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _RACER, str(tmp_path), str(cache), run_id, str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for run_id in ("a", "b")
    ]
    deadline = time.monotonic() + 300
    while not all((tmp_path / f"{r}.ready").exists() for r in ("a", "b")):
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs), "racers did not start"
        time.sleep(0.05)
    go.touch()  # both look the entry up at the same moment
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
        outs.append(json.loads(out.strip().splitlines()[-1]))
    assert [o["status"] for o in outs] == ["ok", "ok"], [o["reason"] for o in outs]
    assert sorted(o["cache_hit"] for o in outs) == [False, True], "one exported, the other found its export"
    exports = [m for o in outs for m in o["messages"] if "exporting (onnxruntime)" in m]
    assert len(exports) == 1, exports
    waiter = next(o for o in outs if o["cache_hit"])
    assert any("waiting for another process's export" in m for m in waiter["messages"]), waiter["messages"]
    assert len(_entries(cache)) == 1
    assert not any((cache / "exports" / STAGING).glob("*")), "no staging debris"


@pytest.mark.slow
@pytest.mark.export
def test_failure_under_a_memory_limit_is_not_replayed_without_it(golden, tmp_path):
    # 0.5 GB: this export fails with std::bad_alloc (export_failed), which the old cache stored and replayed;
    # 0.3 GB kills it before it starts (crashed), which was never cached
    cache = _with_checkpoint(golden, tmp_path / "cache")
    limited = _runner(tmp_path, cache, "limited", export_memory_gb=0.5, remedies=False).run_cell(CELL)
    assert limited.status in ("export_failed", "crashed"), limited.reason
    messages: list[str] = []
    rec = _runner(tmp_path, cache, "unlimited", messages).run_cell(CELL)
    assert rec.status == "ok" and rec.cache_hit is False, rec.reason


# ---- the cache's rules on small files --------------------------------------------------------------------------


def _failed(message: str, exception_type: str = "builtins.RuntimeError") -> ExportOutcome:
    return ExportOutcome("export_failed", 1.0, message=message, exception_type=exception_type, wall_s=1.0)


def _store(cache: ExportCache, name: str, outcome: ExportOutcome, limits: dict) -> tuple[Path, ExportOutcome]:
    entry = cache.entry_dir(name, "0" * 64)
    with cache.locked(entry, 10):
        staging = cache.staging_dir(entry)
        if outcome.status == "ok":
            art = staging / "model_openvino_model"  # a directory artifact, as OpenVINO's IR is
            art.mkdir()
            (art / "model.xml").write_text("<net/>")
            (art / "model.bin").write_bytes(b"\0" * 4096)
            outcome = ExportOutcome("ok", 1.0, artifact=str(art), wall_s=1.0)
        return entry, cache.store(entry, staging, outcome, limits)


@pytest.mark.parametrize(
    ("outcome", "stored_under", "replayed_to", "replayed"),
    [
        # a failure that is the exporter's answer is replayed to a run with the same limits...
        (_failed("Unsupported ONNX opset 99 for op Foo"), None, None, True),
        (_failed("Unsupported ONNX opset 99 for op Foo"), 0.3, 0.3, True),
        # ...but not to a run with other limits: under --export-memory-gb anything may have failed for memory
        (_failed("Unsupported ONNX opset 99 for op Foo"), 0.3, None, False),
        (_failed("failed to map segment from shared object", "builtins.ImportError"), 0.3, None, False),
        # I/O errors, out-of-memory failures, timeouts and crashes are never cached
        (
            _failed("[Errno 2] No such file or directory: 'x.onnx'", "builtins.FileNotFoundError"),
            None,
            None,
            False,
        ),
        (_failed("could not save: No space left on device"), None, None, False),
        (_failed("", "builtins.MemoryError"), None, None, False),
        (
            ExportOutcome("timeout", None, message="export exceeded the 60 s timeout", wall_s=60),
            None,
            None,
            False,
        ),
        (
            ExportOutcome("crashed", None, message="killed by SIGSEGV", signal="SIGSEGV", wall_s=1),
            None,
            None,
            False,
        ),
    ],
)
def test_only_deterministic_failures_are_replayed_and_only_under_their_limits(
    tmp_path, outcome, stored_under, replayed_to, replayed
):
    cache = ExportCache(tmp_path)
    entry, _ = _store(cache, "cell", outcome, export_limits(stored_under))
    with cache.locked(entry, 10):
        found = cache.lookup(entry, export_limits(replayed_to))
    assert (found.outcome is not None) == replayed, found
    if replayed:
        assert found.outcome.status == outcome.status and found.outcome.message == outcome.message


def test_a_changed_or_missing_file_of_a_directory_artifact_is_a_miss(tmp_path):
    cache = ExportCache(tmp_path)
    entry, stored = _store(cache, "ov", ExportOutcome("ok", 1.0), export_limits(None))
    assert Path(stored.artifact) == entry / "model_openvino_model" and not list(
        (tmp_path / "exports" / STAGING).iterdir()
    )
    with cache.locked(entry, 10):
        assert cache.lookup(entry, export_limits(None)).outcome.artifact == stored.artifact
    (entry / "model_openvino_model" / "model.bin").write_bytes(b"\0" * 100)
    with cache.locked(entry, 10):
        miss = cache.lookup(entry, export_limits(None))
    assert miss.outcome is None and "model_openvino_model/model.bin content hash mismatch" in miss.miss
    (entry / "model_openvino_model" / "model.xml").unlink()
    with cache.locked(entry, 10):
        assert "model.xml missing" in cache.lookup(entry, export_limits(None)).miss


def test_a_killed_export_leaves_no_entry_and_its_debris_is_removed(tmp_path):
    cache = ExportCache(tmp_path)
    entry = cache.entry_dir("cell", "1" * 64)
    with cache.locked(entry, 10):
        staging = cache.staging_dir(entry)
        (staging / "half.onnx").write_bytes(b"\x08\x07")  # the export process was killed here
    with cache.locked(entry, 10):  # the next holder of the lock
        assert cache.lookup(entry, export_limits(None)).outcome is None
        assert not entry.exists() and not staging.exists()


def test_an_entry_of_the_old_cache_format_is_a_miss(tmp_path):
    cache = ExportCache(tmp_path)
    entry = cache.entry_dir("cell", "2" * 64)
    entry.mkdir(parents=True)
    (entry / "model.onnx").write_bytes(b"onnx")
    old = {"status": "ok", "export_s": 1.0, "artifact": str(tmp_path / "elsewhere" / "model.onnx")}
    (entry / META).write_text(json.dumps(old))
    with cache.locked(entry, 10):
        found = cache.lookup(entry, export_limits(None))
    assert found.outcome is None and "older cache format" in found.miss


def test_a_cuda_graph_variant_shares_its_base_backends_export_entry():
    from harness import backends
    from harness.core.axes import Shape
    from harness.core.cell import Cell
    from harness.execute.exporting import cache_identity

    def cell(backend):
        return Cell(
            size="n",
            task="detect",
            head="e2e",
            backend=backend,
            device="cuda",
            shape=Shape(640, 640),
            batch=1,
            precision="fp32",
        )

    base = cache_identity(backends.get("aoti"), cell("aoti"), "w" * 64, {})
    variant = cache_identity(backends.get("aoti-cudagraph"), cell("aoti-cudagraph"), "w" * 64, {})
    assert variant == base  # one compile serves both (AOTInductor's takes minutes)
    assert base[1].startswith("yolo26n-detect-e2e-aoti-cuda-")
    # another backend, or other export options, is another entry
    assert cache_identity(backends.get("torch-compile"), cell("torch-compile"), "w" * 64, {}) != base
    assert cache_identity(backends.get("aoti"), cell("aoti"), "w" * 64, {"remedy": "backbone-only"}) != base
