"""--data that is not a dataset YAML is one error line before any work, naming what it is: an image (PNG bytes)
is not text, a directory or a FIFO is that, never "no such file". Before: a PNG given as --data ended the suite in
37 lines of INTERNALERROR (UnicodeDecodeError), exit 3; a directory or a FIFO was "no such file"."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.pytest_plugin.options import dataset_problem
from tests.test_input_validation import _one_error, _pytest_suites

BUS = Path(__import__("ultralytics").__file__).parent / "assets" / "bus.jpg"


def _png(path: Path) -> Path:
    """bus.jpg (ultralytics' own image) written as a real PNG."""
    import cv2

    ok, data = cv2.imencode(".png", cv2.imread(str(BUS)))
    assert ok
    path.write_bytes(data.tobytes())
    return path


@pytest.mark.process
def test_a_png_as_data_is_one_error_line_before_any_work(tmp_path):
    png = _png(tmp_path / "data.yaml")
    p = _pytest_suites(tmp_path, "--data", str(png), "--backends", "torch-eager", "--sizes", "n")
    error = _one_error(p)  # exit status 4, one ERROR line
    assert f"--data {png}: not a text file (byte 0x89 at offset 0 is not UTF-8): not a dataset YAML" in error
    assert "INTERNALERROR" not in p.stdout + p.stderr
    assert not (tmp_path / "work").exists(), "no directory is created on bad input"


def test_what_data_is_when_it_is_no_dataset_yaml(tmp_path):
    (tmp_path / "dir.yaml").mkdir()
    assert dataset_problem(tmp_path / "dir.yaml") == "is a directory, not a file"
    os.mkfifo(tmp_path / "fifo.yaml")
    assert dataset_problem(tmp_path / "fifo.yaml") == "is a FIFO (named pipe), not a regular file"
    (tmp_path / "link.yaml").symlink_to(tmp_path / "gone.yaml")
    assert dataset_problem(tmp_path / "link.yaml") == "is a symbolic link to a missing target"
    assert dataset_problem(tmp_path / "none.yaml") == "no such file"
    assert dataset_problem(_png(tmp_path / "bus.png")).startswith("not a text file (byte 0x89 at offset 0")
    odd = tmp_path / "odd.yaml"
    odd.write_text("val: 5\nnames: {0: a}\n")  # a split that is no path
    assert dataset_problem(odd).startswith("its val split cannot be read")
    # the other way: a dataset YAML whose val split holds an image is accepted
    (tmp_path / "images" / "val").mkdir(parents=True)
    _png(tmp_path / "images" / "val" / "bus.png")
    good = tmp_path / "good.yaml"
    good.write_text("path: .\nval: images/val\nnames: {0: person}\n")
    assert dataset_problem(good) is None
