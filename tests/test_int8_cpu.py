"""int8 on the CPU backends: real exports of yolo26n at 320, calibrated on the generated calibration split.

Each backend's int8 export runs here (OpenVINO: NNCF through ultralytics' int8 export; ONNX Runtime: static QDQ;
ExecuTorch XNNPACK: PT2E with XNNPACK's quantizer), its runtime reports an int8 (or mixed) executed precision, the
export info says how many calibration images it used, and the int8 model still detects: its mAP on a few val
images is a clear fraction of the fp32 reference's (a broken calibration, e.g. inputs in 0..255 instead of 0..1,
scores near zero). The fp32 side of the precision verdict is tests/test_precision.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import backends
from harness.accuracy import evaluate as ev
from harness.backends.base import ExportRequest
from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.yolo import dataset as ds
from harness.yolo.inputs import letterboxed
from harness.yolo.models import ModelSource, materialize

REPO = Path(__file__).resolve().parent.parent
STANDIN = REPO / "weights" / "standin" / "yolo26n-detect.pt"
CALIB = 8
SIDE = 320


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return ds.generate(tmp_path_factory.mktemp("ds"), seed=0, train=1, val=16, calib=CALIB)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    """The stand-in trained weights (quantisation of random weights says little), else the seeded random init."""
    if STANDIN.is_file():
        return STANDIN
    return materialize(ModelSource("n", "detect"), tmp_path_factory.mktemp("cache")).checkpoint


@pytest.fixture(scope="module")
def reference_map(checkpoint, data) -> float:
    split = ev.load_split(data, limit=16)
    return ev.evaluate(ev.torch_reference(checkpoint, "e2e", SIDE, SIDE), "e2e", SIDE, SIDE, split=split)[
        "map50_95"
    ]


@pytest.mark.slow
@pytest.mark.export
@pytest.mark.parametrize("backend", ["openvino", "onnxruntime", "executorch-xnnpack"])
def test_int8_export_runs_int8_calibrated_on_the_calibration_split(
    backend, checkpoint, data, reference_map, tmp_path
):
    b = backends.get(backend)
    cell = Cell("n", "detect", "e2e", backend, "cpu", Shape(SIDE, SIDE), 1, "int8")
    if b.probe("cpu") or b.unsupported(cell):
        pytest.skip(b.probe("cpu") or b.unsupported(cell))
    req = ExportRequest.for_cell(cell, str(checkpoint), str(tmp_path / "out"), {}, calibration=str(data))
    result = b.export(req)
    cal = result.info["calibration"]
    assert cal == {"images": CALIB, "dataset": str(data.resolve()), "split": "calib"}
    runner = b.load(Path(result.artifact), cell, result.info)
    assert runner.precision_executed in ("int8", "mixed"), (
        runner.precision_executed,
        runner.precision_detail,
    )
    assert runner.precision_executed != "fp32"
    out = runner.outputs(runner.run(runner.prepare(letterboxed(SIDE, SIDE, 1))))
    assert out[0].shape == (1, 300, 6)

    split = ev.load_split(data, limit=16)
    r = ev.evaluate(lambda x: runner.outputs(runner.run(runner.prepare(x))), "e2e", SIDE, SIDE, split=split)
    print(
        f"{backend} int8 ({runner.precision_executed}): mAP50-95 {r['map50_95']:.3f}, fp32 {reference_map:.3f}"
    )
    if STANDIN.is_file():
        assert r["map50_95"] > 0.5 * reference_map, (r, reference_map)


def test_int8_is_refused_where_the_backend_has_no_int8():
    """The other way: a backend without int8 on a device says so (a skip reason), it does not export fp32."""
    cell = Cell("n", "detect", "e2e", "onnxruntime", "cuda", Shape(SIDE, SIDE), 1, "int8")
    assert "not int8" in backends.get("onnxruntime").unsupported(cell)
    cell = Cell("n", "detect", "e2e", "torch-eager", "cpu", Shape(SIDE, SIDE), 1, "int8")
    assert "not int8" in backends.get("torch-eager").unsupported(cell)
