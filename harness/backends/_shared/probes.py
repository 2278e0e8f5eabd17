"""The reasons a backend's probe gives when its library, its device or its code generator is missing here.

One wording per reason, so every backend that needs torch (or a CUDA device seen by torch, or Inductor's code
generation) says it the same way; the skip reason is what the record keeps. Imports are lazy: probing one backend
never imports another's runtime.
"""

from __future__ import annotations

import importlib
import importlib.util


def import_error(module: str, *names: str) -> ImportError | None:
    """The ImportError `from module import names` (or `import module`) would raise here, or None when it imports.

    The message is Python's own, as the `import` statement words it (the probes quote it in their reasons)."""
    try:
        mod = importlib.import_module(module)
    except ImportError as e:
        return e
    for name in names:
        if hasattr(mod, name):
            continue
        try:  # `from package import name` also finds a submodule
            importlib.import_module(f"{module}.{name}")
        except ModuleNotFoundError:
            where = getattr(mod, "__file__", None) or "unknown location"
            return ImportError(f"cannot import name {name!r} from {module!r} ({where})", name=module)
        except ImportError as e:
            return e
    return None


def not_installed(module: str, *names: str, label: str | None = None) -> str | None:
    """Why `from module import names` (or `import module`) fails, worded "<label> is not installed (<error>)",
    or None. `label`: the package to name (default: `module`'s top-level package)."""
    e = import_error(module, *names)
    return None if e is None else f"{label or module.split('.')[0]} is not installed ({e})"


#: the no-device reason, formatted with torch's `version` and `cuda` (torch.version.cuda)
NO_CUDA_DEVICE = "no CUDA device visible to torch {version} (torch.version.cuda={cuda})"


def torch_cuda_missing(no_device: str = NO_CUDA_DEVICE) -> str | None:
    """Why torch sees no CUDA device here (torch missing, or no device visible to it), or None.

    `no_device`: the wording of the second case, formatted with torch's `version` and `cuda`."""
    reason = not_installed("torch")
    if reason:
        return reason
    import torch

    if not torch.cuda.is_available():
        return no_device.format(version=torch.__version__, cuda=torch.version.cuda)
    return None


def inductor_missing(device: str, what: str, compiler_reason: str) -> str | None:
    """Why TorchInductor cannot generate `what`'s code for `device` here, or None (torch itself is importable).

    On CUDA Inductor writes Triton kernels: a device seen by torch and triton are needed. On the CPU it compiles
    C++: a C++ compiler is needed, and `compiler_reason` says what for (followed by Inductor's error)."""
    if device == "cuda":
        reason = torch_cuda_missing()
        if reason:
            return reason
        if importlib.util.find_spec("triton") is None:
            return f"{what} on CUDA generates Triton kernels, and triton is not installed"
        return None
    from torch._inductor import cpp_builder

    try:
        cpp_builder.get_cpp_compiler()
    except Exception as e:  # Inductor's CPU code generation needs a C++ compiler
        return f"{compiler_reason}: {e}"
    return None
