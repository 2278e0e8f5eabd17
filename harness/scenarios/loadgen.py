"""The harness's side of MLPerf LoadGen (mlcommons/inference, loadgen/; the `mlperf_loadgen` bindings): the system
under test and the query sample library. LoadGen issues the queries, keeps the clock and judges the run.

- The query sample library is the bundled images (harness.yolo.inputs.IMAGES), decoded once; a sample's query is
  one end-to-end pipeline call on that image (letterbox, model, post-processing: harness.measure.pipeline).
- The system under test runs each sample on one of the runner's streams (harness.backends.base.Runner.streams:
  the runtime's own concurrency where it has one), one worker thread per stream fed from one FIFO queue; LoadGen's
  issue callback only enqueues, so an issue never waits for a busy stream (the Server scenario's queueing counts
  in the latency, from the sample's scheduled arrival). Each worker completes its sample itself
  (`QuerySamplesComplete`). Grouped (the camera-capacity search's batched mechanism): the samples LoadGen issues
  together go to one call as one batch (`BatchQuery`), and complete together.
- LoadGen writes its logs (summary, detail, trace) into the run's directory; the result is read back from them
  (harness.scenarios.logs). The harness's own clock (issue callback to completion, per sample) is kept beside
  LoadGen's, to check the two agree.

Stopping (SIGINT, SIGTERM: `Stop`, harness.execute.interrupt, handed down by the execute layer with `stopping`).
LoadGen calls the issue callback in the thread that started its test; in the main thread, a signal handler's
KeyboardInterrupt raised there unwound through LoadGen and left its threads, its log writer and the workers'
completions running against destroyed objects (a segmentation fault, or std::__ios_failure from its log writer). So each test runs in a thread
of its own while the main thread waits in Python, where the handler runs at once, with the signal deferred (noted,
not raised). Once noted, the system under test stops working: each sample outstanding or issued after is
completed at once without its query (as after a query's error), and LoadGen ends its test: SingleStream and
MultiStream run out of their pre-generated queries (about 20 us each: well under a second at the short durations,
about 10 s at MLPerf's 600 s), Offline's one query is done at once, Server issues the rest of its schedule (up to
its min duration: at most a second at the short durations; LoadGen's Python bindings have no way to end a test,
and its `AbortTest` is neither bound nor one that ends the schedule) unless capped in outstanding queries
(harness.scenarios.server.outstanding_cap, at MLPerf's durations: then it ends within seconds). The workers are
ended before LoadGen's objects are destroyed, the run's directory is marked incomplete
(harness.scenarios.logs.mark_incomplete: never read as a result) and KeyboardInterrupt is raised. No test starts
once the run was told to stop (`check`, also between the searches' steps).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from contextvars import ContextVar
from pathlib import Path
from typing import Protocol

from harness.scenarios.logs import INCOMPLETE, LoadgenRun, compress_trace, mark_incomplete, read_run

log = logging.getLogger(__name__)

#: runs the query of sample `index` (one end-to-end call on one stream), synchronously
Query = Callable[[int], object]
#: runs the samples `indices` issued together as one batched end-to-end call, synchronously
BatchQuery = Callable[[Sequence[int]], object]

WHEELS = (
    "mlcommons-loadgen publishes wheels for CPython 3.10-3.13 on Linux x86_64 (glibc 2.28+), macOS arm64 and "
    "Windows amd64 only"
)


def missing() -> str | None:
    """Why LoadGen cannot run here (its bindings do not import), or None."""
    try:
        import mlperf_loadgen  # noqa: F401
    except ImportError as e:
        return f"MLPerf LoadGen (mlperf_loadgen) is not installed: {e}; {WHEELS}"
    return None


class Stop(Protocol):
    """How the run is told to stop: harness.execute.interrupt (a module) is one, handed down by the execute layer
    (`stopping`), which this layer cannot import."""

    def received(self) -> str | None:
        """The signal's name ('SIGINT', 'SIGTERM') once one came, else None."""
        ...

    def check(self) -> None:
        """Raise KeyboardInterrupt once a signal came."""
        ...

    def deferred(self) -> AbstractContextManager[None]:
        """A section a signal does not cut: it is noted, and read after."""
        ...


