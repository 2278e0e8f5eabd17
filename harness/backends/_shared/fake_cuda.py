"""A CUDA export traced on a machine without a GPU: fake CUDA tensors, a stated target, and where it has to stop.

A CPU build of torch can trace for a CUDA device: under `FakeTensorMode` a tensor created with device="cuda" is a
fake one (shape, dtype, device, no data), and `torch.export`, ExecuTorch's partitioner and TorchInductor's lowering
and code generation work on such tensors. What they cannot do without a device is run a kernel: autotuning
benchmarks candidate kernels on the GPU, and compiling the package needs the CUDA toolchain and a device. The trace
goes as far as it honestly can and stops there (`DeviceNeeded`), or fails earlier with the error a GPU export would
meet, since the stages before that point are the same code.

What this CPU build of torch lacks is bridged by the narrowest stand-in, each counted in the record (`shims`):

- `make_shims`, a torch function mode: five Python-level entry points of torch set a CUDA device guard or initialise
  CUDA before they dispatch, which a CPU build refuses ("PyTorch is not linked with support for cuda devices"):
  `Tensor.__getitem__` (rewritten as the aten ops it dispatches to: select, slice, unsqueeze, index),
  `Tensor.contiguous` (aten.clone in that memory format), `Tensor.to` and `Tensor.type_as` onto the CUDA device
  (the tensor itself when it is there already, aten._to_copy for a fake tensor, which export records as the
  graph's device move; a real CPU constant becomes a fake CUDA tensor of the same shape and dtype) and
  `Tensor.__deepcopy__` of a fake tensor (a fake tensor of the same shape: there is no data to copy).
- `stated_device`: the device facts Inductor asks for (compute capability, SM count, ...) come from a stated
  target (`TARGETS`, NVIDIA's published figures, named in the record), never from a device; Triton is given a
  driver that answers only "which target" and refuses everything else; autotuning takes Inductor's first listed
  choice without timing it (the choices ExecuTorch's CUDA backend allows are Triton templates only, so which one
  wins changes the kernels, not the operators); Inductor's constant folding of uniform weights, which reads the
  weights' values, is off (fake weights have none); the autotuning code block, the first step that runs kernels,
  is where the trace stops.

Nothing here is a measurement: a record from this path has its own status (`traced` or `trace_failed`) and the
label `FAKE_LABEL` wherever it is shown, and no latency.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

from harness.core.null_reasons import FAKE_LABEL  # the words every page and record shows beside a fake result

log = logging.getLogger(__name__)

#: the export option that asks a backend for the trace (its value: a key of TARGETS)
FAKE_OPTION = "fake_cuda"


@dataclass(frozen=True)
class StatedTarget:
    """The facts of a GPU the trace compiles for, as published by its vendor (not read from a device)."""

    name: str
    source: str
    major: int
    minor: int
    multi_processor_count: int
    regs_per_multiprocessor: int
    max_threads_per_multi_processor: int
    max_threads_per_block: int
    warp_size: int
    shared_memory_per_multiprocessor: int
    shared_memory_per_block_optin: int
    l2_cache_size: int
    total_memory: int

    @property
    def sm(self) -> str:
        return f"sm_{self.major}{self.minor}"

    def properties(self):
        """The target as torch.cuda.get_device_properties names its fields (an NVIDIA device: no gcnArchName).
        A field not here raises AttributeError, naming the fact Inductor wanted."""
        import types

        return types.SimpleNamespace(
            name=self.name,
            major=self.major,
            minor=self.minor,
            multi_processor_count=self.multi_processor_count,
            regs_per_multiprocessor=self.regs_per_multiprocessor,
            max_threads_per_multi_processor=self.max_threads_per_multi_processor,
            max_threads_per_block=self.max_threads_per_block,
            warp_size=self.warp_size,
            shared_memory_per_multiprocessor=self.shared_memory_per_multiprocessor,
            shared_memory_per_block_optin=self.shared_memory_per_block_optin,
            L2_cache_size=self.l2_cache_size,
            total_memory=self.total_memory,
            gcnArchName="",
            is_integrated=False,
        )


GIB = 1024**3
#: targets a trace can state; sm_90 is the H100 SXM (the H200 has the same SM: its memory differs)
TARGETS = {
    "sm_90": StatedTarget(
        name="NVIDIA H100 SXM5 80GB (stated target: compute capability 9.0)",
        source="NVIDIA H100 Tensor Core GPU Architecture whitepaper and CUDA C++ Programming Guide, "
        "compute capability 9.0 (132 SMs, 64K registers, 2048 threads and 228 KB shared memory per SM, "
        "50 MB L2)",
        major=9,
        minor=0,
        multi_processor_count=132,
        regs_per_multiprocessor=65536,
        max_threads_per_multi_processor=2048,
        max_threads_per_block=1024,
        warp_size=32,
        shared_memory_per_multiprocessor=233472,
        shared_memory_per_block_optin=232448,
        l2_cache_size=50 * 1024**2,
        total_memory=80 * GIB,
    )
}
DEFAULT_TARGET = "sm_90"
#: the artifact of a trace: what it did, as JSON (the export cache keeps it like any artifact)
TRACE_FILE = "trace.json"


#: what a CPU build of torch says where a CUDA step slipped past the stand-ins: the trace cannot go on there,
#: which says nothing about the export on a GPU (the failure is classified device_missing, never a lowering's)
CPU_BUILD_WORDS = ("not linked with support for cuda devices", "Torch not compiled with CUDA enabled")


class CannotTrace(RuntimeError):
    """This CPU build of torch cannot trace past a step (a CUDA device guard or CUDA initialisation no stand-in
    covers): the trace ends there without a verdict on the export."""


class DeviceNeeded(RuntimeError):
    """The trace reached a step that runs code on the GPU (or compiles for one with its toolchain)."""

    def __init__(self, step: str) -> None:
        super().__init__(f"needs a GPU: {step}")
        self.step = step


def device_needed(e: BaseException | None) -> DeviceNeeded | None:
    """The DeviceNeeded behind `e`, through the wrappers it travels in (Inductor re-raises as InductorError and
    LoweringException, ExecuTorch as its own errors), or None."""
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, DeviceNeeded):
            return e
        seen.add(id(e))
        e = getattr(e, "inner_exception", None) or e.__cause__ or e.__context__
    return None


@dataclass
class Trace:
    """What one fake-device export did: the stages it went through with their seconds, where it stopped and why,
    the stand-ins it used, and the device facts it asked for."""

    target: str
    stages: list[dict] = field(default_factory=list)
    stopped_at: str | None = None
    shims: dict[str, int] = field(default_factory=dict)
    device_facts: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def count(self, table: dict[str, int], name: str) -> None:
        table[name] = table.get(name, 0) + 1

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """One stage: its seconds and how it ended (done, stopped where a GPU is needed, or failed)."""
        entry: dict[str, Any] = {"name": name, "status": "running"}
        self.stages.append(entry)
        print(f"[phase] {name} started", flush=True)
        t0 = time.perf_counter()
        try:
            yield
        except BaseException as e:
            needed = device_needed(e)
            if needed is None and any(w in str(e) for w in CPU_BUILD_WORDS):
                entry["status"] = f"cannot trace: {e}"[:300]
                self.notes.append(
                    f"{name}: this CPU build of torch cannot trace past {type(e).__name__}: {e}"
                )
                raise CannotTrace(
                    f"{e} (torch is a CPU build; the fake-device trace cannot go past this step: it says nothing "
                    "about the export on a GPU)"
                ) from e
            if needed is None:
                entry["status"] = f"failed: {type(e).__name__}"
                raise
            entry["status"] = f"stopped: {needed}"
            self.stopped_at = needed.step
            raise needed from None
        else:
            entry["status"] = "done"
        finally:
            entry["seconds"] = round(time.perf_counter() - t0, 3)
            print(f"[phase] {name} {entry['status']} in {entry['seconds']:.1f} s", flush=True)

    def summary(self) -> dict:
        """The record's `fake_device` section."""
        target = TARGETS[self.target]
        return {
            "label": FAKE_LABEL,
            "device": "cuda (fake tensors; torch is a CPU build)",
            "target": {"sm": target.sm, **asdict(target)},
            "stages": self.stages,
            "stopped_at": self.stopped_at,
            "shims": dict(sorted(self.shims.items())),
            "device_facts_asked": dict(sorted(self.device_facts.items())),
            "notes": self.notes,
        }


