"""ONNX Runtime on an NVIDIA GPU with I/O binding: inputs and outputs live on the device, so a timed call is the model.

Without I/O binding, `session.run` with host arrays copies the input to the device and every output back on each
call, and that is what a timed round then measures. Here the input is copied once in `prepare`, and the outputs are
bound to device buffers that ORT allocates on the first run and that every later run writes into again.
Used by the `onnxruntime` backend on device cuda and by `onnxruntime-trt`.
"""

from __future__ import annotations

import logging

import numpy as np

from harness.backends.base import Runner
from harness.core.threads import GPU_CELL_REASON

log = logging.getLogger(__name__)


class OrtIOBindingRunner(Runner):
    """An InferenceSession on a CUDA-based execution provider, fed through an IOBinding on device `device_id`.

    `run` returns after the outputs are complete: ONNX Runtime synchronises its CUDA stream at the end of a run
    unless told otherwise, so `synchronize` has nothing left to wait for beyond the bound outputs.
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
        self.binding = session.io_binding()
        self._outputs_pinned = False
        self._input = None

    def cpu_threads(self) -> tuple[int | None, str]:
        return None, f"{GPU_CELL_REASON} (ONNX Runtime's CPU pool runs only nodes no GPU provider took)"

    def prepare(self, x: np.ndarray):
        from onnxruntime import OrtValue

        self._input = OrtValue.ortvalue_from_numpy(
            np.ascontiguousarray(x, dtype=self._dtype), self.device_type, self.device_id
        )
        self.binding.bind_ortvalue_input(self.input_name, self._input)
        if not self._outputs_pinned:
            for name in self.output_names:  # ORT allocates these on the device during the first run
                self.binding.bind_output(name, self.device_type, self.device_id)
        return self.binding

    def run(self, prepared):
        self.session.run_with_iobinding(prepared)
        if not self._outputs_pinned:
            # Rebind the buffers ORT just allocated so that every later run writes into the same device memory
            # instead of allocating fresh outputs inside the timed region.
            values = prepared.get_outputs()
            prepared.clear_binding_outputs()
            for name, value in zip(self.output_names, values, strict=True):
                prepared.bind_ortvalue_output(name, value)
            self._outputs_pinned = True
        return prepared

    def synchronize(self) -> None:
        self.binding.synchronize_outputs()

    def outputs(self, result) -> list[np.ndarray]:
        return [np.asarray(v, dtype=np.float32) for v in result.copy_outputs_to_cpu()]

    def close(self) -> None:
        self.binding.clear_binding_inputs()
        self.binding.clear_binding_outputs()
        self._input = None
