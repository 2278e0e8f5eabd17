"""A fake nanosecond clock for tests of timing logic: time passes only when a fake call says so, so the figures a
test checks are exact on any machine, however loaded (a real sleep on a busy 2-core machine overshoots by
milliseconds, and two noisy timings have no reliable order)."""

from __future__ import annotations

from collections.abc import Callable


class FakeClock:
    """Nanoseconds that pass only through `advance`; call it to read it, as time.perf_counter_ns."""

    def __init__(self) -> None:
        self.ns = 0

    def __call__(self) -> int:
        return self.ns

    def advance(self, ms: float) -> None:
        self.ns += round(ms * 1e6)

    def taking(self, ms: float) -> Callable[..., None]:
        """A call (of any arguments) that takes `ms` on this clock."""
        return lambda *_args, **_kwargs: self.advance(ms)