def write_trace(out_dir: Path, info: dict, trace: Trace) -> str:
    """The trace's artifact: the export info with the trace's summary, as JSON in `out_dir`; its path."""
    info["fake_device"] = trace.summary()
    path = Path(out_dir) / TRACE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(info, indent=1, sort_keys=True, default=str))
    return str(path)


def graph_inventory(ep) -> dict[str, int]:
    """Operator name -> count in an exported program's graph."""
    nodes = ep.graph_module.graph.nodes
    counts = Counter(str(n.target) for n in nodes if n.op == "call_function" and hasattr(n.target, "_schema"))
    return dict(sorted(counts.items()))


def attach(e: BaseException, trace: Trace) -> BaseException:
    """Carry the trace's summary on a failure out of the export worker (harness.execute.worker reads
    `export_info`), so the failed record says how far the trace got."""
    e.export_info = {"fake_device": trace.summary()}  # type: ignore[attr-defined]
    return e


# -- fake tensors --------------------------------------------------------------------------------------------------
def fake_like(t, mode, device: str = "cuda"):
    """A fake tensor of `mode` with `t`'s shape, strides and dtype on `device` (no data)."""
    import torch

    with mode:
        return torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype, device=device)


def fake_module(model, mode) -> list[str]:
    """Replace every parameter, buffer and plain tensor attribute of `model` by a fake CUDA tensor of `mode`, in
    place; returns the tensor attributes replaced (ultralytics' Detect keeps its anchors and strides as plain
    attributes: run the model once on the CPU first, so that they hold the export shape's static anchors)."""
    import torch

    attrs = []
    for name, m in model.named_modules():
        for n, p in list(m._parameters.items()):
            if p is not None:
                m._parameters[n] = torch.nn.Parameter(fake_like(p.detach(), mode), requires_grad=False)
        for n, b in list(m._buffers.items()):
            if b is not None:
                m._buffers[n] = fake_like(b, mode)
        for n, v in list(vars(m).items()):
            if isinstance(v, torch.Tensor) and not n.startswith("_"):
                setattr(m, n, fake_like(v, mode))
                attrs.append(f"{name}.{n}" if name else n)
    return attrs


