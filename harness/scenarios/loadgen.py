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
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from harness.scenarios.logs import LoadgenRun, compress_trace, read_run

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


class Dispatcher:
    """The system under test: one worker thread per query function (stream), fed from one FIFO queue. `grouped`:
    the query functions are `BatchQuery`s and each of LoadGen's issues is one item (its samples as one batch)."""

    def __init__(
        self,
        queries: Sequence[Query] | Sequence[BatchQuery],
        clock: Callable[[], int] = time.perf_counter_ns,
        grouped: bool = False,
    ) -> None:
        import mlperf_loadgen as lg

        self._lg = lg
        self._grouped = grouped
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._clock = clock
        self.errors: list[BaseException] = []
        #: harness clock per sample (ms): from LoadGen's issue callback to the query's return
        self.harness_ms: list[float] = []
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._work, args=(q,), daemon=True, name=f"sut-stream-{i}")
            for i, q in enumerate(queries)
        ]
        for t in self._threads:
            t.start()

    def issue(self, samples) -> None:
        """LoadGen's IssueQuery callback (LoadGen's thread, holding the GIL): enqueue only."""
        now = self._clock()
        if self._grouped:
            self._queue.put(([s.id for s in samples], [s.index for s in samples], now))
            return
        for s in samples:
            self._queue.put(([s.id], [s.index], now))

    def flush(self) -> None:
        """LoadGen's FlushQueries callback: every issue is dispatched at once (grouped or not), so nothing to flush."""

    def _work(self, query) -> None:
        lg = self._lg
        while True:
            item = self._queue.get()
            if item is None:
                return
            sample_ids, indices, issued = item
            if not self.errors:  # after a failure every sample completes at once: LoadGen waits for them all
                try:
                    query(indices if self._grouped else indices[0])
                except BaseException as e:  # re-raised after the run; LoadGen must still see the sample done
                    self.errors.append(e)
            took = (self._clock() - issued) / 1e6
            with self._lock:
                self.harness_ms.extend([took] * len(sample_ids))
            lg.QuerySamplesComplete([lg.QuerySampleResponse(i, 0, 0) for i in sample_ids])

    def close(self) -> None:
        for _ in self._threads:
            self._queue.put(None)
        for t in self._threads:
            t.join(timeout=60)


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
    clock of each sample (ms). A query that raised is re-raised once LoadGen has finished."""
    import mlperf_loadgen as lg

    outdir.mkdir(parents=True, exist_ok=True)
    sut_side = Dispatcher(queries, grouped=grouped)
    sut = lg.ConstructSUT(sut_side.issue, sut_side.flush)
    # The samples are decoded once, before any query (harness.measure.pipeline.decoded): nothing to load.
    qsl = lg.ConstructQSL(samples, samples, lambda _: None, lambda _: None)
    log_settings = lg.LogSettings()
    log_settings.log_output.outdir = str(outdir)
    log_settings.log_output.copy_summary_to_stdout = False
    log_settings.enable_trace = True  # each sample's latency, for the percentiles' intervals
    try:
        lg.StartTestWithLogSettings(sut, qsl, settings, log_settings, "")
    finally:
        lg.DestroyQSL(qsl)
        lg.DestroySUT(sut)
        sut_side.close()
    if sut_side.errors:
        raise sut_side.errors[0]
    run = read_run(scenario, outdir)
    compress_trace(outdir)
    return run, sut_side.harness_ms
