"""The backend interface: availability probe, export (in an isolated process), load, and a runner to time."""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from harness.core.axes import DEFAULT_FAMILY
from harness.core.version import library_version  # noqa: F401  (re-exported: the backends read versions here)

log = logging.getLogger(__name__)


class BackendUnavailable(RuntimeError):
    """Raised when a backend cannot run a cell here; the message is the skip reason."""


@dataclass(frozen=True)
class ExportRequest:
    """Everything an export needs, JSON-serialisable so it can cross into the isolated export process."""

    backend: str
    device: str
    checkpoint: str
    size: str
    task: str
    head: str
    height: int
    width: int
    dynamic: bool
    batch: int
    precision: str
    out_dir: str
    options: dict = field(default_factory=dict)  # remedy switches, dynamic ranges, ...
    #: int8 calibration: a dataset YAML whose `calib` (else `val`) split is calibrated on; None: the generated
    #: dataset's calib split (harness.backends._shared.calibration)
    calibration: str | None = None
    #: the model family (harness.core.axes.FAMILIES): which head it has, how its files are named
    family: str = DEFAULT_FAMILY

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> ExportRequest:
        return cls(**d)

    @classmethod
    def for_cell(
        cls,
        cell,
        checkpoint: str,
        out_dir: str,
        options: dict,
        side: int = 640,
        calibration: str | None = None,
    ) -> ExportRequest:
        """The export of `cell` with `options`; a dynamic cell exports at `side` x `side` (mid-range); an int8
        cell calibrates on `calibration` (a dataset YAML; None: the generated dataset)."""
        return cls(
            backend=cell.backend,
            device=cell.device,
            checkpoint=str(checkpoint),
            size=cell.size,
            task=cell.task,
            head=cell.head,
            height=cell.shape.height or side,
            width=cell.shape.width or side,
            dynamic=cell.shape.dynamic,
            batch=cell.batch,
            precision=cell.precision,
            out_dir=str(out_dir),
            options=options,
            calibration=None if calibration is None else str(calibration),
            family=cell.family,
        )


@dataclass(frozen=True)
class ExportResult:
    """What an export produced: the artifact path and facts learned while exporting (delegation, precision)."""

    artifact: str
    info: dict = field(default_factory=dict)


