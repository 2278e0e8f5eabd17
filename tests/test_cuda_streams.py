"""The CUDA runners' graph capture and streams on a CPU, with a fake of torch.cuda's graph and stream API only
(tests/fake_cuda.py); the model, its tensors and the threads are real (issue 24, defects 2 and 3).

- a CUDA-graph runner captures once per input shape and copies inputs into its static buffers (it captured on
  every `prepare`: the e2e h2d stage, the accuracy pass and every scenario query);
- its streams each replay a graph captured on their own CUDA stream; torch eager's and AOTInductor's streams each
  run on their own CUDA stream (they took turns on one lock);
- the end-to-end pipeline's on-device branch (h2d, model, d2h) runs on the graph runner without a capture per call.
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.backends.base import Runner
from tests.fake_cuda import FakeTorchCuda, run_threads

torch = pytest.importorskip("torch")


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 2, 3, padding=1)

    def forward(self, x):
        return self.conv(x).amax(dim=(2, 3))


class Recording(Runner):
    """A torch runner whose call registers with the fake graph being captured, as kernels would."""

    def __init__(self, model, cuda: FakeTorchCuda) -> None:
        self.model = model
        self.cuda = cuda
        self.streams_seen: list = []

    def prepare(self, x):
        return torch.from_numpy(np.array(x, dtype=np.float32))

    def run(self, prepared):
        with torch.no_grad():
            out = torch.empty_like(self.model(prepared))

        def op():
            with torch.no_grad():
                out.copy_(self.model(prepared))

        self.cuda.record(op)
        self.streams_seen.append(self.cuda.current_stream())
        return out

    def outputs(self, result):
        return [result.numpy().copy()]


def _want(model, x):
    with torch.no_grad():
        return model(torch.from_numpy(x)).numpy()


@pytest.fixture
def graph_runner():
    from harness.backends.cudagraph import CudaGraphRunner

    cuda = FakeTorchCuda()
    model = Tiny().eval()
    return CudaGraphRunner(Recording(model, cuda), "cuda", warmup=2, cuda=cuda), cuda, model


def test_a_graph_is_captured_once_per_shape_and_inputs_are_copied_in(graph_runner):
    g, cuda, model = graph_runner
    rng = np.random.default_rng(0)
    for _ in range(10):  # the e2e h2d stage, the accuracy pass, ...: every call prepares again
        x = rng.random((1, 3, 8, 8), dtype=np.float32)
        got = g.outputs(g.run(g.prepare(x)))[0]
        np.testing.assert_allclose(got, _want(model, x), rtol=1e-6)
    assert cuda.captures == 1 and g.captures == 1
    only = next(iter(g.graphs.values()))
    assert only.graph.replays == 10
    y = rng.random((1, 3, 16, 8), dtype=np.float32)  # another shape: its own graph, once
    for _ in range(3):
        np.testing.assert_allclose(g.outputs(g.run(g.prepare(y)))[0], _want(model, y), rtol=1e-6)
    assert cuda.captures == 2 and len(g.graphs) == 2


def test_each_stream_replays_its_own_graph_captured_on_its_own_stream(graph_runner):
    g, cuda, model = graph_runner
    rng = np.random.default_rng(1)
    g.prepare(rng.random((1, 3, 8, 8), dtype=np.float32))
    streams = g.streams(3)
    assert streams.concurrent and "3 CUDA streams" in streams.mechanism
    assert cuda.captures == 1 + 3
    per_stream = [next(iter(t.values())) for t in g.stream_graphs.values()]
    assert len({id(c.graph.stream) for c in per_stream}) == 3  # each captured on a stream of its own
    assert all(c.graph.stream is not cuda.default for c in per_stream)
    g.streams(3)  # the offline sweep asks again: the streams keep their graphs
    assert cuda.captures == 4

    errors: list = []

    def worker(call, seed):
        r = np.random.default_rng(seed)
        for _ in range(20):
            x = r.random((1, 3, 8, 8), dtype=np.float32)
            got = g.outputs(call(g.prepare(x)))[0]
            if not np.allclose(got, _want(model, x), rtol=1e-6):
                errors.append(seed)

    run_threads(worker, streams.calls)
    assert errors == []
    assert cuda.captures == 4  # sixty queries from three threads: no capture among them
    assert [c.graph.replays for c in per_stream] == [20, 20, 20]


def test_the_pipeline_on_device_branch_copies_and_never_captures(graph_runner):
    """The e2e pipeline of a cuda cell (h2d, model, d2h stages) on the graph runner, through a fake device."""
    from harness.core.axes import Shape
    from harness.core.cell import Cell
    from harness.measure.pipeline import for_runner

    g, cuda, _ = graph_runner
    g.inner.model = YoloShaped()
    cell = Cell("n", "detect", "e2e", "torch-eager-cudagraph", "cuda", Shape(64, 64))
    pipe = for_runner(g, cell)
    assert [name for name, _ in pipe.stages] == ["preprocess", "h2d", "model", "d2h", "postprocess"]
    assert pipe.absent == {}
    for _ in range(5):
        staged = pipe.staged()
        assert set(staged) == {"preprocess", "h2d", "model", "d2h", "postprocess"}
        pipe.whole()
    assert cuda.captures == 1


class YoloShaped(torch.nn.Module):
    """An e2e-head-shaped output (1, 300, 6) with no detection above the threshold, for the postprocess stage."""

    def forward(self, x):
        return torch.zeros(x.shape[0], 300, 6) + 0 * x.mean()


def test_torch_eager_streams_on_cuda_each_run_on_their_own_stream():
    from harness.backends.torch_eager import TorchRunner

    cuda = FakeTorchCuda()
    seen: list = []

    class Probe(Tiny):
        def forward(self, x):
            seen.append(cuda.current_stream())
            return super().forward(x)

    model = Probe().eval()
    runner = TorchRunner(model, "cpu", torch.float32)
    runner._cuda, runner.cuda_api = True, cuda  # a CUDA runner as far as `streams` can tell
    streams = runner.streams(4)
    assert streams.concurrent and "4 CUDA streams" in streams.mechanism
    x = np.random.default_rng(2).random((1, 3, 8, 8), dtype=np.float32)
    outs = [c(torch.from_numpy(x)) for c in streams.calls]
    for o in outs:
        np.testing.assert_allclose(o.numpy(), _want(Tiny().eval(), x), rtol=1e-6)
    assert len({id(s) for s in seen}) == 4 and cuda.default not in seen
    made = cuda.streams_made
    assert all(s.waited == [cuda.default] and s.syncs == 1 for s in made)  # after the input's copy; own wait
    # the other way: a CPU runner's streams make no CUDA stream
    cpu = TorchRunner(Tiny().eval(), "cpu", torch.float32)
    cpu.cuda_api = cuda
    cpu.streams(2)
    assert len(cuda.streams_made) == 4


def test_aoti_streams_on_cuda_each_run_on_their_own_stream():
    from harness.backends.aoti import AotiRunner

    cuda = FakeTorchCuda()
    seen: list = []

    class Loader:
        def run(self, inputs):
            seen.append(cuda.current_stream())
            return [inputs[0] * 2]

    class Compiled:
        loader = Loader()

    runner = AotiRunner(Compiled(), "cpu", torch.float32)
    runner._cuda, runner.cuda_api = True, cuda
    streams = runner.streams(3)
    assert streams.concurrent
    for c in streams.calls:
        assert c(torch.ones(2))[0].tolist() == [2.0, 2.0]
    assert len({id(s) for s in seen}) == 3
