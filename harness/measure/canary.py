"""The drift canary: a short fixed workload, timed between workload groups through the whole run.

It is the same small convolutional network in every run and on every profile (built here from a fixed seed with
onnx.helper, never exported from a model under test), run by ONNX Runtime on the CPU with the run's thread budget.
Its median over a few rounds, read before and after each workload is timed, shows how the machine's speed moved:
env.json's `canary` (min, median, max and every reading) and the report header let a reader see how steady the run
was, each record's `canary_ms` holds the readings around its own timing, and the history's `compare` judges
latency on p50s divided by them, and says when a run's canary left its usual band.
"""

from __future__ import annotations

import itertools
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.measure.quiesce import Quiesce, wait_idle
from harness.measure.stats import median

log = logging.getLogger(__name__)

#: what the canary runs (its figures are comparable only with the same workload)
WORKLOAD = (
    "onnxruntime-cpu: 4-layer conv net 3-32-64-128-128, 1x3x224x224 fp32, seed 0 (harness/measure/canary.py)"
)
ROUNDS = 15
SHAPE = (1, 3, 224, 224)
CHANNELS = (3, 32, 64, 128, 128)


def _model_bytes() -> bytes:
    """The canary network as ONNX bytes: 3x3 stride-2 convolutions with ReLU, fixed seeded weights."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"
    for i, (cin, cout) in enumerate(itertools.pairwise(CHANNELS)):
        w = (rng.standard_normal((cout, cin, 3, 3)) * (2.0 / (cin * 9)) ** 0.5).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("Conv", [prev, f"w{i}"], [f"c{i}"], strides=[2, 2], pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"]))
        prev = f"r{i}"
    graph = helper.make_graph(
        nodes,
        "canary",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(SHAPE))],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, None)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


@dataclass
class Reading:
    """One canary reading: seconds since the run's first reading, median ms of its rounds, and where it was."""

    t_s: float
    ms: float
    label: str

    def to_dict(self) -> dict:
        return {"t_s": round(self.t_s, 2), "ms": round(self.ms, 4), "label": self.label}


@dataclass
class Canary:
    """The run's canary. `read(label)` times it once; `summary()` is env.json's `canary`."""

    threads: int
    readings: list[Reading] = field(default_factory=list)
    reason: str | None = None  # why there is no canary (ONNX Runtime missing, ...)
    _session: Any = None
    _x: np.ndarray | None = None
    _t0: float | None = None

    def _open(self) -> bool:
        if self._session is not None or self.reason:
            return self.reason is None
        try:
            import onnxruntime as ort

            from harness.backends.onnxruntime import session_options

            so = session_options(self.threads)
            self._session = ort.InferenceSession(_model_bytes(), so, providers=["CPUExecutionProvider"])
            self._x = np.random.default_rng(1).random(SHAPE, dtype=np.float32)
            self._session.run(None, {"x": self._x})  # the first run allocates; never timed
        except Exception as e:  # no canary is a null with its reason, never a failed run
            self.reason = f"no drift canary: {type(e).__name__}: {e}"
            log.warning("%s", self.reason)
            return False
        return True

    def read(self, label: str) -> float | None:
        """Time the canary now: the median of ROUNDS rounds in ms (None when it cannot run here)."""
        if not self._open():
            return None
        wait_idle(Quiesce())  # the threads the last runner left spinning must not slow the canary
        times = []
        for _ in range(ROUNDS):
            t0 = time.perf_counter_ns()
            self._session.run(None, {"x": self._x})
            times.append((time.perf_counter_ns() - t0) / 1e6)
        now = time.perf_counter()
        if self._t0 is None:
            self._t0 = now
        ms = median(times)
        self.readings.append(Reading(now - self._t0, ms, label))
        return ms

    def summary(self) -> dict:
        """env.json's `canary`: min, median and max of the readings in ms, max/min, and every reading."""
        if not self.readings:
            return no_canary(self.reason or "no workload was timed in this run")
        values = [r.ms for r in self.readings]
        return {
            "workload": WORKLOAD,
            "threads": self.threads,
            "rounds_per_reading": ROUNDS,
            "min": min(values),
            "median": median(values),
            "max": max(values),
            "max_over_min": max(values) / min(values),
            "readings": [r.to_dict() for r in self.readings],
        }


def no_canary(reason: str) -> dict:
    """env.json's `canary` of a run without readings: the figures null, and why."""
    return {"workload": WORKLOAD, "min": None, "median": None, "max": None, "reason": reason}


def around(before: float | None, after: float | None) -> dict | None:
    """A record's `canary_ms`: the readings right before and after its workload was timed, and their mean."""
    known = [v for v in (before, after) if v is not None]
    if not known:
        return None
    return {"before": before, "after": after, "mean": sum(known) / len(known), "readings": known}


def merge(earlier: dict | None, later: dict | None) -> dict | None:
    """One `canary_ms` for a workload timed in several episodes: the first reading before, the last after, and the
    mean of every reading around every episode."""
    if earlier is None or later is None:
        return later or earlier
    known = [*earlier.get("readings", []), *later.get("readings", [])]
    return {
        "before": earlier.get("before"),
        "after": later.get("after"),
        "mean": sum(known) / len(known) if known else None,
        "readings": known,
    }