class Runner(ABC):
    """A loaded model. The harness owns the clock: it calls `run` (and `synchronize`) inside its timed region.

    The optional attributes below have defaults here, so the harness reads them directly (never via getattr).
    """

    #: the precision the runtime reports it executes ("fp32", "fp16", "int8", "mixed"), or None when the runtime
    #: cannot tell; never a copy of the request
    precision_executed: str | None = None
    #: how `precision_executed` was read from the runtime, or why it is None
    precision_source: str = "this runtime does not report the precision it executes"
    #: per-element-type counts behind `precision_executed` (layers, nodes or tensors, as `precision_source` says)
    precision_detail: dict | None = None
    #: what one timed call includes: "model" (device-resident inputs), "model+h2d+d2h" (host copies included)
    timing_scope: str = "model"
    #: seconds of JIT compilation done in `load` (torch.compile, TensorRT EP engine build); None: no JIT step
    compile_s: float | None = None
    #: why `compile_s` is None for a backend that does compile (None: the default reason, no JIT step)
    compile_reason: str | None = None
    #: True when `run` enqueues on torch's current CUDA stream (CUDA events can then split host wait from work)
    torch_stream: bool = False

    def cpu_threads(self) -> tuple[int | None, str]:
        """The CPU threads the runtime reports it uses for one inference, and how that was read (or why None)."""
        return None, "this runtime does not report its CPU threads"

    def prepare(self, x: np.ndarray) -> Any:
        """Convert the host input once, outside the timed region (e.g. to a torch tensor or device buffer)."""
        return x

    def device_input(self) -> tuple[Any, Any] | None:
        """(torch device, torch dtype) when `prepare` also takes a torch tensor already on that device in that
        dtype (the end-to-end pipeline then uploads uint8 and converts on the device, as ultralytics' predictor
        does: harness.measure.device_input); None: `prepare` takes the float32 host array only."""
        return None

    @abstractmethod
    def run(self, prepared: Any) -> Any:
        """One inference. Must not return before the result is usable, or `synchronize` must make it so."""

    def synchronize(self) -> None:  # noqa: B027  (optional hook: synchronous runtimes need nothing)
        """Block until asynchronous work issued by `run` has finished (no-op for synchronous CPU runtimes)."""

    @abstractmethod
    def outputs(self, result: Any) -> list[np.ndarray]:
        """The outputs of `run` as host float32 arrays, in the model's output order."""

    def close(self) -> None:  # noqa: B027  (optional hook)
        """Release runtime resources."""

    def streams(self, n: int) -> Streams:
        """`n` ways to run this model at once, each called from its own thread (the scenarios' concurrency).

        Each call takes a prepared input and returns the result, synchronized. The default serialises the calls
        with one lock: a runtime not known to be safe to call from several threads at once gets no concurrency,
        and says so. Runtimes with their own mechanism (ONNX Runtime sessions across threads, OpenVINO infer
        requests, CUDA streams) override this."""
        lock = threading.Lock()

        def call(prepared: Any) -> Any:
            with lock:
                result = self.run(prepared)
                self.synchronize()
                return result

        return Streams(
            [call] * n,
            "serialised: one lock around the runner (this runtime is not known to be safe to call from several "
            "threads at once)",
            concurrent=False,
        )

    def batched(self, n: int) -> Streams | None:
        """One call that runs `n` frames as one batch (a prepared input of batch `n`), for the camera-capacity
        search's batched mechanism (harness.scenarios.capacity); None where the loaded model takes only its
        cell's batch (a static export, a captured graph, a compiled module that would recompile)."""
        return None

    def batched_reason(self) -> str:
        """Why `batched` is None for this runner, in words (the camera-capacity record says it)."""
        return "the loaded model takes only its cell's batch (a static export)"

    def serial(self, n: int, threads: int | None = None) -> Streams:
        """One worker that takes the `n` cameras' frames in turn on this runner (its run plus synchronize)."""

        def call(prepared: Any) -> Any:
            result = self.run(prepared)
            self.synchronize()
            return result

        return Streams(
            [call], f"one worker takes the {n} cameras' frames in turn", False, serial_plan(threads)
        )

    def mechanisms(self, threads: int | None = None) -> list[Mechanism]:
        """The declared ways this loaded model serves N cameras (the camera-capacity search tries each one that
        applies): one worker taking the frames in turn; one stream per camera on this runner (`streams`, each call
        with the whole thread budget); one batched call of the N frames where the model takes batch N. Backends
        with a runtime throughput mode add theirs (sessions, compiled streams or method instances per worker, the
        thread budget split between them). `threads`: the run's CPU thread budget (None on a GPU)."""
        shared_words_ = "one stream per camera on the loaded model, each call with the whole thread budget"
        out = [
            Mechanism(SERIAL, "one worker takes the cameras' frames in turn", lambda n: self.serial(n, threads),
                      lambda n: serial_plan(threads)),
        ]  # fmt: skip
        if self.streams(1).concurrent:
            out.append(
                Mechanism(
                    STREAMS, shared_words_,
                    lambda n: _planned(self.streams(n), Plan(n, threads, 1, words=shared_words(n, threads))),
                    lambda n: Plan(n, threads, 1, words=shared_words(n, threads)),
                )
            )  # fmt: skip
        else:
            why = "the runtime's calls are serialised by a lock: the same as one worker taking the frames in turn"
            out.append(Mechanism(STREAMS, shared_words_, None, None, why))
        if self.batched(2) is None:
            out.append(Mechanism(BATCHED, BATCHED_WORDS, None, None, self.batched_reason(), grouped=True))
        else:
            out.append(
                Mechanism(
                    BATCHED, BATCHED_WORDS,
                    lambda n: _planned(self.batched(n), Plan(1, threads, 1, n, batched_words(n, threads))),
                    lambda n: Plan(1, threads, 1, n, batched_words(n, threads)), grouped=True,
                )
            )  # fmt: skip
        return out


