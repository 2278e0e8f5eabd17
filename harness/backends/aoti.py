"""AOTInductor: torch.export of the prepared model, compiled ahead of time into a .pt2 package, run by libtorch.

The export process does both steps (torch.export, then `torch._inductor.aoti_compile_and_package`, with Inductor's
caches off so that the time is a cold compile) and reports their times separately in the export info. `load` is
`torch._inductor.aoti_load_package`; a call goes straight to the package loader's `run` (flat tensors in and out),
without the pytree round-trip of `AOTICompiledModel.__call__`.
On CUDA the compiled model runs on torch's current stream, so CUDA events and CUDA-graph capture see its work.
"""

from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path
from typing import ClassVar

from harness.backends import register
from harness.backends._shared.backbone_only import (
    REMEDY_BACKBONE_ONLY,
    HostTopKRunner,
    backbone_only,
    export_remedy,
    postprocess_spec,
)
from harness.backends._shared.cuda_streams import per_stream_calls
from harness.backends._shared.fake_cuda import FAKE_OPTION
from harness.backends._shared.libstdcxx import PRELOAD_OPTION, promote_global, system_libstdcxx, wrapper_facts
from harness.backends._shared.precision import graph_value_dtypes, torch_dtype_counts, verdict
from harness.backends._shared.probes import inductor_missing, not_installed
from harness.backends._shared.torch_runtime import TorchDeviceRunner, set_tf32, tf32_switches, torch_dtype
from harness.backends.base import Backend, ExportRequest, ExportResult, Runner, Streams
from harness.threads import apply_torch

log = logging.getLogger(__name__)

DYNAMIC_EXAMPLE = 640  # example height/width when a dynamic request carries no shape


class AotiRunner(TorchDeviceRunner):
    """A loaded AOTInductor package. Inputs are placed on the device in `prepare`, outside the timed region; on
    CUDA it launches on torch's current stream."""

    def __init__(self, compiled, device: str, dtype, export_info: dict | None = None) -> None:
        super().__init__(device, dtype)
        self.compiled = compiled
        loader = getattr(compiled, "loader", None)
        self._run = loader.run if loader is not None and hasattr(loader, "run") else None
        self.precision_executed, self.precision_source, self.precision_detail = aoti_precision(
            export_info or {}, device
        )

    def cpu_threads(self) -> tuple[int | None, str]:
        n, how = super().cpu_threads()
        if self._cuda:
            return n, how
        return n, f"{how}; AOTInductor's CPU kernels parallelise with the same OpenMP threads"

    def run(self, prepared):
        if self._run is not None:
            return self._run([prepared])
        return self.compiled(prepared)

    def streams(self, n: int) -> Streams:
        if not self._cuda:
            return super().streams(n)
        return per_stream_calls(
            self.run,
            self.device,
            n,
            f"{n} CUDA streams, one per thread (the package's kernels launch on the calling thread's current "
            "stream; its loader holds one model instance, so the host side of the calls takes turns)",
            cuda=self.cuda_api,
        )


def aoti_precision(export_info: dict, device: str) -> tuple[str | None, str, dict | None]:
    """(precision_executed, precision_source, precision_detail) of an AOTInductor package.

    The package does not expose its constants' dtypes at run time (its loader lists their names only), so this
    reads the dtypes `Aoti.export` counted in the program it compiled: the parameters and buffers, and the
    tensors the graph's operators produce. On CUDA the detail also has the TF32 switches at load and at export.
    """
    params = export_info.get("parameter_dtypes")
    if not params:
        return (
            None,
            "the export info has no parameter dtypes (artifact exported before they were recorded)",
            None,
        )
    detail: dict = {"parameters": params, "graph_values": export_info.get("graph_dtypes")}
    source = "export-time dtypes of the torch.export program that AOTInductor compiled (its parameters)"
    if str(device).startswith("cuda"):
        detail.update(tf32_switches())
        detail["tf32_at_export"] = export_info.get("tf32_at_export")
    executed = verdict(params)
    if executed is None:
        source = "the compiled program has no floating-point parameters to read a precision from"
    return executed, source, detail


