"""A cache hit runs only what the export recorded (issue 39, item 1).

Adding `b.xml` and `b.bin` (links to a model outside the cache) to a cached OpenVINO IR directory, without touching
meta.json, was a cache hit, and the loader took `next(dir.glob("*.xml"))`: a model nobody exported was timed. Now the
entry is a miss when it holds files it did not record, and the backend opens the names it recorded at export.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.backends._shared.artifact_files import ArtifactFileError, only_file, recorded_file
from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.execute.export_cache import ExportCache, export_limits
from harness.execute.isolate import ExportOutcome

IR = "model_openvino_model"


def _ov_entry(cache: ExportCache, name: str = "ov") -> Path:
    entry = cache.entry_dir(name, "0" * 64)
    with cache.locked(entry, 10):
        staging = cache.staging_dir(entry)
        art = staging / IR
        art.mkdir()
        (art / "model.xml").write_text("<net/>")
        (art / "model.bin").write_bytes(b"\0" * 4096)
        (staging / "export-request.json").write_text("{}")  # the worker's bookkeeping, not part of the export
        cache.store(
            entry, staging, ExportOutcome("ok", 1.0, artifact=str(art), wall_s=1.0), export_limits(None)
        )
    return entry


def _lookup(cache: ExportCache, entry: Path):
    with cache.locked(entry, 10):
        return cache.lookup(entry, export_limits(None))


def test_an_ir_directory_with_linked_unrecorded_files_is_a_miss(tmp_path):
    cache = ExportCache(tmp_path / "cache")
    entry = _ov_entry(cache)
    hit = _lookup(cache, entry)  # the other way: the entry as exported (bookkeeping file included) is a hit
    assert hit.outcome is not None and hit.miss is None
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "b.xml").write_text("<net name='nobody exported me'/>")
    (outside / "b.bin").write_bytes(b"\1" * 64)
    for name in ("b.xml", "b.bin"):
        os.symlink(outside / name, entry / IR / name)
    found = _lookup(cache, entry)
    assert found.outcome is None, "taken as a hit with files meta.json does not record"
    assert "did not record" in found.miss and f"{IR}/b.bin" in found.miss and f"{IR}/b.xml" in found.miss


@pytest.mark.parametrize("kind", ["file", "dir_link", "fifo"])
def test_any_unrecorded_entry_file_is_a_miss(tmp_path, kind):
    cache = ExportCache(tmp_path / "cache")
    entry = _ov_entry(cache)
    if kind == "file":
        (entry / IR / "extra.xml").write_text("<net/>")
    elif kind == "dir_link":
        os.symlink(tmp_path, entry / IR / "sub")
    else:
        os.mkfifo(entry / "extra")
    found = _lookup(cache, entry)
    assert found.outcome is None and "did not record" in found.miss


def test_a_recorded_file_replaced_by_a_link_out_is_a_miss(tmp_path):
    cache = ExportCache(tmp_path / "cache")
    entry = _ov_entry(cache)
    copy = tmp_path / "model.xml"
    copy.write_text("<net/>")  # the same bytes: only where it lies refuses it
    (entry / IR / "model.xml").unlink()
    os.symlink(copy, entry / IR / "model.xml")
    found = _lookup(cache, entry)
    assert found.outcome is None and "model.xml" in found.miss


def test_recorded_file_takes_only_plain_names_of_regular_files(tmp_path):
    (tmp_path / "a.xml").write_text("x")
    assert recorded_file(tmp_path, {"ir_xml": "a.xml"}, "ir_xml") == tmp_path / "a.xml"
    for bad in (None, "", "..", "../a.xml", "/etc/passwd", "sub/a.xml", "missing.xml"):
        with pytest.raises(ArtifactFileError):
            recorded_file(tmp_path, {"ir_xml": bad}, "ir_xml")
    (tmp_path / "b.xml").write_text("x")
    with pytest.raises(ArtifactFileError, match="2 files"):
        only_file(tmp_path, "*.xml")


def _save_ir(path: Path, name: str, size: int) -> None:
    import openvino as ov
    import openvino.opset13 as ops

    x = ops.parameter([1, size], ov.Type.f32, name=name)
    ov.save_model(ov.Model([ops.relu(x)], [x], name), str(path), compress_to_fp16=False)


def test_openvino_loads_the_recorded_ir_not_another_xml(tmp_path):
    pytest.importorskip("openvino")
    from harness.backends.openvino import OpenVino, ir_files

    ir = tmp_path / IR
    ir.mkdir()
    _save_ir(ir / "model.xml", "recorded", 3)
    info = ir_files(ir)
    assert info == {"ir_xml": "model.xml", "ir_bin": "model.bin"}
    _save_ir(ir / "b.xml", "outsider", 5)  # added after the export, sorted first by name
    cell = Cell("n", "detect", "e2e", "openvino", "cpu", Shape(160, 160))
    runner = OpenVino().load(ir, cell, info)
    assert runner.compiled.inputs[0].get_any_name() == "recorded"
    # the recorded model gone, another .xml beside it: refused, never the other one (the loader once took it)
    (ir / "model.xml").unlink()
    with pytest.raises(ArtifactFileError):
        OpenVino().load(ir, cell, info)
