import pytest

from harness import backends
from harness.core.axes import SelectionError, Shape
from harness.plan.matrix import Selection, build


def _pairs():
    return sum(len(backends.get(n).devices) for n in backends.names())


def test_quick_profile_is_every_backend_device_once():
    cells = build("quick", Selection())
    assert len(cells) == _pairs()
    assert {p.cell.shape for p in cells} == {Shape(320, 320)}
    assert {p.cell.backend for p in cells} == set(backends.names())


def test_default_profile_covers_sizes_at_640_and_n_at_extra_shapes():
    cells = [p.cell for p in build("default", Selection())]
    at640 = {(c.size, c.backend, c.device) for c in cells if c.shape == Shape(640, 640)}
    assert {s for s, _, _ in at640} == {"n", "s", "m", "l", "x"}
    extra = {c.shape for c in cells if c.shape != Shape(640, 640)}
    assert extra == {Shape(320, 320), Shape(1280, 1280), Shape(384, 640)}
    assert all(c.size == "n" for c in cells if c.shape != Shape(640, 640))
    assert len(cells) == len({c.id for c in cells}), "cells are deduplicated"


def test_overrides_replace_the_axis_in_every_block():
    sel = Selection(sizes=("n",), backends=("onnxruntime",), devices=("cpu",), shapes=(Shape(320, 320),))
    cells = [p.cell for p in build("default", sel)]
    # the int8 block's shape is replaced too
    assert [c.id for c in cells] == [
        "yolo26n-detect-e2e-onnxruntime-cpu-320x320-b1-fp32",
        "yolo26n-detect-e2e-onnxruntime-cpu-320x320-b1-int8",
    ]


def test_default_profile_has_int8_on_the_cpu_backends_only():
    cells = [p.cell for p in build("default", Selection())]
    int8 = {(c.backend, c.device, c.size, c.shape) for c in cells if c.precision == "int8"}
    assert int8 == {
        (b, "cpu", "n", Shape(640, 640)) for b in ("openvino", "onnxruntime", "executorch-xnnpack")
    }
    assert not [p for p in build("quick", Selection()) if p.cell.precision != "fp32"]
    # a block's devices give way to --devices, as every axis does
    sel = Selection(devices=("cuda",), precisions=("int8",), backends=("onnxruntime",))
    assert {p.cell.device for p in build("default", sel)} == {"cuda"}


def test_exclusions_are_skips_with_reasons_not_dropped_cells():
    sel = Selection(
        tasks=("cls", "detect"),
        heads=("e2e", "raw"),
        backends=("onnxruntime",),
        devices=("cpu",),
        sizes=("n",),
        shapes=(Shape(320, 320),),
    )
    planned = {p.cell.id: p.excluded for p in build("quick", sel)}
    assert planned["yolo26n-cls-e2e-onnxruntime-cpu-320x320-b1-fp32"].startswith("classification models")
    assert planned["yolo26n-cls-raw-onnxruntime-cpu-320x320-b1-fp32"] is None
    assert planned["yolo26n-detect-e2e-onnxruntime-cpu-320x320-b1-fp32"] is None


def test_unknown_profile_is_a_selection_error():
    with pytest.raises(SelectionError, match="valid: quick, default, tasks, families, claims, nightly"):
        build("weekly", Selection())


def test_nightly_adds_tasks_batches_shapes_and_fp16():
    cells = [p.cell for p in build("nightly", Selection(sizes=("n",), backends=("openvino",)))]
    assert {c.task for c in cells} == {"detect", "seg", "pose", "obb", "cls"}
    assert {c.batch for c in cells} == {1, 8}
    assert Shape.parse("dynamic") in {c.shape for c in cells}
    assert {c.precision for c in cells} == {"fp32", "fp16"}
