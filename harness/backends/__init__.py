"""Backend registry: an explicit dict filled by the `register` decorator. Listing never imports heavy libraries.

Every module of this package except `base` and the `_`-prefixed ones (`_shared/`) is a backend module: the registry
finds them on its first use and imports each, and each registers its class(es) with `@register`. A new backend is
its module here (and its test): nothing else names it. Each module imports its runtime lazily, inside methods.
"""

from __future__ import annotations

import importlib
import pkgutil

from harness.backends.base import Backend, BackendUnavailable, ExportRequest, ExportResult, Runner

_REGISTRY: dict[str, type[Backend]] = {}
#: modules of this package that are not backends
_NOT_BACKENDS = frozenset({"base"})
_discovered = False


def register(cls: type[Backend]) -> type[Backend]:
    if cls.name in _REGISTRY:
        raise ValueError(f"backend {cls.name!r} registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def backend_modules() -> tuple[str, ...]:
    """The backend modules of this package, by name: every module but `base` and the `_`-prefixed ones."""
    return tuple(
        f"{__name__}.{m.name}"
        for m in pkgutil.iter_modules(__path__)
        if not m.name.startswith("_") and m.name not in _NOT_BACKENDS
    )


def _load_modules() -> None:
    global _discovered
    if _discovered:
        return
    for m in backend_modules():
        importlib.import_module(m)
    _discovered = True


def names() -> tuple[str, ...]:
    """Every registered backend name, in registry order (each backend's `registry_order`, then its name)."""
    _load_modules()
    return tuple(sorted(_REGISTRY, key=lambda n: (_REGISTRY[n].registry_order, n)))


def get(name: str) -> Backend:
    _load_modules()
    try:
        return _REGISTRY[name]()
    except KeyError:
        raise KeyError(f"unknown backend {name!r}; valid: {', '.join(names())}") from None


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
    "backend_modules",
    "display_order",
    "export_only_names",
    "get",
    "names",
    "register",
]
