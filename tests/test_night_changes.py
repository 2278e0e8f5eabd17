"""Which cells the change since the last run touches (harness.plan.changes)."""

from __future__ import annotations

from harness.history import synthetic
from harness.plan.changes import touched

ORT = synthetic.cell("onnxruntime", device="cpu")
OV = synthetic.cell("openvino", device="cpu")
EAGER = synthetic.cell("torch-eager", device="cpu")
CELLS = [ORT, OV, EAGER]
LIBS = {"torch": "2.13.0", "onnxruntime": "1.32.0", "openvino": "2026.4.1"}


def test_a_backend_module_touches_its_own_cells_only():
    assert touched(CELLS, ["harness/backends/onnxruntime.py"], LIBS, LIBS) == {
        ORT.id: "harness/backends/onnxruntime.py"
    }
    # the other way: the report's code touches no cell
    assert touched(CELLS, ["harness/report/render.py", "README.md"], LIBS, LIBS) == {}


def test_shared_export_code_touches_every_cell():
    assert set(touched(CELLS, ["harness/backends/_shared/ultralytics_export.py"], LIBS, LIBS)) == {
        c.id for c in CELLS
    }


def test_a_library_version_touches_the_backends_that_use_it():
    new = {**LIBS, "openvino": "2026.5.0"}
    assert touched(CELLS, [], LIBS, new) == {OV.id: "openvino 2026.4.1 -> 2026.5.0"}
    assert set(touched(CELLS, [], LIBS, {**LIBS, "torch": "2.14.0"})) == {c.id for c in CELLS}
    # the other way: the same versions touch nothing
    assert touched(CELLS, [], LIBS, dict(LIBS)) == {}