@dataclass
class Streams:
    """Concurrent ways to run one loaded model: one call per stream, and how the runtime runs them at once."""

    calls: list[Callable[[Any], Any]]
    mechanism: str
    #: False when the calls are serialised (no two run at once)
    concurrent: bool = True
    #: what a user deploys to run them so (the camera-capacity search's mechanisms); None: not said
    plan: Plan | None = None


#: the camera-capacity search's mechanisms (harness.scenarios.capacity), simplest first: the order that breaks a tie
SERIAL, STREAMS, SPLIT, INSTANCES, BATCHED = "serial", "streams", "split", "instances", "batched"
MECHANISM_ORDER = (SERIAL, STREAMS, SPLIT, INSTANCES, BATCHED)
BATCHED_WORDS = "one call takes the N cameras' frames as one batch"


@dataclass(frozen=True)
class Plan:
    """How a mechanism serves N cameras, as a user would deploy it: `workers` calls running at once, each with
    `threads` CPU threads (None: a GPU runner), on `instances` runtime instances (sessions, compiled-model streams,
    method instances; 1: the loaded one), `batch` frames per call; `words` says it ("2 InferenceSessions x 1
    intra-op thread, the frames shared between them")."""

    workers: int
    threads: int | None
    instances: int = 1
    batch: int = 1
    words: str = ""

    def same(self) -> tuple:
        """What identifies the deployment: one worker with one instance is one worker whichever mechanism says so
        (the search runs it once)."""
        if self.workers == 1 and self.instances <= 1:
            return (1, self.threads, 1, self.batch)
        return (self.workers, self.threads, self.instances, self.batch)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Mechanism:
    """A declared way of serving N cameras from one loaded runner (`Runner.mechanisms`): `make(n)` the calls for n
    cameras (one per worker; `grouped`: one call takes the n frames as one batch), `plan(n)` what that deploys,
    without loading anything; `why_not` when it does not apply to this runner (then `make` is None)."""

    key: str
    words: str
    make: Callable[[int], Streams] | None
    plan: Callable[[int], Plan] | None
    why_not: str | None = None
    grouped: bool = False


def _threads(threads: int | None) -> str:
    return "" if threads is None else f", {threads} thread{'s' if threads != 1 else ''}"


def serial_words(threads: int | None) -> str:
    return f"one worker, frames in turn{_threads(threads)}"


def shared_words(n: int, threads: int | None) -> str:
    if n == 1:
        return serial_words(threads)
    each = "" if threads is None else f", {threads} threads each"
    return f"{n} concurrent calls on one model{each}"


def batched_words(n: int, threads: int | None) -> str:
    return f"one call of batch {n}{_threads(threads)}"


