"""Host memory of a cell: the tracker, the kernel's peak-RSS high-water mark, and a sampling thread as fallback.

The tracker measures from right before load to the end of the timed rounds. So that a cell's figures do not depend
on the cells that ran before it, the attempt releases the previous cell's runner before load (`release_memory`:
collect, then return freed heap pages to the kernel), and the runtimes of the run are imported before the first
cell (the attempt's services do that), so no cell pays for another's library import. The sampler also serves the
GPU memory tracker (NVML probes).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from harness.core.record import CellRecord, Memory, set_null
from harness.measure.base import Tracker, register_tracker

log = logging.getLogger(__name__)

MB = MIB = 2**20  # memory figures are MiB; MB is kept for the callers that predate the rename


@dataclass
class PeakProbe:
    """One quantity to sample: a name and a zero-argument function returning bytes (or None if unreadable)."""

    name: str
    read: Callable[[], float | None]
    baseline: float | None = None
    peak: float | None = None
    error: str | None = None

    def sample(self) -> None:
        try:
            v = self.read()
        except Exception as e:  # a failing probe stops itself; the others go on
            self.error = f"{type(e).__name__}: {e}"
            return
        if v is not None and (self.peak is None or v > self.peak):
            self.peak = v


class RssHighWater:
    """Peak RSS of this process from the kernel's high-water mark (VmHWM), reset at start via clear_refs.

    Exact and free: no sampling thread competes with the runtime under test for the CPU (on a 2-core machine a
    200 Hz sampler measurably slows a CPU runtime that uses every core). `available` is False where the kernel
    does not support resetting the mark; the caller then samples instead.
    """

    def __init__(self) -> None:
        self.baseline: float | None = None
        self.peak: float | None = None
        self.available = True

    @staticmethod
    def _status_kb(key: str) -> float:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return float(line.split()[1]) * 1024
        raise OSError(f"{key} not in /proc/self/status")

    def start(self) -> RssHighWater:
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # reset the peak RSS to the current RSS
            self.baseline = self._status_kb("VmRSS")
        except OSError:
            self.available = False
        return self

    def stop(self) -> None:
        if self.available:
            self.peak = self._status_kb("VmHWM")


def rss_probe(pid: int | None = None) -> PeakProbe:
    import psutil

    proc = psutil.Process(pid or os.getpid())
    return PeakProbe("host_rss", lambda: float(proc.memory_info().rss))


@dataclass
class Sampler:
    """Samples every probe at `hz` in a daemon thread between start() and stop()."""

    probes: list[PeakProbe]
    hz: float = 200.0
    samples: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Sampler:
        for p in self.probes:
            try:
                p.baseline = p.read()
            except Exception as e:
                p.error = f"{type(e).__name__}: {e}"
            p.peak = p.baseline
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="memory-sampler", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        period = 1.0 / self.hz
        while not self._stop.is_set():
            for p in self.probes:
                if p.error is None:
                    p.sample()
            self.samples += 1
            self._stop.wait(period)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        for p in self.probes:  # one last sample so a short window still has its end state
            if p.error is None:
                p.sample()

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def get(self, name: str) -> PeakProbe | None:
        return next((p for p in self.probes if p.name == name), None)


def release_memory() -> None:
    """Collect garbage and give freed heap pages back to the kernel, so RSS baselines do not carry earlier cells."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to trim
        ctypes.CDLL("libc.so.6").malloc_trim(0)


class HostMemoryTracker(Tracker):
    """Peak host RSS over load and timed rounds (`memory.host_*_mib`), from the kernel's high-water mark where it
    can be reset, else from a 200 Hz sampling thread."""

    field = "memory"
    solo_only = True  # one runtime's memory: stops before the next runner of a workload loads

    def __init__(self) -> None:
        self.hwm = RssHighWater()
        self.sampler: Sampler | None = None

    @classmethod
    def for_cell(cls, cell) -> HostMemoryTracker:
        return cls()

    def start(self) -> None:
        self.hwm.start()
        if not self.hwm.available:
            self.sampler = Sampler([rss_probe()]).start()

    def stop(self, rounds: int) -> None:
        if self.sampler is not None:
            self.sampler.stop()
        else:
            self.hwm.stop()

    def fill(self, rec: CellRecord) -> None:
        mem = rec.memory or Memory()
        if self.sampler is not None:
            probe = self.sampler.get("host_rss")
            peak, base = probe.peak, probe.baseline
            how = f"psutil RSS sampled at {self.sampler.hz:.0f} Hz ({self.sampler.samples} samples)"
        else:
            peak, base = self.hwm.peak, self.hwm.baseline
            how = "kernel peak-RSS high-water mark (VmHWM, reset at start)"
        if peak is None or base is None:
            for k in ("host_peak_rss_mib", "host_peak_delta_mib", "host_baseline_mib"):
                set_null(rec, f"memory.{k}", "host RSS could not be read on this system")
        else:
            mem.host_peak_rss_mib = peak / MIB
            mem.host_baseline_mib = base / MIB
            # The high-water mark is reset to the RSS at start, so the peak is never below the baseline.
            mem.host_peak_delta_mib = max(0.0, peak - base) / MIB
        mem.source = f"{how}, over load and runs" + (f"; {mem.source}" if mem.source else "")
        mem.origin = mem.origin or "measured in this attempt"
        rec.memory = mem


register_tracker("host_memory", order=10)(HostMemoryTracker.for_cell)