def fake_export(req: ExportRequest, out: Path) -> ExportResult:
    """The CUDA package traced on fake CUDA tensors (harness.backends._shared.fake_cuda): torch.export, then
    AOTInductor's lowering, code generation and C++ wrapper for the stated target, up to the step that needs a GPU.
    The artifact is the trace's JSON; a failure before that step is raised as a GPU export would meet it."""
    import torch._inductor

    from harness.backends._shared.fake_cuda import trace_export, write_trace

    model, spec, h, w, dynamic_shapes = prepared_for_export(req)
    info: dict = {"device": "cuda", "remedy": req.options.get("remedy")}
    if spec is not None:
        info["host_postprocess"] = spec
    pt2 = out / f"{req.family}{req.size}-{req.task}-aoti-cuda{'-backbone' if spec is not None else ''}.pt2"
    trace = trace_export(
        req.options[FAKE_OPTION],
        model,
        (req.batch, 3, h, w),
        info,
        "AOTInductor lowering, code generation and C++ wrapper",
        lambda ep: torch._inductor.aoti_compile_and_package(ep, package_path=str(pt2)),
        dynamic_shapes,
    )
    return ExportResult(write_trace(out, info, trace), info)


def prepared_for_export(req: ExportRequest):
    """The network as ultralytics prepares it for `req` (the backbone-only remedy applied), with the host
    post-processing spec or None, the example height and width, and the dynamic-shape spec or None."""
    from harness.yolo.models import prepared_model

    h, w = (req.height or DYNAMIC_EXAMPLE), (req.width or DYNAMIC_EXAMPLE)
    model = prepared_model(req.checkpoint, req.head, (h, w), dynamic=req.dynamic)
    spec = None
    if export_remedy(req) == REMEDY_BACKBONE_ONLY:
        spec = postprocess_spec(model)
        model = backbone_only(model)
    dynamic_shapes = None
    if req.dynamic:
        from harness.yolo.dynamic import dynamic_shapes_spec

        dynamic_shapes = dynamic_shapes_spec(req.options)
    return model, spec, h, w, dynamic_shapes


def export_program(req: ExportRequest, device: str, dtype):
    """torch.export of the network as ultralytics prepares it, on `device` in `dtype`; dynamic H/W when asked.

    Returns (exported program, host post-processing spec or None). With the request option
    {"remedy": "backbone-only"} the network stops before the head's top-k (`_shared.backbone_only`), and the
    spec tells the runner how to run that top-k on the host, inside the timed call (`HostTopKRunner`).
    """
    import torch

    model, spec, h, w, dynamic_shapes = prepared_for_export(req)
    model = model.to(device).to(dtype)
    im = torch.zeros(req.batch, 3, h, w, device=device, dtype=dtype)
    with torch.no_grad():
        return torch.export.export(model, (im,), dynamic_shapes=dynamic_shapes, strict=False), spec


#: export option `aoti_link` of the remedy rung aoti-shared-libstdcxx (harness/execute/remedies.yaml)
SHARED_LIBSTDCXX = "shared-libstdcxx"


def link_patch(link: str | None):
    """The Inductor config under which the package is compiled for the export option `aoti_link`.

    On the H100 (results/samples/2026-11-26-h100) the CUDA package's wrapper.so carried a static copy of libstdc++
    beside the process's shared one and crashed inside std::regex while the model was built. `shared-libstdcxx`
    puts `-l:libstdc++.so.6` on the link line (AOTInductor's `custom_op_libs` become `-l` options) ahead of the
    compiler's own libstdc++, so the wrapper's C++ library symbols come from the shared one."""
    import torch._inductor

    if link is None:
        return contextlib.nullcontext()
    if link != SHARED_LIBSTDCXX:
        raise ValueError(f"aoti_link: unknown {link!r}; valid: {SHARED_LIBSTDCXX}")
    libs = list(torch._inductor.config.aot_inductor.custom_op_libs or [])  # type: ignore[attr-defined]
    return torch._inductor.config.patch(  # type: ignore[attr-defined]
        {"aot_inductor.custom_op_libs": [*libs, ":libstdc++.so.6"]}
    )


def load_package(artifact: Path, run_single_threaded: bool, device: str, options: dict):
    """The loaded package. `options` are a remedy's load_options (harness/execute/remedies.yaml):
    `aoti_vec_isa_ok` skips Inductor's CPU vector-ISA check in `aoti_load_package` (it compiles test programs and
    starts a child python); `aoti_loader: direct` builds torch's native loader directly, as `aoti_load_package`
    does after its device-information check (torch/export/pt2_archive/_package.py, `_load_aoti`);
    `aoti_preload_libstdcxx` puts the system libstdc++ first in the global symbol scope before the load
    (`preload_libstdcxx`)."""
    import torch._inductor

    if options.get(PRELOAD_OPTION):
        preload_libstdcxx()

    # device_index -1 is the package's own device (cpu, or the current CUDA device)
    device_index = 0 if device == "cuda" else -1
    if options.get("aoti_loader") == "direct":
        from torch._inductor.package.package import AOTICompiledModel

        loader = torch._C._aoti.AOTIModelPackageLoader(  # type: ignore[attr-defined]
            str(artifact), "model", run_single_threaded, 1, device_index
        )
        return AOTICompiledModel(loader)
    isa = (
        torch._inductor.config.patch({"cpp.vec_isa_ok": True})  # type: ignore[attr-defined]
        if options.get("aoti_vec_isa_ok")
        else contextlib.nullcontext()
    )
    with isa:
        return torch._inductor.aoti_load_package(
            str(artifact), run_single_threaded=run_single_threaded, device_index=device_index
        )


