import pytest

from harness.core.axes import SIZES, SelectionError, Shape, parse_batches, parse_list, parse_shapes
from harness.core.cell import Cell


def test_shape_parse_forms():
    assert Shape.parse("640") == Shape(640, 640)
    assert Shape.parse("384x640") == Shape(384, 640)
    assert Shape.parse("dynamic").dynamic
    assert Shape.parse("650x650").multiple_of_32 is False
    assert Shape(384, 640).label == "384x640"


@pytest.mark.parametrize("bad", ["0", "-3", "64x", "x64", "abc", "12.5", "640x0", ""])
def test_shape_parse_rejects_non_positive_integers(bad):
    with pytest.raises(SelectionError, match="shape"):
        Shape.parse(bad)


def test_parse_list_lists_valid_names():
    assert parse_list("n,s,n", SIZES, "sizes") == ("n", "s")
    with pytest.raises(SelectionError) as e:
        parse_list("n,q", SIZES, "sizes")
    assert "'q'" in str(e.value) and "n, s, m, l, x" in str(e.value)
    assert parse_list(None, SIZES, "sizes") is None


def test_all_alone_selects_every_value_of_the_axis():
    from harness.core.axes import TASKS

    assert parse_list("all", TASKS, "tasks") == TASKS == ("detect", "seg", "pose", "obb", "cls")
    with pytest.raises(SelectionError, match="unknown 'all'"):  # not beside other names
        parse_list("all,detect", TASKS, "tasks")


def test_parse_shapes_and_batches():
    assert parse_shapes("320,384x640") == (Shape(320, 320), Shape(384, 640))
    assert parse_batches("1,8") == (1, 8)
    with pytest.raises(SelectionError, match="positive integer"):
        parse_batches("1,zero")
    with pytest.raises(SelectionError, match="positive integer"):
        parse_batches("0")


def test_cell_id_reads_like_the_cell():
    c = Cell("n", "detect", "e2e", "onnxruntime", "cpu", Shape(640, 640))
    assert c.id == "yolo26n-detect-e2e-onnxruntime-cpu-640x640-b1-fp32"
    assert c.model == "yolo26n"
    assert Cell("s", "seg", "raw", "openvino", "cpu", Shape(384, 640), 8, "fp16").id == (
        "yolo26s-seg-raw-openvino-cpu-384x640-b8-fp16"
    )
    assert Cell("s", "seg", "raw", "openvino", "cpu", Shape(384, 640)).model == "yolo26s-seg"


def test_cell_validates_axes_without_io():
    with pytest.raises(SelectionError, match="valid sizes"):
        Cell("q", "detect", "e2e", "onnxruntime", "cpu", Shape(640, 640))
    with pytest.raises(SelectionError, match="valid tasks"):
        Cell("n", "segment", "e2e", "onnxruntime", "cpu", Shape(640, 640))
    with pytest.raises(SelectionError, match="batch"):
        Cell("n", "detect", "e2e", "onnxruntime", "cpu", Shape(640, 640), batch=0)


def test_cell_gflops_scale_with_pixels_and_batch():
    c = Cell("n", "detect", "e2e", "onnxruntime", "cpu", Shape(320, 320), batch=2)
    assert c.gflops == pytest.approx(5.4 / 4 * 2)
    assert Cell("n", "pose", "e2e", "onnxruntime", "cpu", Shape(640, 640)).gflops is None