def adopt(ep) -> None:
    """Rebind the exported program's weights and constants to the fake mode its graph was traced in.

    torch.export fakifies the inputs in a mode of its own; weights left in the mode they were made in meet tensors
    of another mode in the passes that run the graph again (ExecuTorch's edge lowering, Inductor), which refuses
    them. On a GPU they are real tensors and every mode takes them; here each is a fake of the graph's mode."""
    import torch
    from torch._export.utils import _detect_fake_mode_from_gm

    mode = _detect_fake_mode_from_gm(ep.graph_module)
    for k, v in list(ep.state_dict.items()):
        fake = fake_like(v, mode, v.device.type)
        ep._state_dict[k] = (
            torch.nn.Parameter(fake, requires_grad=False) if isinstance(v, torch.nn.Parameter) else fake
        )
    for k, v in list(ep.constants.items()):
        if isinstance(v, torch.Tensor):
            ep._constants[k] = fake_like(v, mode, v.device.type)


def export_fake(model, shape: tuple[int, ...], shims, dynamic_shapes=None):
    """torch.export of `model` (its forward run once on the CPU at `shape` for its static anchors, then made fake)
    on a fake CUDA input of `shape`; the program's tensors in the graph's own fake mode (`adopt`)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    with torch.no_grad():
        model(torch.zeros(*shape))
    mode = FakeTensorMode()
    replaced = fake_module(model, mode)
    if replaced:
        shims.trace.notes.append(
            "tensor attributes made fake after one CPU forward at the export shape: " + ", ".join(replaced)
        )
    with mode:
        im = torch.empty(*shape, device="cuda")
    with shims, aten_copies(shims.trace), torch.no_grad():
        ep = torch.export.export(model, (im,), dynamic_shapes=dynamic_shapes, strict=False)
    adopt(ep)
    return ep


# -- the stand-ins for what a CPU build lacks ------------------------------------------------------------------------
def _consumes(k) -> int:
    import torch

    if k is None or k is Ellipsis:
        return 0
    if isinstance(k, torch.Tensor) and k.dtype == torch.bool:
        return max(k.dim(), 1)
    return 1


def getitem_by_ops(t, key):
    """`t[key]` as the aten ops the C++ indexing dispatches to (select, slice, unsqueeze, then one aten.index for
    the tensor indices), without its CUDA device guard; NotImplemented for keys it does not handle (lists)."""
    import torch

    key = key if isinstance(key, tuple) else (key,)
    if any(isinstance(k, (list, str, float)) for k in key):
        return NotImplemented
    used = sum(_consumes(k) for k in key)
    out, d, tensors = t, 0, {}
    for k in key:
        if k is Ellipsis:
            d += t.dim() - used
        elif k is None:
            out = out.unsqueeze(d)
            d += 1
        elif isinstance(k, torch.Tensor):
            tensors[d] = k
            d += _consumes(k)
        elif isinstance(k, slice):
            if not (k.start is None and k.stop is None and k.step in (None, 1)):
                out = torch.ops.aten.slice.Tensor(out, d, k.start, k.stop, k.step or 1)
            d += 1
        else:
            out = out.select(d, k)
    if tensors:
        out = torch.ops.aten.index.Tensor(out, [tensors.get(i) for i in range(max(tensors) + 1)])
    return out


def _target_device(args, kwargs):
    """The device of a `Tensor.to(device)` call with nothing else, or None."""
    import torch

    rest = [*args[1:], *kwargs.values()]
    if len(rest) != 1 or not isinstance(rest[0], (str, torch.device)):
        return None
    try:
        return torch.device(rest[0])
    except (RuntimeError, TypeError):
        return None


@contextlib.contextmanager
def aten_copies(trace: Trace) -> Iterator[None]:
    """`Tensor.copy_` on a fake CUDA tensor through aten.copy_ while open. With symbolic shapes (a dynamic export)
    the fake tensor runs torch's Python decompositions of in-place ops (`inplace_op`: the out-of-place op, then
    `args[0].copy_(out)`), inside dispatch where no torch function mode sees them; the method sets a CUDA device
    guard, the op does not."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensor

    method = torch.Tensor.copy_

    def copy_(self, src, non_blocking=False):
        if isinstance(self, FakeTensor) and self.device.type == "cuda":
            trace.count(trace.shims, "Tensor.copy_ of a fake CUDA tensor -> aten.copy_")
            return torch.ops.aten.copy_.default(self, src, non_blocking)
        return method(self, src, non_blocking)

    torch.Tensor.copy_ = copy_  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.Tensor.copy_ = method  # type: ignore[method-assign]


