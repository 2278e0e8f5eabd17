"""ONNX Runtime on an NVIDIA GPU with I/O binding: inputs and outputs live on the device, so a timed call is the model.

Without I/O binding, `session.run` with host arrays copies the input to the device and every output back on each
call, and that is what a timed round then measures. Here the input is copied once in `prepare`, and the outputs are
bound to device buffers that ORT allocates on the first run and that every later run writes into again.
Used by the `onnxruntime` backend on device cuda and by `onnxruntime-trt`.
"""

from __future__ import annotations

import logging

import numpy as np

from harness.backends.base import Runner, Streams
from harness.threads import GPU_CELL_REASON

log = logging.getLogger(__name__)


class Bound:
    """One IOBinding of the session with its outputs pinned after its first run (one per stream)."""

    def __init__(self, session, output_names: list[str], device_type: str, device_id: int) -> None:
        self.session = session
        self.binding = session.io_binding()
        self.output_names = output_names
        self.device_type = device_type
        self.device_id = device_id
        self.pinned = False
        self.input = None  # the OrtValue bound last (kept alive while bound)

    def run(self, input_name: str, value):
        """Bind `value` (a device OrtValue) as the input and run; returns the binding (outputs on the device)."""
        b = self.binding
        if value is not self.input:
            b.bind_ortvalue_input(input_name, value)
            self.input = value
        if not self.pinned:
            for name in self.output_names:  # ORT allocates these on the device during the first run
                b.bind_output(name, self.device_type, self.device_id)
        self.session.run_with_iobinding(b)
        if not self.pinned:
            # Rebind the buffers ORT just allocated so that every later run writes into the same device memory
            # instead of allocating fresh outputs inside the timed region.
            values = b.get_outputs()
            b.clear_binding_outputs()
            for name, v in zip(self.output_names, values, strict=True):
                b.bind_ortvalue_output(name, v)
            self.pinned = True
        return b

    def close(self) -> None:
        self.binding.clear_binding_inputs()
        self.binding.clear_binding_outputs()
        self.input = None


class OrtIOBindingRunner(Runner):
    """An InferenceSession on a CUDA-based execution provider, fed through an IOBinding on device `device_id`.

    `prepare` copies the input to the device (an OrtValue of its own, touching no binding, so several threads can
    prepare at once); `run` binds it and runs. `run` returns after the outputs are complete: ONNX Runtime
    synchronises its CUDA stream at the end of a run unless told otherwise, so `synchronize` has nothing left to
    wait for beyond the bound outputs. `streams(n)` gives each stream an IOBinding of its own (binding one from
    several threads at once was a race).
    """

    def __init__(
        self,
        session,
        precision: tuple[str | None, str, dict | None],
        device_id: int = 0,
        device_type: str = "cuda",
    ) -> None:
        """`precision`: (precision_executed, precision_source, precision_detail) as the backend read them."""
        self.session = session
        self.device_type = device_type
        self.device_id = device_id
        inp = session.get_inputs()[0]
        self.input_name = inp.name
        self.output_names = [o.name for o in session.get_outputs()]
        self._dtype = np.float16 if "float16" in inp.type else np.float32
        self.precision_executed, self.precision_source, self.precision_detail = precision
        self.timing_scope = "model"  # input and outputs stay bound on the device between calls
        self.bound = self._bound()
        self.stream_bindings: dict[int, Bound] = {}

    @property
    def binding(self):
        """The IOBinding of single-stream calls."""
        return self.bound.binding

    def _bound(self) -> Bound:
        return Bound(self.session, self.output_names, self.device_type, self.device_id)

    def cpu_threads(self) -> tuple[int | None, str]:
        return None, f"{GPU_CELL_REASON} (ONNX Runtime's CPU pool runs only nodes no GPU provider took)"

    def prepare(self, x: np.ndarray):
        from onnxruntime import OrtValue

        return OrtValue.ortvalue_from_numpy(
            np.ascontiguousarray(x, dtype=self._dtype), self.device_type, self.device_id
        )

    def run(self, prepared):
        return self.bound.run(self.input_name, prepared)

    def synchronize(self) -> None:
        self.binding.synchronize_outputs()

    def outputs(self, result) -> list[np.ndarray]:
        return [np.asarray(v, dtype=np.float32) for v in result.copy_outputs_to_cpu()]

    def streams(self, n: int) -> Streams:
        calls = []
        for i in range(n):
            bound = self.stream_bindings.get(i) or self.stream_bindings.setdefault(i, self._bound())

            def call(prepared, bound=bound):
                b = bound.run(self.input_name, prepared)
                b.synchronize_outputs()
                return b

            calls.append(call)
        return Streams(
            calls,
            f"one InferenceSession called from {n} threads at once, each through an IOBinding of its own "
            "(InferenceSession runs are thread-safe; the CUDA EP runs the session's kernels on its own stream)",
        )

    def close(self) -> None:
        self.bound.close()
        for b in self.stream_bindings.values():
            b.close()
        self.stream_bindings.clear()
