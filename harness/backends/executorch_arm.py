"""ExecuTorch with the Arm Ethos-U delegate (microNPU, through TOSA and the Vela compiler): export only.

Ethos-U executes int8 graphs only, so the export quantizes first (post-training, calibrated on the bundled
letterboxed images) and then lowers with the EthosUPartitioner. Lowering serializes TOSA (`tosa_serializer`, pip
tosa-tools) and compiles it with Vela (`ethosu.vela`, pip ethos-u-vela); neither ships with executorch, and the
probe names whichever is missing.

Unlike the other export-only targets this does not go through `export_executorch`, whose float program cannot be
quantized in between; it reuses that module's torch.export and delegation counting.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

from harness.backends import register
from harness.backends.base import BackendUnavailable, ExportOnlyBackend, ExportRequest, ExportResult

log = logging.getLogger(__name__)

DEFAULT_TARGET = "ethos-u55-128"  # override with options["ethosu_target"], e.g. "ethos-u85-256"
# module -> the pip distribution that provides it
TOOLS = {"tosa_serializer": "tosa-tools", "ethosu.vela": "ethos-u-vela"}


def tools_missing() -> str | None:
    """Why the Ethos-U toolchain cannot run here, or None."""
    missing = [f"{mod} (pip {dist})" for mod, dist in TOOLS.items() if not _importable(mod)]
    if missing:
        return (
            f"Ethos-U export needs the TOSA serializer and the Vela compiler; missing {', '.join(missing)} "
            "(executorch's 'ethos-u' extra pins both)"
        )
    return None


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a missing parent package
        return False


@register
class ExecuTorchArm(ExportOnlyBackend):
    name = "executorch-arm"
    display_order = 170
    registry_order = 170
    devices = ("ethos-u",)
    precisions = {"ethos-u": ("int8",)}
    library = "executorch"

    def probe(self, device: str) -> str | None:
        return tools_missing()

    def export(self, req: ExportRequest) -> ExportResult:
        reason = tools_missing()
        if reason:
            raise BackendUnavailable(reason)
        import torch
        from executorch.backends.arm.ethosu import EthosUCompileSpec, EthosUPartitioner
        from executorch.backends.arm.quantizer import EthosUQuantizer, get_symmetric_quantization_config
        from executorch.exir import to_edge_transform_and_lower
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

        from harness.backends._shared.executorch_export import (
            delegation_ops,
            exported_program,
            lowered_dtypes,
        )
        from harness.yolo.inputs import letterboxed

        spec = EthosUCompileSpec(target=req.options.get("ethosu_target", DEFAULT_TARGET))
        quantizer = EthosUQuantizer(spec)
        quantizer.set_global(get_symmetric_quantization_config())
        example = torch.from_numpy(letterboxed(req.height, req.width, req.batch).copy())
        prepared = prepare_pt2e(exported_program(req).module(), quantizer)
        prepared(example)  # calibration: observers record activation ranges on real images
        quantized = torch.export.export(convert_pt2e(prepared), (example,), strict=False)
        edge = to_edge_transform_and_lower(quantized, partitioner=[EthosUPartitioner(spec)])
        ops = delegation_ops(edge.exported_program().graph_module)
        dtypes = lowered_dtypes(edge.exported_program().graph_module)
        out = Path(req.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        pte = out / f"{req.family}{req.size}-{req.task}-ethos-u.pte"
        pte.write_bytes(edge.to_executorch().buffer)
        log.info("wrote %s (%d delegated, %d fallback nodes)", pte, ops["delegated"], ops["fallback"])
        return ExportResult(
            str(pte),
            {"ops": ops, "dtypes": dtypes, "quantization": "int8 post-training, symmetric per-channel"},
        )