def _moved(t, device, dtype=None):
    """`t` on the fake CUDA device through aten._to_copy, which a fake tensor runs without initialising CUDA (and
    which export records as the graph's own device move)."""
    import torch

    return torch.ops.aten._to_copy.default(t, dtype=dtype or t.dtype, device=device)


class _ShimLogic:
    """The body of `Shims`, kept apart from torch's TorchFunctionMode so that importing this module imports no
    torch (the backends' registry lists backends without importing their libraries)."""

    def __init__(self, trace: Trace) -> None:
        super().__init__()
        self.trace = trace
        self.mode = None  # the fake mode of the last fake tensor seen (a real tensor moved to cuda joins it)

    def _use(self, name: str) -> None:
        self.trace.count(self.trace.shims, name)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        import torch
        from torch._subclasses.fake_tensor import FakeTensor

        kwargs = kwargs or {}
        t = args[0] if args else None
        fake = isinstance(t, FakeTensor)
        if fake:
            self.mode = t.fake_mode
        on_cuda = isinstance(t, torch.Tensor) and t.device.type == "cuda"
        if func is torch.Tensor.__getitem__ and on_cuda:
            out = getitem_by_ops(t, args[1])
            if out is not NotImplemented:
                self._use("Tensor.__getitem__ -> aten select/slice/unsqueeze/index")
                return out
        elif func is torch.Tensor.contiguous and fake and on_cuda:
            fmt = kwargs.get("memory_format", args[1] if len(args) > 1 else torch.contiguous_format)
            self._use("Tensor.contiguous -> aten.clone")
            return (
                t
                if t.is_contiguous(memory_format=fmt)
                else torch.ops.aten.clone.default(t, memory_format=fmt)
            )
        elif func is torch.Tensor.__deepcopy__ and fake:
            self._use("Tensor.__deepcopy__ of a fake tensor -> a new fake tensor")
            out = fake_like(t, t.fake_mode, t.device.type)
            if isinstance(t, torch.nn.Parameter):
                out = torch.nn.Parameter(out, requires_grad=t.requires_grad)
            args[1][id(t)] = out
            return out
        elif func is torch.Tensor.type_as and fake and not on_cuda and isinstance(args[1], FakeTensor):
            other = args[1]
            if other.device.type == "cuda":
                self._use("Tensor.type_as(a CUDA tensor) -> aten._to_copy")
                return _moved(t, other.device, other.dtype)
        elif func is torch.Tensor.to and isinstance(t, torch.Tensor):
            dev = _target_device(args, kwargs)
            if dev is not None and dev.type == "cuda":
                if on_cuda and fake:
                    self._use("Tensor.to(cuda) of a fake CUDA tensor -> itself")
                    return t
                if fake:
                    self._use("Tensor.to(cuda) of a fake CPU tensor -> aten._to_copy")
                    return _moved(t, dev)
                if self.mode is not None:
                    self._use(
                        "Tensor.to(cuda) of a real CPU tensor -> a fake CUDA tensor (its values dropped)"
                    )
                    return fake_like(t, self.mode)
        return func(*args, **kwargs)


