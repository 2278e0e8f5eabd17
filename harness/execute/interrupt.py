"""The run's interruption (SIGINT, as Ctrl-C sends; SIGTERM, as `kill` and a CI cancel send): noted the moment it
arrives, acted on at once, and acted on again at every safe point, so that it is never lost.

The handler raises KeyboardInterrupt in the main thread, wherever that thread is. Python can lose it there: raised
inside a finalizer (`__del__`, a weakref callback) it is printed as "Exception ignored" and dropped; raised while a
worker process is being started, after the fork, the worker is never registered and nothing ends it; raised in the
end-of-run summary, after the run's end was written, it leaves a partial end behind. So the handler also notes the
signal, and the run reads the note at its safe points: before a worker starts and once it is registered (`check`),
between two cells, and before the run's end is written and before the history import. An interruption lost on
the way still ends the run at the next of them, as interrupted.

Code that must not be cut in the middle (a worker being started and registered, the end-of-run summary, a LoadGen
test) runs `deferred()`: a signal then is noted (and the workers are ended) but not raised, and the code reads the
note when it is done. The scenarios layer cannot import this module: the execute layer hands it down
(harness.scenarios.run_all's `stop`), and a LoadGen test that notes a signal stops its system under test, lets
LoadGen end, marks its logs incomplete and raises (harness.scenarios.loadgen).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Callable, Iterator

log = logging.getLogger(__name__)

SIGNALS = (signal.SIGINT, signal.SIGTERM)

#: the names of the signals received, in order (a list: appended to from the handler, read from any thread)
_received: list[str] = []
#: depth of `deferred()` sections in the main thread (the only thread a Python signal handler runs in)
_deferred = [0]
#: called from the handler before anything else (ending the running workers)
_on_signal: list[Callable[[], None]] = []


def install(on_signal: Callable[[], None] | None = None) -> bool:
    """Take SIGINT and SIGTERM in this process (the main thread only; False elsewhere). A handler someone else
    installed is left alone; an inherited SIG_IGN is not: a shell starts a background job (`pytest ... &` in a
    script, a CI step) with SIGINT ignored, and a run told to stop must stop, not go on and be imported as whole.
    `on_signal` runs first at each signal (ending the running workers)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    if on_signal is not None and on_signal not in _on_signal:
        _on_signal.append(on_signal)
    for sig in SIGNALS:
        current = signal.getsignal(sig)
        if current in (signal.SIG_DFL, signal.SIG_IGN, signal.default_int_handler, None, _handler):
            signal.signal(sig, _handler)
        else:
            log.info("%s: a handler is already installed (%r); left in place", sig.name, current)
    return True


def _handler(signum: int, frame) -> None:
    name = signal.Signals(signum).name
    _received.append(name)
    for callback in _on_signal:
        try:
            callback()
        except Exception:  # ending the workers is best effort; the interruption itself must go on
            log.exception("on %s: %r failed", name, callback)
    if _deferred[0] > 0:
        return  # noted: the deferred section reads it when it is done
    raise KeyboardInterrupt(f"interrupted by {name}")


def received() -> str | None:
    """The name of the last signal received ('SIGINT', 'SIGTERM'), or None while the run has not been told to stop."""
    return _received[-1] if _received else None


def check() -> None:
    """A safe point: raise KeyboardInterrupt if a signal was received, even one whose first KeyboardInterrupt was
    lost (so no worker starts, and no further work begins, once the run was told to stop)."""
    name = received()
    if name is not None:
        raise KeyboardInterrupt(f"interrupted by {name}")


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """A section that a signal does not cut: the handler notes it (and ends the workers) without raising; read
    `received()` or call `check()` after. Only the main thread's sections count: a Python signal handler runs in
    no other thread, so another thread's section needs no deferring."""
    main = threading.current_thread() is threading.main_thread()
    if main:
        _deferred[0] += 1
    try:
        yield
    finally:
        if main:
            _deferred[0] -= 1


def reset() -> None:
    """Forget the signals received (for tests that send one to their own process)."""
    _received.clear()
