"""ExecuTorch with the XNNPACK delegate (CPU), run through the ExecuTorch Python runtime.

Threads: ExecuTorch's CPU threadpool is sized to the run's budget before the program is loaded, and read back
from the pool. Precision: the dtypes of the lowered graph, counted at export time (`lowered_dtypes`).
"""

from __future__ import annotations

import logging
from pathlib import Path

from harness.backends import register
from harness.backends._shared.executorch_export import export_executorch
from harness.backends._shared.executorch_runtime import ExecuTorchMethodRunner, runtime_backends
from harness.backends._shared.probes import not_installed
from harness.backends.base import (
    INSTANCES,
    SPLIT,
    Backend,
    ExportRequest,
    ExportResult,
    Mechanism,
    Plan,
    Runner,
    Streams,
    serial_plan,
)

log = logging.getLogger(__name__)


class ExecuTorchRunner(ExecuTorchMethodRunner):
    """A loaded ExecuTorch method, executed synchronously on the host."""

    def __init__(self, method, export_info: dict | None = None, artifact: Path | None = None) -> None:
        super().__init__(method, export_info)
        #: the program file (the instances mechanism loads the method again from it); None: not kept
        self.artifact = artifact
        self._more: list = []  # the instances mechanism's further method instances, loaded on first use

    def cpu_threads(self) -> tuple[int | None, str]:
        return threadpool_threads()

    def mechanisms(self, threads: int | None = None) -> list[Mechanism]:
        """Besides the base's: method instances, one per worker, on the one XNNPACK threadpool of the process (a
        method's calls are not known to be safe from several threads; separate instances are separate state). The
        budget cannot be split between workers: the pool is one per process, and resizing it frees the pool the
        loaded methods hold."""
        out = super().mechanisms(threads)
        out.append(Mechanism(SPLIT, "the thread budget split between workers", None, None, NO_SPLIT))
        words = "ExecuTorch method instances, one per worker, sharing the process's XNNPACK threadpool"
        if self.artifact is None or threads is None:
            return [
                *out,
                Mechanism(INSTANCES, words, None, None, "the program file was not kept by this runner"),
            ]
        return [*out, Mechanism(INSTANCES, words, lambda n: self._instances(n, threads),
                                lambda n: _instances_plan(n, threads))]  # fmt: skip

    def _instances(self, n: int, threads: int) -> Streams:
        assert self.artifact is not None
        k = max(1, min(n, threads))
        while len(self._more) < k - 1:
            self._more.append(load_method(self.artifact))
        methods = [self.method, *self._more[: k - 1]]
        return Streams(
            [m.execute for m in methods],
            f"{k} instances of the ExecuTorch method (the program loaded {k} times), one per worker thread, on "
            f"the process's XNNPACK threadpool of {threadpool_threads()[0]} threads; the {n} cameras' frames go to "
            "whichever is free",
            plan=_instances_plan(n, threads),
        )


NO_SPLIT = (
    "ExecuTorch's XNNPACK threadpool is one per process, and resizing it frees the pool the loaded methods hold: "
    "the budget cannot be split between workers"
)


def _instances_plan(n: int, threads: int) -> Plan:
    k = max(1, min(n, threads))
    if k == 1:
        return serial_plan(threads)
    return Plan(k, threads, k, words=f"{k} method instances on one {threads}-thread pool")


def set_threadpool(n: int | None = None) -> int:
    """Size ExecuTorch's CPU threadpool (the one XNNPACK parallelises on) to the run's budget; returns its size.

    Must run before a method is loaded: the XNNPACK delegate keeps the pool it was initialised with, and resetting
    the pool frees that one (hence ExecuTorch's "_unsafe" prefix). A reset to the current size does nothing, so
    within one run, with one budget, methods loaded earlier stay valid.
    """
    from executorch.extension.pybindings import portable_lib

    from harness.threads import budget

    n = n or budget()
    if portable_lib._threadpool_get_thread_count() != n:
        portable_lib._unsafe_reset_threadpool(n)
    return portable_lib._threadpool_get_thread_count()


def threadpool_threads() -> tuple[int | None, str]:
    try:
        from executorch.extension.pybindings import portable_lib

        n = int(portable_lib._threadpool_get_thread_count())
    except (ImportError, AttributeError) as e:
        return None, f"this ExecuTorch build does not report its threadpool ({e})"
    return (
        n,
        "ExecuTorch's CPU threadpool (portable_lib._threadpool_get_thread_count()), which XNNPACK runs on",
    )


def load_method(artifact: Path):
    from executorch.runtime import Runtime

    set_threadpool()  # before loading: the delegate binds the pool at init
    program = Runtime.get().load_program(Path(artifact))
    return program.load_method("forward")


@register
class ExecuTorchXnnpack(Backend):
    name = "executorch-xnnpack"
    display_order = 70
    registry_order = 40
    devices = ("cpu",)
    precisions = {"cpu": ("fp32", "int8")}
    supports_dynamic = True
    library = "executorch"

    def probe(self, device: str) -> str | None:
        reason = not_installed("executorch.runtime", "Runtime")
        if reason:
            return reason
        backends = runtime_backends()
        if "XnnpackBackend" not in backends:
            return f"the installed ExecuTorch runtime has no XnnpackBackend (has {', '.join(backends)})"
        return None

    def export(self, req: ExportRequest) -> ExportResult:
        from executorch.backends.xnnpack.partition.config import ALL_PARTITIONER_CONFIGS
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        # Remedy option: keep some op kinds out of the delegate (matched against the partitioner config names,
        # e.g. "squeeze" drops SqueezeConfig and UnsqueezeConfig); ExecuTorch's portable kernels run them.
        exclude = [e.lower() for e in req.options.get("xnnpack_exclude_configs", [])]
        configs = [c for c in ALL_PARTITIONER_CONFIGS if not any(e in c.__name__.lower() for e in exclude)]
        if req.precision != "int8":
            return export_executorch(req, [XnnpackPartitioner(configs=configs)], "xnnpack")
        # int8: PT2E with XNNPACK's quantizer (symmetric, per-channel weights, static activations), calibrated
        from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
            XNNPACKQuantizer,
            get_symmetric_quantization_config,
        )

        from harness.backends._shared.executorch_quantize import quantized_program

        quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
        program, info = quantized_program(req, quantizer)
        result = export_executorch(req, [XnnpackPartitioner(configs=configs)], "xnnpack-int8", program)
        info["quantization"] = (
            "int8 PT2E XNNPACKQuantizer (symmetric, per-channel weights), static activations"
        )
        return ExportResult(result.artifact, {**result.info, **info})

    def load(self, artifact: Path, cell, export_info: dict) -> Runner:
        return ExecuTorchRunner(load_method(artifact), export_info, Path(artifact))