def preload_libstdcxx() -> dict:
    """The rung aoti-preload-libstdcxx in this process: the system libstdc++ (the one this process runs with)
    opened with RTLD_GLOBAL, after LD_PRELOAD where the probe started this process with it. Raises when there is
    none to preload."""
    found = system_libstdcxx()
    if found["path"] is None:
        raise RuntimeError(f"aoti-preload-libstdcxx: {found['reason']}")
    facts = {**found, **promote_global(found["path"])}
    log.info("libstdc++ preloaded: %s", facts)
    return facts


@register
class Aoti(Backend):
    name = "aoti"
    display_order = 80
    registry_order = 70
    devices = ("cpu", "cuda")
    precisions = {"cpu": ("fp32",), "cuda": ("fp32", "fp16")}
    supports_dynamic = True
    library = "torch"
    fake_cuda = True
    #: load with AOTInductor's single-threaded runner (required under CUDA-graph capture)
    run_single_threaded: ClassVar[bool] = False

    def probe(self, device: str) -> str | None:
        reason = not_installed("torch")
        if reason:
            return reason
        import torch
        import torch._inductor

        if not hasattr(torch._inductor, "aoti_compile_and_package"):
            return f"torch {torch.__version__} has no torch._inductor.aoti_compile_and_package (needs torch >= 2.6)"
        # the package is a shared library compiled here (C++ on the CPU, Triton kernels on CUDA)
        return inductor_missing(
            device, "AOTInductor", "AOTInductor needs a C++ compiler to build its shared library"
        )

    def export(self, req: ExportRequest) -> ExportResult:
        import torch
        import torch._inductor

        device = "cuda" if req.device == "cuda" else "cpu"
        dtype = torch_dtype(req.precision)
        out = Path(req.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        if req.options.get(FAKE_OPTION):
            return fake_export(req, out)
        set_tf32(device, dtype)  # Inductor decides TF32 for its generated GEMMs at compile time
        t0 = time.perf_counter()
        ep, spec = export_program(req, device, dtype)
        export_s = time.perf_counter() - t0
        info: dict = {
            "dtype": str(dtype),
            "device": device,
            "remedy": req.options.get("remedy"),
            "parameter_dtypes": torch_dtype_counts([*ep.state_dict.values(), *ep.constants.values()]),
            "graph_dtypes": graph_value_dtypes(ep.graph_module),
        }
        if device == "cuda":
            info["tf32_at_export"] = tf32_switches()
        if spec is not None:
            info["host_postprocess"] = spec
        link = req.options.get("aoti_link")
        if link:
            info["aoti_link"] = link
        suffix = "-backbone" if spec is not None else ""
        pt2 = out / f"{req.family}{req.size}-{req.task}-aoti-{device}{suffix}.pt2"
        t0 = time.perf_counter()
        # Cold compile, as for torch-compile: a warm Inductor cache would make export_s depend on earlier exports.
        # torch's config modules gain `patch` at import (install_config_module): the stubs do not show it
        with (
            torch.compiler.config.patch(force_disable_caches=True),  # type: ignore[attr-defined]
            link_patch(link),
        ):
            torch._inductor.aoti_compile_and_package(ep, package_path=str(pt2))
        compile_s = time.perf_counter() - t0
        log.info("wrote %s (torch.export %.1f s, AOTInductor compile %.1f s)", pt2, export_s, compile_s)
        # the wrapper's needed libraries and whether it carries libstdc++'s own code (the H100's crash)
        info["wrapper"] = wrapper_facts(pt2)
        return ExportResult(str(pt2), {**info, "torch_export_s": export_s, "aoti_compile_s": compile_s})

    def load(self, artifact: Path, cell, export_info: dict) -> Runner:

        dtype = torch_dtype(cell.precision)
        if cell.device == "cpu":
            apply_torch()  # the run's budget: the package's CPU kernels use torch's OpenMP threads
        set_tf32(cell.device, dtype)
        compiled = load_package(
            artifact, self.run_single_threaded, cell.device, export_info.get("load_options") or {}
        )
        runner = AotiRunner(compiled, cell.device, dtype, export_info)
        spec = export_info.get("host_postprocess")
        if spec is None:
            return runner
        return HostTopKRunner(runner, spec, device_outputs=cell.device == "cuda")
