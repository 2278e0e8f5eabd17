"""Backend registry: an explicit dict filled by the `register` decorator. Listing never imports heavy libraries."""

from __future__ import annotations

import importlib

from harness.backends.base import Backend, BackendUnavailable, ExportRequest, ExportResult, Runner

_REGISTRY: dict[str, type[Backend]] = {}
# Module per backend; imported on first use of the registry (each imports its runtime lazily).
_MODULES = (
    "harness.backends.torch_eager",
    "harness.backends.onnxruntime",
    "harness.backends.openvino",
    "harness.backends.executorch_xnnpack",
    "harness.backends.torch_compile",
    "harness.backends.aoti",
    "harness.backends.tensorrt",
    "harness.backends.onnxruntime_trt",
    "harness.backends.executorch_cuda",
    "harness.backends.cudagraph",
    "harness.backends.executorch_vulkan",
    "harness.backends.executorch_coreml",
    "harness.backends.executorch_mps",
    "harness.backends.executorch_qnn",
    "harness.backends.executorch_arm",
)


def register(cls: type[Backend]) -> type[Backend]:
    if cls.name in _REGISTRY:
        raise ValueError(f"backend {cls.name!r} registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def _load_modules() -> None:
    for m in _MODULES:
        importlib.import_module(m)


def names() -> tuple[str, ...]:
    _load_modules()
    return tuple(_REGISTRY)


def get(name: str) -> Backend:
    _load_modules()
    try:
        return _REGISTRY[name]()
    except KeyError:
        raise KeyError(f"unknown backend {name!r}; valid: {', '.join(_REGISTRY)}") from None


def display_order() -> tuple[str, ...]:
    """Every registered backend name in the order reports list them (each backend's `display_order`)."""
    _load_modules()
    return tuple(sorted(_REGISTRY, key=lambda n: (_REGISTRY[n].display_order, n)))


def export_only_names() -> tuple[str, ...]:
    """Backends whose every cell ends at `exported` on a Linux benchmark host (no runtime for their target)."""
    _load_modules()
    return tuple(n for n in display_order() if _REGISTRY[n].export_only)


__all__ = [
    "Backend",
    "BackendUnavailable",
    "ExportRequest",
    "ExportResult",
    "Runner",
    "display_order",
    "export_only_names",
    "get",
    "names",
    "register",
]
