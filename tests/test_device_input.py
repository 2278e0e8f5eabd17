"""The end-to-end input path on a device as ultralytics' predictor takes it (issue 36, item 3): a uint8 letterboxed
batch uploaded and converted on the device (BHWC -> BCHW, BGR -> RGB, dtype, /255) gives the same model input as
the harness's float32 host path; a device cell whose runner takes tensors on its device takes that path (through
the fake of torch.cuda, tests/fake_cuda.py), one whose runner does not keeps the float32 host path, and a CPU cell
keeps the CPU pipeline it had. The real upload from pinned memory runs on a GPU machine (benchmarks/gpu_once.sh,
benchmarks/preprocess_gpu.py)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.measure import device_input
from harness.measure.pipeline import decoded, for_runner, preprocess
from harness.yolo.inputs import letterbox_hwc
from tests.fake_cuda import FakeTorchCuda
from tests.test_cuda_streams import Recording, YoloShaped
from tests.test_tensorrt_fake import fake_trt  # noqa: F401  (the fixture, for the TensorRT case)

torch = pytest.importorskip("torch")

SHAPES = [(640, 640, 1), (320, 480, 2)]


def _u8(h: int, w: int, batch: int):
    lb = letterbox_hwc(decoded("bus.jpg"), h, w)
    return torch.from_numpy(np.array(np.broadcast_to(lb, (batch, *lb.shape))))


@pytest.mark.parametrize(("h", "w", "batch"), SHAPES)
def test_conversion_on_the_device_equals_the_host_path(h, w, batch):
    host = torch.from_numpy(np.array(preprocess(decoded("bus.jpg"), h, w, batch)))
    got = device_input.to_model_input(_u8(h, w, batch), torch.float32)  # device "cpu"
    assert got.shape == host.shape == (batch, 3, h, w) and got.dtype == torch.float32 and got.is_contiguous()
    assert torch.equal(got, host)  # the same IEEE divisions: bit for bit
    half = device_input.to_model_input(_u8(h, w, batch), torch.float16)
    assert half.dtype == torch.float16
    # ultralytics divides in the model's dtype: within half an fp16 step (2**-11 near 1) of the host value
    assert (half.float() - host).abs().max().item() <= 2.0**-11
    # the other way: without the BGR->RGB flip the input is not the host path's
    unflipped = _u8(h, w, batch).permute(0, 3, 1, 2).float().div_(255)
    assert not torch.equal(unflipped, host)


def test_upload_fills_every_slot_of_the_batch_and_pins_only_on_cuda():
    up = device_input.Upload("cpu", torch.float32, 2, 320, 480)
    assert not up.pinned and up.path == device_input.UINT8_PAGEABLE
    assert up.host.dtype == torch.uint8 and tuple(up.host.shape) == (2, 320, 480, 3)
    got = up.to_device(up.fill(letterbox_hwc(decoded("bus.jpg"), 320, 480)))
    assert torch.equal(got, torch.from_numpy(np.array(preprocess(decoded("bus.jpg"), 320, 480, 2))))


class DeviceFed(Recording):
    """A torch runner that takes a tensor already on its device (here the CPU standing in for it), as the torch
    runners and TensorRT's do."""

    def prepare(self, x):
        self.prepared.append(x)
        return x if isinstance(x, torch.Tensor) else super().prepare(x)

    def device_input(self):
        return torch.device("cpu"), torch.float32


def _graph(inner_cls):
    from harness.backends.cudagraph import CudaGraphRunner

    cuda = FakeTorchCuda()
    inner = inner_cls(YoloShaped(), cuda)
    inner.prepared = []
    return CudaGraphRunner(inner, "cuda", warmup=1, cuda=cuda), inner, cuda


class HostFed(Recording):
    def prepare(self, x):
        self.prepared.append(x)
        return super().prepare(x)


def _cell(device: str):
    from harness.core.axes import Shape
    from harness.core.cell import Cell

    return Cell("n", "detect", "e2e", "torch-eager-cudagraph", device, Shape(64, 96))


def test_a_device_cell_uploads_uint8_and_converts_on_the_device():
    from harness.measure.pipeline import E2ETiming

    g, inner, cuda = _graph(DeviceFed)
    assert g.device_input() == (torch.device("cpu"), torch.float32)  # the graph runner passes its inner's on
    timing = E2ETiming(for_runner(g, _cell("cuda")))
    assert [n for n, _ in timing.pipeline.stages] == ["preprocess", "h2d", "model", "d2h", "postprocess"]
    for _ in range(3):
        timing.pair()
    section = timing.section()
    assert section["input_path"] == device_input.UINT8_PAGEABLE  # pinned only where the device is CUDA
    assert all(set(s) == {"preprocess", "h2d", "model", "d2h", "postprocess"} for s in timing.staged)
    # preprocess handed the uint8 batch to h2d, which converted it: the runner got the host path's float32 input
    fed = inner.prepared[-1]
    assert fed.dtype == torch.float32 and torch.equal(
        fed, torch.from_numpy(np.array(preprocess(decoded(), 64, 96, 1)))
    )
    assert cuda.captures == 1


def test_a_runner_without_device_input_keeps_the_float32_host_path():
    from harness.measure.pipeline import E2ETiming

    g, inner, _ = _graph(HostFed)
    assert g.device_input() is None
    timing = E2ETiming(for_runner(g, _cell("cuda")))
    timing.pair()
    assert timing.section()["input_path"] == device_input.FLOAT32_HOST
    fed = inner.prepared[-1]
    assert isinstance(fed, np.ndarray) and fed.dtype == np.float32 and fed.shape == (1, 3, 64, 96)


def test_a_cpu_cell_keeps_the_cpu_pipeline_even_with_device_input():
    g, inner, _ = _graph(DeviceFed)
    pipe = for_runner(g, _cell("cpu"))
    assert [n for n, _ in pipe.stages] == ["preprocess", "model", "postprocess"]
    assert pipe.input_path == device_input.FLOAT32_HOST and set(pipe.absent) == {"h2d", "d2h"}
    pipe.whole()
    fed = inner.prepared[-1]
    assert isinstance(fed, np.ndarray) and fed.dtype == np.float32


def test_tensorrt_takes_the_device_tensor_and_binds_once(fake_trt):  # noqa: F811
    """TensorRT's runner (a fake engine, tests/test_tensorrt_fake.py) says it takes a float tensor on its device,
    and a tensor converted there runs as its float32 host array does."""
    from tests.test_tensorrt_fake import IN_SHAPE, _runner

    r, engine, _ = _runner(fake_trt)
    device, dtype = r.device_input()
    assert dtype == torch.float32
    x = np.random.default_rng(0).random(IN_SHAPE, dtype=np.float32)
    want = r.outputs(r.run(r.prepare(x)))[0]
    got = r.outputs(r.run(r.prepare(torch.from_numpy(x).to(device))))[0]
    np.testing.assert_array_equal(got, want)
    assert engine.contexts[0].binds == 2  # the same shape: bound once, whichever input path
    r._dtypes[r.input_names[0]] = torch.int8  # the other way: an integer input takes no converted tensor
    assert r.device_input() is None