class _Never:
    """No one stops the run (LoadGen driven outside a run: the tests, a script)."""

    def received(self) -> str | None:
        return None

    def check(self) -> None:
        return None

    def deferred(self) -> AbstractContextManager[None]:
        return contextlib.nullcontext()


NEVER: Stop = _Never()
_stop: ContextVar[Stop] = ContextVar("loadgen_stop", default=NEVER)


@contextlib.contextmanager
def stopping(stop: Stop) -> Iterator[None]:
    """LoadGen's tests started inside (this thread and context) stop when `stop` says so."""
    token = _stop.set(stop)
    try:
        yield
    finally:
        _stop.reset(token)


def current_stop() -> Stop:
    return _stop.get()


def check() -> None:
    """A safe point between two LoadGen tests (the searches' steps, the scenarios): KeyboardInterrupt once the run
    was told to stop, so no further test or search starts."""
    _stop.get().check()


#: how long the outstanding samples stay over a Server test's `server_max_async_queries` before they are
#: released: LoadGen compares the count right after its issue callback returns, and must see it over
VALVE_GRACE_S = 0.05
#: how often the main thread, waiting for LoadGen's test, runs the signal handlers at the latest
WAIT_S = 0.1


class Dispatcher:
    """The system under test: one worker thread per query function (stream), fed from one FIFO queue. `grouped`:
    the query functions are `BatchQuery`s and each of LoadGen's issues is one item (its samples as one batch).
    After a query's error, or once the run is stopping (`stop` received a signal, or `interrupt`), every sample
    is completed at once without its query (LoadGen waits for them all); after `close`, none is completed.

    `valve` (a Server test's `server_max_async_queries`, harness.scenarios.server.outstanding_cap): once stopping,
    the samples issued are held, not completed, until more than `valve` have been outstanding for VALVE_GRACE_S, so
    that LoadGen ends its schedule early ("too many outstanding queries"), then completed at once; or completed when
    no issue came for `valve_idle_s` (the schedule ended first)."""

    def __init__(
        self,
        queries: Sequence[Query] | Sequence[BatchQuery],
        clock: Callable[[], int] = time.perf_counter_ns,
        grouped: bool = False,
        stop: Stop = NEVER,
        valve: int | None = None,
        valve_idle_s: float = 1.0,
    ) -> None:
        import mlperf_loadgen as lg

        self._lg = lg
        self._grouped = grouped
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._clock = clock
        self._stop = stop
        self._interrupted: str | None = None
        self._closed = False
        self.errors: list[BaseException] = []
        #: harness clock per sample (ms): from LoadGen's issue callback to the query's return
        self.harness_ms: list[float] = []
        #: samples completed without their query because the run was stopping
        self.cut = 0
        self._valve, self._valve_idle_s = valve, valve_idle_s
        self._issued = self._completed = 0  # samples
        self._held: list[int] = []
        self._last_held = 0.0
        self._releaser: threading.Thread | None = None
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._work, args=(q,), daemon=True, name=f"sut-stream-{i}")
            for i, q in enumerate(queries)
        ]
        for t in self._threads:
            t.start()

    def stopping(self) -> str | None:
        """Why the run is stopping ("interrupted by SIGINT"), or None."""
        signal = self._stop.received()
        return f"interrupted by {signal}" if signal is not None else self._interrupted

    def interrupt(self, why: str) -> None:
        """Stop working: `why`, an interruption raised in the waiting thread rather than noted by `stop`."""
        self._interrupted = self._interrupted or why

    def halted(self) -> bool:
        """Whether the samples are completed without their queries: a query failed, or the run is stopping."""
        return bool(self.errors) or self.stopping() is not None

    def issue(self, samples) -> None:
        """LoadGen's IssueQuery callback (LoadGen's thread, holding the GIL): enqueue only; once halted, complete
        the samples here and now (LoadGen takes completions from within its callback), or hold them (`valve`)."""
        now = self._clock()
        with self._lock:
            self._issued += len(samples)
        if self.halted():
            ids = [s.id for s in samples]
            if self._valve is not None and not self.errors:
                self._hold(ids)
            else:
                self._complete(ids, cut=not self.errors)
            return
        if self._grouped:
            self._queue.put(([s.id for s in samples], [s.index for s in samples], now))
            return
        for s in samples:
            self._queue.put(([s.id], [s.index], now))

    def flush(self) -> None:
        """LoadGen's FlushQueries callback: every issue is dispatched at once (grouped or not), so nothing to flush."""

    def _hold(self, sample_ids: list[int]) -> None:
        with self._lock:
            self._held.extend(sample_ids)
            self._last_held = time.monotonic()
            releaser, start = self._releaser, self._releaser is None
            if releaser is None:
                releaser = self._releaser = threading.Thread(
                    target=self._release, daemon=True, name="sut-release"
                )
        if start:
            releaser.start()

    def _release(self) -> None:
        """Complete the held samples once more than `valve` have been outstanding for VALVE_GRACE_S (LoadGen has
        seen it and ends its schedule), or when no issue came for `valve_idle_s` (its schedule ended)."""
        assert self._valve is not None
        over_since: float | None = None
        while not self._closed:
            time.sleep(VALVE_GRACE_S / 2)
            now = time.monotonic()
            with self._lock:
                if self._issued - self._completed > self._valve:
                    over_since = now if over_since is None else over_since
                else:
                    over_since = None
                over = over_since is not None and now - over_since >= VALVE_GRACE_S
                ids: list[int] = []
                if over or now - self._last_held >= self._valve_idle_s:
                    ids, self._held = self._held, []
            self._complete(ids, cut=True)

    def _complete(self, sample_ids: list[int], cut: bool = False) -> None:
        if self._closed or not sample_ids:
            return  # LoadGen's test has returned: its objects go next, and a completion would reach freed memory
        with self._lock:
            self._completed += len(sample_ids)
            if cut:
                self.cut += len(sample_ids)
        lg = self._lg
        lg.QuerySamplesComplete([lg.QuerySampleResponse(i, 0, 0) for i in sample_ids])

    def _work(self, query) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if self.halted():  # LoadGen waits for every sample: the queued ones complete at once, together
                if self._drain(item):
                    return
                continue
            sample_ids, indices, issued = item
            try:
                query(indices if self._grouped else indices[0])
            except BaseException as e:  # re-raised after the run; LoadGen must still see the sample done
                self.errors.append(e)
            took = (self._clock() - issued) / 1e6
            with self._lock:
                self.harness_ms.extend([took] * len(sample_ids))
            self._complete(sample_ids)

    def _drain(self, first) -> bool:
        """Complete `first` and every item queued behind it in one call, without their queries; whether this worker
        took its end (the others' ends are put back)."""
        ids = list(first[0])
        ends = 0
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is None:
                ends += 1
            else:
                ids.extend(item[0])
        self._complete(ids, cut=not self.errors)
        for _ in range(ends - 1):
            self._queue.put(None)
        return ends > 0

    def close(self) -> None:
        """End the workers (each finishes the query in hand) and complete nothing more: called once LoadGen's test
        has returned (every sample complete), before its SUT and QSL are destroyed. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for _ in self._threads:
            self._queue.put(None)
        for t in self._threads:
            t.join(timeout=60)
        if self._releaser is not None:
            self._releaser.join(timeout=60)
        alive = [t.name for t in self._threads if t.is_alive()]
        if alive:
            log.warning("LoadGen's system under test: %s still in a query after 60 s", ", ".join(alive))


def _nothing(_samples) -> None:
    """The QSL's load and unload callbacks: the samples are decoded once, before any query
    (harness.measure.pipeline.decoded)."""


def _mark_cut(outdir: Path, scenario: str, why: str, cut: int) -> None:
    log.info(
        "LoadGen %s test in %s %s (%d samples completed without their query)", scenario, outdir, why, cut
    )
    try:
        mark_incomplete(outdir, why, scenario=scenario, samples_not_run=cut)
    except OSError as e:  # the run stops all the same; LoadGen's logs stay, unread
        log.warning("cannot mark %s incomplete: %s", outdir, e)


def _start_test(start: Callable[[], None], sut_side: Dispatcher) -> BaseException | None:
    """Run LoadGen's test (`start`) in a thread of its own and wait for its end. The main thread stays in Python,
    where signal handlers run: a signal is handled within WAIT_S (not when LoadGen next calls back into Python on
    the main thread, which in Offline is only at the test's end), and no handler ever raises inside LoadGen's
    callbacks. An exception raised here while waiting (a handler that raises: KeyboardInterrupt) stops the system
    under test and is returned once LoadGen has ended; LoadGen's own error is raised."""
    done = threading.Event()
    failed: list[BaseException] = []

    def run() -> None:
        try:
            start()
        except BaseException as e:  # raised in the waiting thread once the test has ended
            failed.append(e)
        finally:
            done.set()

    test = threading.Thread(target=run, name="loadgen-test", daemon=True)
    test.start()
    raised: BaseException | None = None
    while True:
        try:
            if done.wait(WAIT_S):
                break
        except BaseException as e:  # LoadGen ends its test first, with the system under test stopped
            raised = raised or e
            sut_side.interrupt(f"interrupted ({type(e).__name__}: {e})")
    test.join()
    if failed:
        raise failed[0]
    return raised


def run_test(
    scenario: str,
    settings,
    queries: Sequence[Query] | Sequence[BatchQuery],
    samples: int,
    outdir: Path,
    grouped: bool = False,
) -> tuple[LoadgenRun, list[float]]:
    """One LoadGen test of `queries` (one per stream; `grouped`: batch queries, see Dispatcher) over a sample
    library of `samples` samples, logged into `outdir`; returns the run as LoadGen's logs tell it and the harness's
    clock of each sample (ms). A query that raised is re-raised once LoadGen has finished. A signal while the test
    runs (the `stopping` context's) is deferred: the system under test stops working, LoadGen ends, its workers
    are ended, `outdir` is marked incomplete and KeyboardInterrupt is raised; no test starts once one came."""
    import mlperf_loadgen as lg

    stop = current_stop()
    stop.check()
    outdir.mkdir(parents=True, exist_ok=True)
    (outdir / INCOMPLETE).unlink(missing_ok=True)  # an earlier run's (--resume): this test starts afresh
    log_settings = lg.LogSettings()
    log_settings.log_output.outdir = str(outdir)
    log_settings.log_output.copy_summary_to_stdout = False
    log_settings.enable_trace = True  # each sample's latency, for the percentiles' intervals
    # a Server test capped in outstanding queries (long durations, harness.scenarios.server.outstanding_cap): once
    # stopping, the system under test lets the count pass the cap, and LoadGen ends the rest of its schedule
    valve = settings.server_max_async_queries if settings.scenario == lg.TestScenario.Server else 0
    idle_s = max(1.0, 20.0 / max(settings.server_target_qps, 1e-3))
    raised: BaseException | None = None
    with stop.deferred():
        sut_side = Dispatcher(queries, grouped=grouped, stop=stop, valve=valve or None, valve_idle_s=idle_s)
        sut = qsl = None
        try:
            sut = lg.ConstructSUT(sut_side.issue, sut_side.flush)
            qsl = lg.ConstructQSL(samples, samples, _nothing, _nothing)
            raised = _start_test(
                lambda: lg.StartTestWithLogSettings(sut, qsl, settings, log_settings, ""), sut_side
            )
        finally:
            sut_side.close()  # every worker ended before LoadGen's objects go
            if qsl is not None:
                lg.DestroyQSL(qsl)
            if sut is not None:
                lg.DestroySUT(sut)
            why = sut_side.stopping()
            if why is not None:
                _mark_cut(outdir, scenario, why, sut_side.cut)
    stop.check()
    if raised is not None:
        raise raised
    if sut_side.errors:
        raise sut_side.errors[0]
    run = read_run(scenario, outdir)
    compress_trace(outdir)
    return run, sut_side.harness_ms
