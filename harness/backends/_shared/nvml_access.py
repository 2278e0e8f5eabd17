"""NVML itself: the module, initialised once per process, and the reason when it cannot answer.

The lowest part of the harness's NVML use, shared by the backends' availability probes and harness.measure.nvml
(which reads handles, memory, energy and clocks through it). The NVML module is an optional `nvml` argument
(default: `pynvml` from nvidia-ml-py), so tests can pass a fake namespace.
"""

from __future__ import annotations

import threading
from typing import Any

_INIT_LOCK = threading.Lock()
_INITIALISED: dict[int, Any] = {}  # id(module) -> module, for modules whose nvmlInit() succeeded


class NvmlUnavailable(RuntimeError):
    """NVML cannot answer here; the message is the reason (for a record's null reason or a skip)."""


def nvml_module(nvml: Any = None) -> Any:
    """The NVML module, initialised. `nvml` (a module or a fake namespace) is used as given when passed.

    Raises NvmlUnavailable with the reason when nvidia-ml-py is missing or the NVIDIA driver cannot be loaded.
    """
    if nvml is None:
        try:
            import pynvml
        except ImportError as e:
            raise NvmlUnavailable(f"nvidia-ml-py is not installed ({e})") from None
        nvml = pynvml
    with _INIT_LOCK:
        if id(nvml) in _INITIALISED:
            return nvml
        try:
            nvml.nvmlInit()
        except Exception as e:  # NVMLError_LibraryNotFound, NVMLError_DriverNotLoaded, ...
            raise NvmlUnavailable(f"NVML unavailable: {nvml_error_text(e)}") from None
        _INITIALISED[id(nvml)] = nvml
    return nvml


def nvml_reason(nvml: Any = None) -> str | None:
    """None when NVML answers and sees at least one GPU, else the reason it cannot be used."""
    try:
        m = nvml_module(nvml)
        if m.nvmlDeviceGetCount() == 0:
            return "NVML reports no GPU"
    except NvmlUnavailable as e:
        return str(e)
    except Exception as e:
        return f"NVML unavailable: {nvml_error_text(e)}"
    return None


def nvml_error_text(e: BaseException) -> str:
    """An NVML error in words, with what a missing library or driver means."""
    text = str(e) or type(e).__name__
    if "Library Not Found" in text:
        text += " (libnvidia-ml.so is missing: no NVIDIA driver on this machine)"
    elif "Driver Not Loaded" in text:
        text += " (the NVIDIA kernel driver is not loaded)"
    return text


def cuda_device_count() -> int:
    """Number of NVIDIA GPUs NVML sees (0 without a driver), without initialising CUDA."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return pynvml.nvmlDeviceGetCount()
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return 0
