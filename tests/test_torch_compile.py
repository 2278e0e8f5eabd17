"""torch.compile runners alive together (issue 24, defect 1): compiling one never breaks another, the stance
"fail_on_recompile" holds only inside a runner's own call, a recompile in a timed call is the harness's failure
(classified harness_error), and such a failure never climbs the remedy ladder."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.errors import HarnessError
from harness.core.record import CellRecord, new_record
from harness.diagnosis.failure import failure_from_exception
from harness.execute.ladder import climb, next_remedy

torch = pytest.importorskip("torch")


def _stance() -> str:
    from torch._dynamo import eval_frame

    return eval_frame._stance.stance


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x)).mean(dim=(2, 3))


def _tiny_runner(side: int):
    from harness.backends.torch_compile import CompiledRunner, compile_and_warm

    model = Tiny().eval()
    example = torch.zeros(1, 3, side, side)
    compiled, seconds = compile_and_warm(model, example, "default", "cpu")
    return CompiledRunner(compiled, "cpu", torch.float32, "default", seconds), model


@pytest.mark.slow
def test_two_compiled_runners_each_run_after_the_other_compiled():
    a, model_a = _tiny_runner(16)
    b, model_b = _tiny_runner(24)  # compiling b must leave a's compiled code in place
    x16, x24 = (
        np.random.rand(1, 3, 16, 16).astype(np.float32),
        np.random.rand(1, 3, 24, 24).astype(np.float32),
    )
    assert _stance() == "default"  # nothing process-wide is left set by compiling
    for runner, model, x in ((a, model_a, x16), (b, model_b, x24), (a, model_a, x16)):
        got = runner.outputs(runner.run(runner.prepare(x)))[0]
        with torch.no_grad():
            want = model(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        assert _stance() == "default"  # the stance ended with the call
    # the other way: a timed call that needs a recompile (a shape nothing was compiled for) raises, as the
    # harness's own failure
    x20 = np.random.rand(1, 3, 20, 20).astype(np.float32)
    with pytest.raises(HarnessError, match="recompile") as info:
        a.run(a.prepare(x20))
    assert _stance() == "default"
    f = failure_from_exception(info.value, "run", None)
    assert f["class"] == "harness_error"
    # an identical model compiled again reuses Dynamo's code: no compile time is claimed for it
    again, _ = _tiny_runner(16)
    assert again.compile_s is None and "reused" in again.compile_reason


@pytest.mark.slow
def test_the_stance_survives_overlapping_calls_from_threads():
    from harness.backends.torch_compile import fail_on_recompile

    inside = threading.Barrier(2)
    seen: list[str] = []

    def call():
        with fail_on_recompile():
            inside.wait()  # both threads inside at once
            seen.append(_stance())
            inside.wait()

    threads = [threading.Thread(target=call) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == ["fail_on_recompile"] * 2
    assert _stance() == "default"  # set_stance's own restore would leave "fail_on_recompile" set here


def _failed(cls: str, stage: str = "run", status: str = "run_failed") -> CellRecord:
    rec = new_record(
        "r", Cell("n", "detect", "e2e", "torch-compile", "cpu", Shape(160, 160)), "random-init:0"
    )
    rec.status, rec.reason = status, "boom"
    rec.failure = {"class": cls, "stage": stage, "message": "boom"}
    return rec


def test_a_harness_failure_never_climbs_the_ladder():
    cell = Cell("n", "detect", "e2e", "torch-compile", "cpu", Shape(160, 160))
    tried: list = []

    def try_attempt(a):
        tried.append(a)
        return [_failed("runtime_error", status="ok")], True

    assert next_remedy(cell, [], _failed("harness_error"), False) is None
    assert climb(cell, _failed("harness_error"), try_attempt) == []
    assert climb(cell, _failed("unknown", stage="harness", status="crashed"), try_attempt) == []
    assert tried == []
    # the other way: the same cell failing in its runtime gets the raw-head remedy
    recs = climb(cell, _failed("runtime_error"), try_attempt)
    assert [a.remedy for a in tried] == ["raw-head"] and len(recs) == 1


def test_the_stance_message_is_a_harness_error():
    from harness.diagnosis.classify import classify

    msg = "Detected recompile when torch.compile stance is 'fail_on_recompile'. filename: 'tasks.py'"
    assert classify(msg, exception_type="builtins.RuntimeError", stage="run")["class"] == "harness_error"
    assert classify("boom", exception_type="builtins.RuntimeError", stage="run")["class"] == "runtime_error"
