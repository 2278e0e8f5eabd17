"""Fault-injecting backends for the isolation tests: exports that segfault, hang, exhaust memory, or succeed.

The isolated export worker imports this module when a request lists it (`run_export(..., imports=(MODULE,))`), so
these backends exist only in test export processes, never in the harness's registry.
"""

from __future__ import annotations

import os
import resource
import signal
import time
from pathlib import Path

from harness.backends import register
from harness.backends.base import Backend, BackendUnavailable, ExportRequest, ExportResult, Runner

MODULE = "tests.fault_backends"
# The OOM backend stops here even if no limit stops it first, so a broken limit cannot take the machine down.
OOM_CEILING_BYTES = 8 * 2**30
OOM_CHUNK_BYTES = 64 * 2**20


class _TestBackend(Backend):
    devices = ("cpu",)
    precisions = {"cpu": ("fp32",)}

    def probe(self, device: str) -> str | None:
        return None

    def load(self, artifact: Path, cell, export_info: dict) -> Runner:
        raise BackendUnavailable(f"{self.name} is a fault-injection backend; it has no runtime")


@register
class SegfaultBackend(_TestBackend):
    """Export dies of SIGSEGV, as a crashing native library would."""

    name = "test-segv"

    def export(self, req: ExportRequest) -> ExportResult:
        os.kill(os.getpid(), signal.SIGSEGV)
        raise AssertionError("unreachable: SIGSEGV did not kill the process")


@register
class HangBackend(_TestBackend):
    """Export never returns, as a deadlocked compiler would."""

    name = "test-hang"

    def export(self, req: ExportRequest) -> ExportResult:
        while True:
            time.sleep(60)


@register
class OomBackend(_TestBackend):
    """Export allocates (and touches) memory until the process's memory limit refuses more."""

    name = "test-oom"

    def export(self, req: ExportRequest) -> ExportResult:
        soft, _ = resource.getrlimit(resource.RLIMIT_DATA)
        if soft == resource.RLIM_INFINITY:
            raise RuntimeError("test-oom refuses to run without a memory limit (RLIMIT_DATA is unlimited)")
        chunks = []
        while len(chunks) * OOM_CHUNK_BYTES < OOM_CEILING_BYTES:
            chunks.append(bytearray(OOM_CHUNK_BYTES))  # zero-filled: the pages are really committed
        raise RuntimeError(f"allocated {OOM_CEILING_BYTES} bytes without hitting the {soft}-byte limit")


@register
class OkBackend(_TestBackend):
    """Export writes a small artifact and succeeds: the process machinery itself works."""

    name = "test-ok"

    def export(self, req: ExportRequest) -> ExportResult:
        out = Path(req.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        artifact = out / "model.txt"
        artifact.write_text(f"{req.backend} {req.height}x{req.width}\n")
        return ExportResult(str(artifact), {"pid": os.getpid()})


def dereference_null() -> None:
    """A real native fault: ctypes reads address 0 (no signal is sent; the CPU faults)."""
    import ctypes

    ctypes.string_at(0)


@register
class NativeFaultBackend(_TestBackend):
    """Export faults inside native code, as a runtime's loader crashing on an artifact would."""

    name = "test-native-fault"

    def export(self, req: ExportRequest) -> ExportResult:
        dereference_null()
        raise AssertionError("unreachable: the null read did not fault")


@register
class PhasedHangBackend(_TestBackend):
    """Export finishes one phase, then hangs in the next (an autotuning compile that outlasts its budget)."""

    name = "test-phased-hang"

    def export(self, req: ExportRequest) -> ExportResult:
        from harness.backends._shared.phases import phase

        seconds: dict[str, float] = {}
        with phase("torch.export", seconds):
            pass
        with phase("compile", seconds):
            while True:
                time.sleep(60)


@register
class AbortBackend(_TestBackend):
    """Export aborts (SIGABRT) with no allocation failure in its log, as a runtime's failed assertion would."""

    name = "test-abort"

    def export(self, req: ExportRequest) -> ExportResult:
        print("[test-abort] an assertion failed in native code", flush=True)
        os.abort()