_SHIMS: type | None = None


def make_shims(trace: Trace):
    """The torch function mode that stands in for the CUDA device guard and CUDA initialisation a CPU build of
    torch lacks (the module docstring lists each); every use is counted in `trace.shims`. Enter it around each
    step that handles fake CUDA tensors."""
    global _SHIMS
    if _SHIMS is None:
        from torch.overrides import TorchFunctionMode

        _SHIMS = type("Shims", (_ShimLogic, TorchFunctionMode), {"__doc__": make_shims.__doc__})
    return _SHIMS(trace)


# -- the stated device -------------------------------------------------------------------------------------------------
class StatedDriver:
    """A Triton driver that answers which target to generate code for, and refuses everything that needs a device
    (streams, launching, benchmarking)."""

    def __init__(self, target: StatedTarget, trace: Trace) -> None:
        from triton.backends.compiler import GPUTarget

        self._target = GPUTarget("cuda", target.major * 10 + target.minor, target.warp_size)
        self._trace = trace

    def get_current_target(self):
        self._trace.count(self._trace.device_facts, "triton target")
        return self._target

    def get_active_torch_device(self):
        import torch

        return torch.device("cuda", 0)

    def get_current_device(self) -> int:
        return 0

    def __getattr__(self, name: str):
        raise DeviceNeeded(f"Triton's driver ({name})")


