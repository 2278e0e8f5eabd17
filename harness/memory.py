"""Memory sampling in a background thread: host RSS on every cell (NVML device memory is added for GPU cells).

The sampler records peaks over the whole sampled window (load and timed rounds) and the baseline taken before the
cell started, so a record can say both the absolute peak and what the cell added.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

MB = 2**20


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
