"""ONNX Runtime sessions on a CUDA-based execution provider: no silent CPU fallback.

ONNX Runtime falls back to the CPU provider when the CUDA (or TensorRT) provider cannot load its libraries, with
only a warning: a session created for a CUDA cell would then run on the CPU and be recorded as CUDA. Every such
session is checked with `require_provider` right after it is created, and the cell fails with the reason.

The worker and probe processes create sessions before anything has loaded the CUDA libraries (torch is not
imported there first), so `preload_cuda_libraries` asks onnxruntime to load them from the NVIDIA wheels first
(`onnxruntime.preload_dlls`, onnxruntime >= 1.21).
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)


def provider_missing(provider: str, hint: str = "") -> str | None:
    """Why the installed onnxruntime cannot offer `provider` (not installed, or a build without it), or None.

    `hint` follows the list of the providers it has (e.g. "; install onnxruntime-gpu")."""
    from harness.backends._shared.probes import not_installed

    reason = not_installed("onnxruntime")
    if reason:
        return reason
    import onnxruntime as ort

    have = ort.get_available_providers()
    if provider not in have:
        return f"this onnxruntime build has no {provider} (has {', '.join(have)}{hint})"
    return None


class ProviderFallback(RuntimeError):
    """A session asked for a GPU execution provider runs on another one (ONNX Runtime's silent fallback)."""


def preload_cuda_libraries(ort: Any) -> str | None:
    """Call `ort.preload_dlls()` where this onnxruntime has it; None when it ran, else why not (logged only: the
    session check that follows decides the cell)."""
    preload = getattr(ort, "preload_dlls", None)
    if preload is None:
        return f"onnxruntime {getattr(ort, '__version__', '?')} has no preload_dlls (it predates 1.21)"
    try:
        preload()
    except Exception as e:  # a missing wheel is not fatal here: the provider check names the outcome
        log.warning("onnxruntime.preload_dlls() failed: %s", e)
        return f"onnxruntime.preload_dlls() failed: {type(e).__name__}: {e}"
    return None


def require_provider(session: Any, provider: str) -> None:
    """Raise ProviderFallback unless `session` runs on `provider` first (what it was created for)."""
    got = list(session.get_providers())
    if got and got[0] == provider:
        return
    raise ProviderFallback(
        f"{provider} did not load: the session runs on {', '.join(got) or 'no provider'} (ONNX Runtime fell back "
        "without an error; the CUDA or TensorRT libraries it needs are not loadable here), so this cell would "
        "have run on the CPU and been recorded as a GPU cell"
    )