@contextlib.contextmanager
def stated_device(trace: Trace) -> Iterator[None]:
    """Inductor and Triton compile for `trace.target` without a device; the first step that would run kernels
    (the autotuning code block) raises DeviceNeeded. See the module docstring for each stand-in."""
    import torch
    import torch._inductor.config as inductor_config
    import torch._inductor.graph as inductor_graph
    import torch._inductor.scheduler as inductor_scheduler
    from torch._dynamo.device_interface import CudaInterface
    from torch._inductor.codegen.wrapper import PythonWrapperCodegen
    from torch._inductor.select_algorithm import AlgorithmSelectorCache

    target = TARGETS[trace.target]

    def asked(name: str, value):
        def answer(*_a, **_k):
            trace.count(trace.device_facts, name)
            return value

        return answer

    def untimed(self, choices, *_a, **_k):
        trace.count(trace.shims, "autotuning: Inductor's first listed choice, not timed")
        return lambda cs: {c: float(i) for i, c in enumerate(cs)}

    def autotune_block(self, *_a, **_k):
        raise DeviceNeeded("autotuning the generated kernels (Inductor's autotuning code block runs them)")

    same_tensor = inductor_graph.is_same_tensor

    def is_same_tensor(a, b) -> bool:
        from torch._subclasses.fake_tensor import FakeTensor
        from torch.multiprocessing.reductions import StorageWeakRef

        if not (isinstance(a, FakeTensor) or isinstance(b, FakeTensor)):
            return same_tensor(a, b)
        trace.count(trace.shims, "Inductor constant dedup by storage identity, not data pointer")
        return (a.size(), a.stride(), a.dtype, a.device, a.storage_offset()) == (
            b.size(),
            b.stride(),
            b.dtype,
            b.device,
            b.storage_offset(),
        ) and StorageWeakRef(a.untyped_storage()) == StorageWeakRef(b.untyped_storage())

    props = asked("device properties", target.properties())
    capability = (target.major, target.minor)
    patches: list[Any] = [
        mock.patch.object(torch.cuda, "get_device_properties", props),
        mock.patch.object(torch.cuda, "get_device_capability", asked("compute capability", capability)),
        mock.patch.object(torch.cuda, "current_device", asked("current device", 0)),
        mock.patch.object(torch.cuda, "device_count", asked("device count", 1)),
        mock.patch.object(CudaInterface, "get_device_properties", staticmethod(props)),
        mock.patch.object(
            CudaInterface,
            "get_compute_capability",
            staticmethod(asked("compute capability", target.major * 10 + target.minor)),
        ),
        mock.patch.object(inductor_scheduler, "has_triton", asked("triton usable", True)),
        mock.patch.object(inductor_graph, "is_same_tensor", is_same_tensor),
        mock.patch.object(AlgorithmSelectorCache, "make_benchmark_fn", untimed),
        mock.patch.object(PythonWrapperCodegen, "generate_and_run_autotune_block", autotune_block),
        inductor_config.patch(
            {
                # reads the weights' values (fake weights have none); folds constants, never decides an operator
                "joint_graph_constant_folding": False,
                # small constants would be inlined by value: kept as named constants instead
                "always_keep_tensor_constants": True,
                # fusion decisions by timing fused kernels on the device: by Inductor's heuristics instead
                "benchmark_epilogue_fusion": False,
                # code generation in this process, where the stated driver is installed
                "compile_threads": 1,
                # one pass: the C++ wrapper (where ExecuTorch checks its fallback kernels) is generated before
                # the autotuning block, the point where the trace stops
                "triton.autotune_at_compile_time": True,
            }
        ),
    ]
    from triton.runtime.driver import driver

    with contextlib.ExitStack() as stack:
        for p in patches:
            stack.enter_context(p)
        previous = driver._active
        driver.set_active(StatedDriver(target, trace))
        stack.callback(setattr, driver, "_active", previous)
        yield


def trace_export(
    target: str,
    model,
    shape: tuple[int, ...],
    info: dict,
    lowering: str,
    lower: Callable[[Any], Any],
    dynamic_shapes=None,
) -> Trace:
    """One export traced on a fake CUDA device for the stated `target`: torch.export of `model` on an input of
    `shape` (`export_fake`; its operators into `info["graph_ops"]`), then `lower(exported program)` as the stage
    `lowering`, on the stated device with the stand-ins, until it needs a GPU (DeviceNeeded ends the stage there).
    Returns the trace; a failure on the way is raised carrying it (`attach`)."""
    trace = Trace(target)
    shims = make_shims(trace)
    try:
        with trace.stage("torch.export on fake CUDA tensors"):
            ep = export_fake(model, shape, shims, dynamic_shapes)
        info["graph_ops"] = graph_inventory(ep)
        with trace.stage(lowering), stated_device(trace), shims:
            lower(ep)
        # nothing asked for a device: say so rather than call it compiled
        trace.notes.append(f"{lowering} returned without reaching a step that needs a GPU")
    except DeviceNeeded:
        pass  # the stop: the stage says where
    except Exception as e:
        raise attach(e, trace) from None
    return trace