def split(n: int, threads: int | None) -> tuple[int, int | None]:
    """(workers, threads each) of the thread budget split between the streams serving n cameras: as many workers
    as cameras up to the budget, the budget shared evenly (a worker takes the frames of its cameras in turn)."""
    if threads is None:
        return max(1, n), None
    k = max(1, min(n, threads))
    return k, max(1, threads // k)


def serial_plan(threads: int | None) -> Plan:
    """One worker taking the frames in turn, with `threads` threads."""
    return Plan(1, threads, 1, words=serial_words(threads))


def split_plan(n: int, threads: int | None, words: Callable[[int, int | None], str]) -> Plan:
    """The thread budget split between the runtime instances serving n cameras (`split`), `words(k, t)` naming k
    instances of t threads; one instance is one worker taking the frames in turn."""
    k, t = split(n, threads)
    return serial_plan(t) if k == 1 else Plan(k, t, k, words=words(k, t))


def _planned(streams: Streams | None, plan: Plan) -> Streams:
    if streams is None:
        raise RuntimeError("the runner declared a mechanism it cannot make")
    if streams.plan is None:
        streams.plan = plan
    return streams


class Backend(ABC):
    """One inference backend. Subclasses import their heavy library lazily, inside methods."""

    name: ClassVar[str]
    devices: ClassVar[tuple[str, ...]] = ("cpu",)
    #: precisions this backend can execute, per device
    precisions: ClassVar[dict[str, tuple[str, ...]]] = {"cpu": ("fp32",)}
    #: False when the artifact is the checkpoint itself (torch eager): no export step
    exports: ClassVar[bool] = True
    #: can export one artifact with dynamic height and width
    supports_dynamic: ClassVar[bool] = False
    #: the library whose version keys the export cache
    library: ClassVar[str | None] = None
    #: the backend whose export this one shares (a variant that only loads the artifact differently, such as a
    #: CUDA-graph variant): the export cache keys and names the entry by that backend, so both load one artifact
    export_as: ClassVar[str | None] = None
    #: exports an artifact for a target this host cannot run (record status "exported"); `load` raises
    export_only: ClassVar[bool] = False
    #: where the report lists this backend (lower first); backends of equal order sort by name
    display_order: ClassVar[int] = 100
    #: where `harness.backends.names()` lists this backend (lower first; equal orders sort by name): the order of
    #: the `--backends` choices, of "valid: ..." messages and of the devices gathered from the backends
    registry_order: ClassVar[int] = 1000
    #: can trace its CUDA export on fake CUDA tensors where no GPU is (harness.backends._shared.fake_cuda): the
    #: export request then carries the option `fake_cuda` and `export` stops where a GPU is needed
    fake_cuda: ClassVar[bool] = False

    def fake_cuda_reason(self, cell) -> str | None:
        """Why `cell`'s export cannot be traced on a fake CUDA device here, or None when it can: a CUDA cell of a
        backend that declares `fake_cuda`, torch importable, and no CUDA device (where one is, the real export
        runs)."""
        if not self.fake_cuda:
            return f"{self.name} has no fake-device trace"
        if cell.device != "cuda":
            return "only CUDA cells are traced on a fake device"
        if cell.precision != "fp32":
            return "the fake-device trace exports fp32 only"
        import importlib.util

        from harness.backends._shared.probes import not_installed, torch_cuda_missing

        reason = not_installed("torch")
        if reason:
            return reason
        if importlib.util.find_spec("triton") is None:
            return (
                "triton is not installed: the fake-device trace generates Triton kernels for the stated GPU"
            )
        return "a CUDA device is here: the real export runs" if torch_cuda_missing() is None else None

    def export_only_reason(self, cell) -> str | None:
        """Why `cell` is export-only here (record status "exported"), or None when it runs.

        Export-only targets say so by default; a backend that decides per host (ExecuTorch CUDA without a CUDA
        runtime build) overrides this.
        """
        return f"export-only target: no {self.name} runtime on this host" if self.export_only else None

    @abstractmethod
    def probe(self, device: str) -> str | None:
        """None when this backend can run on `device` here, else the reason it cannot."""

    def unsupported(self, cell) -> str | None:
        """A reason this backend cannot run `cell` at all (precision, device), or None."""
        if cell.device not in self.devices:
            return f"{self.name} has no {cell.device} device (devices: {', '.join(self.devices)})"
        precs = self.precisions.get(cell.device, ())
        if cell.precision not in precs:
            return f"{self.name} on {cell.device} runs {', '.join(precs)}, not {cell.precision}"
        if cell.shape.dynamic and not self.supports_dynamic:
            return f"{self.name} does not export dynamic height/width"
        return None

    def export(self, req: ExportRequest) -> ExportResult:
        """Export the model; runs in an isolated process. Writes into req.out_dir."""
        raise NotImplementedError

    @abstractmethod
    def load(self, artifact: Path, cell, export_info: dict) -> Runner:
        """Load an exported artifact (or the checkpoint, for non-exporting backends) for `cell`."""


class ExportOnlyBackend(Backend):
    """A backend for a target no runtime on this host can run: it exports (record status "exported"), and `load`
    refuses with the reason. A subclass declares its facts, `probe` and `export`."""

    export_only: ClassVar[bool] = True

    def load(self, artifact: Path, cell, export_info: dict) -> Runner:
        raise BackendUnavailable(f"no runtime for {self.name} on this host; export only")
