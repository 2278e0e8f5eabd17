"""The run's heap policy: whether memory a call frees stays in the process for the next call, chosen and recorded.

PyTorch eager on a CPU allocates its activations afresh on every call. With glibc's default malloc, memory freed at
the end of a call above the trim threshold goes back to the kernel, and the next call faults it in again: at
yolo26n@640 on a 2-core VM that was 16,500-17,500 minor page faults and 33-35 ms of system time in a 67-77 ms call,
and how much the faults cost moved with the host's load, so torch-eager's speed relative to the other runtimes
moved by 10-20% between runs minutes apart. ONNX Runtime, OpenVINO and ExecuTorch plan or pool their own buffers
and barely call malloc per inference. PyTorch's own CPU launcher (`torch.backends.xeon.run_cpu`) preloads a
caching allocator (tcmalloc or jemalloc) for the same reason.

Policies (`--malloc`, carried into export and probe subprocesses by $YOLO26_BENCH_MALLOC, recorded in env.json's
`allocator`):

- `retain` (default): glibc's `mallopt` pins the mmap threshold at 1 GiB and the trim threshold at 2 GiB, so a freed
  activation stays in the heap and the next call reuses it (as a caching allocator would). Nothing is preloaded.
- `system`: the C library's defaults, untouched: what a plain `python` process gets.

Outside glibc (musl, macOS) nothing is set and env.json says so: the policy is then `system` in effect.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform

ENV = "YOLO26_BENCH_MALLOC"
POLICIES = ("retain", "system")
DEFAULT = "retain"

# glibc's mallopt parameters (malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: `retain`: allocations below this come from the heap, not from a fresh mapping of their own
MMAP_THRESHOLD = 1 << 30
#: `retain`: free memory at the top of the heap is given back to the kernel only above this
TRIM_THRESHOLD = (1 << 31) - 1

_applied: dict | None = None


def parse(text: str, option: str = "--malloc") -> str:
    """A policy name from user input; ValueError with one line naming `option` otherwise."""
    name = str(text).strip().lower()
    if name not in POLICIES:
        raise ValueError(f"{option}: unknown {text!r}; valid: {', '.join(POLICIES)}")
    return name


def policy() -> str:
    """This process's policy: $YOLO26_BENCH_MALLOC when set (by the harness), else the default."""
    text = os.environ.get(ENV)
    return parse(text, ENV) if text else DEFAULT


def set_policy(name: str) -> dict:
    """Make `name` this process's policy and the one its subprocesses inherit; applies it now."""
    os.environ[ENV] = parse(name)
    return apply(name)


def apply(name: str | None = None) -> dict:
    """Apply `name` (default: this process's policy) to the C library's malloc; returns what was done (env.json's
    `allocator`). Settings cannot be undone in a process, so `system` after `retain` is refused."""
    global _applied
    name = parse(name or policy())
    libc_name, libc_version = platform.libc_ver()
    library = f"{libc_name} {libc_version}".strip() or "unknown C library"
    out: dict = {"policy": name, "library": library, "settings": {}, "applied": False, "reason": None}
    if name == "system":
        if _applied and _applied["policy"] == "retain" and _applied["applied"]:
            raise RuntimeError(
                "the retain heap policy is already applied in this process; it cannot be undone"
            )
        out["reason"] = "the C library's defaults, untouched"
    elif libc_name != "glibc":
        out["reason"] = f"not glibc ({library}): mallopt thresholds not set, the C library's defaults apply"
    else:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        ok_mmap = libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        ok_trim = libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
        out["settings"] = {"M_MMAP_THRESHOLD": MMAP_THRESHOLD, "M_TRIM_THRESHOLD": TRIM_THRESHOLD}
        out["applied"] = bool(ok_mmap and ok_trim)
        out["reason"] = (
            "mallopt: memory freed by a call stays in the heap for the next one"
            if out["applied"]
            else f"mallopt refused (M_MMAP_THRESHOLD -> {ok_mmap}, M_TRIM_THRESHOLD -> {ok_trim})"
        )
    _applied = out
    return dict(out)


def info() -> dict:
    """What this process applied (env.json's `allocator`)."""
    if _applied is not None:
        return dict(_applied)
    return {
        "policy": policy(),
        "library": None,
        "settings": {},
        "applied": False,
        "reason": "not applied in this process",
    }
