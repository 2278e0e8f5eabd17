"""The run-wide collaborators of a run, built once (`open_run`), and the run's mutable bookkeeping.

`RunServices` is frozen: what every attempt of the run shares (config, progress line, record writer, export cache,
memory cache, checkpoints, PyTorch references, evaluation data, drift canary). `RunState` holds what the run learns
as it goes (attempts the export phase prepared, workloads the timing phase timed, why the run
must stop). A stage is handed the collaborators it uses, never the whole of either (harness.execute.stages wires
them).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.core.cell import Cell
from harness.core.results_dir import RecordWriter
from harness.execute.config import RunConfig
from harness.execute.export_cache import CacheFullError, ExportCache
from harness.execute.memory_cache import MemoryCache
from harness.execute.state import AttemptState
from harness.measure.canary import Canary
from harness.measure.parity import References
from harness.measure.timing import slowdown_factors
from harness.threads import set_budget
from harness.yolo.models import Materialized, ModelSource, materialize

if TYPE_CHECKING:
    from harness.accuracy.evaluate import Split

log = logging.getLogger(__name__)

#: where the generated evaluation dataset lives (default CACHE_DIR/dataset-eval); tests share one per session
DATASET_DIR_ENV = "YOLO26_BENCH_DATASET_DIR"

#: one progress line, safe to call from the export phase's threads
Progress = Callable[[str], None]


class Checkpoints:
    """The checkpoint of each model, built once per run (the export phase's threads ask at once: one builds it,
    the others wait for it)."""

    def __init__(self, config: RunConfig) -> None:
        self._config = config
        self._built: dict[tuple, Materialized] = {}
        self._lock = threading.Lock()
        self._model_locks: dict[tuple, threading.Lock] = {}

    def materialize(self, cell: Cell) -> Materialized:
        """The checkpoint of `cell`'s model (family, size and task)."""
        key = (cell.family, cell.size, cell.task)
        with self._lock:
            lock = self._model_locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._built:
                cfg = self._config
                src = ModelSource(
                    cell.size, cell.task, cfg.weights_dir, cfg.seed, cfg.standin, family=cell.family
                )
                self._built[key] = materialize(src, cfg.cache_dir)
        return self._built[key]


class EvalData:
    """The dataset of accuracy and int8 calibration, and the val images accuracy scores on, each loaded once."""

    def __init__(self, data: str | Path | None, cache_dir: Path, accuracy_images: int) -> None:
        self._data = data
        self._cache_dir = cache_dir
        self._accuracy_images = accuracy_images
        self._dataset: Path | None = None
        self._lock = threading.Lock()
        self._split: Split | None = None  # the val images accuracy scores on, loaded once

    def dataset_yaml(self) -> Path:
        """--data, else the generated one (its val and calib splits) in $YOLO26_BENCH_DATASET_DIR or
        CACHE_DIR/dataset-eval, generated on first use."""
        with self._lock:
            if self._dataset is None:
                from harness.yolo import dataset as ds

                if self._data:
                    self._dataset = Path(self._data).resolve()
                else:  # val and calib only: each image has its own seed, so they are the training set's own
                    root = os.environ.get(DATASET_DIR_ENV) or Path(self._cache_dir) / "dataset-eval"
                    self._dataset = ds.generate(Path(root), train=1)
        return self._dataset

    def accuracy_split(self, cell: Cell):
        """The val images `cell`'s accuracy is scored on: the first `accuracy_images` by name, fewer above 640x640
        pixels (harness.accuracy.per_cell.images_for), the same for every cell of one shape."""
        from harness.accuracy.per_cell import images_for

        if self._split is None:
            from harness.accuracy.evaluate import load_split

            self._split = load_split(self.dataset_yaml(), "val", limit=self._accuracy_images)
        n = images_for(self._accuracy_images, cell.shape.height, cell.shape.width)
        return self._split.first(n)


@dataclass(frozen=True)
class RunServices:
    """What every attempt of one run shares; built once by `open_run`."""

    config: RunConfig
    progress: Progress
    writer: RecordWriter
    cache: ExportCache
    memory_cache: MemoryCache
    checkpoints: Checkpoints
    references: References
    data: EvalData
    canary: Canary | None
    #: the slowdown knob's factor per backend (harness.measure.timing.slowdown_factors)
    slowdown: dict[str, float]
    #: PyTorch fp32 mAP per (weights, head, shape, dataset, images): what every cell's accuracy is a ratio to
    accuracy_refs: dict[tuple, dict]

    def slowdown_factor(self, cell: Cell) -> float:
        return self.slowdown.get(cell.backend, 1.0)


@dataclass
class RunState:
    """What the run learns as it goes: the bookkeeping between its phases."""

    #: attempts the export phase took up to their load (harness.execute.workload.prepare_all): cell id -> attempt
    prepared: dict[str, AttemptState] = field(default_factory=dict)
    #: workloads the timing phase loaded and timed: label -> (their attempts, the ready ones)
    timed_workloads: dict[str, tuple[list[AttemptState], list[AttemptState]]] = field(default_factory=dict)
    #: why the run must stop after the records in hand are written (an export met a full disk)
    stop_reason: str | None = None
    #: export cache entries --refresh-cache has exported again in this run
    refreshed: set[str] = field(default_factory=set)
    #: the last loaded runtime, kept for side-by-side benchmarks of the harness against a bare loop; dropped before
    #: the next cell loads (its memory must not count there)
    last_runner: Any = None

    def check_stop(self) -> None:
        """Raise CacheFullError when an export met a full disk: the run stops (its records so far are written)."""
        if self.stop_reason:
            raise CacheFullError(self.stop_reason)


def open_run(config: RunConfig, progress: Progress | None = None) -> RunServices:
    """The run's services: its directories made, the thread budget set, the caches opened."""
    say = progress or (lambda msg: log.info("%s", msg))
    lock = threading.Lock()

    def progress_line(msg: str) -> None:  # the export phase reports from several threads
        with lock:
            say(msg)

    canary = Canary(config.threads) if config.canary else None
    set_budget(config.threads)  # every runtime of this process and its export/probe children get the budget
    config.run_dir.mkdir(parents=True, exist_ok=True)
    (config.run_dir / "logs").mkdir(exist_ok=True)
    return RunServices(
        config=config,
        progress=progress_line,
        writer=RecordWriter(config.run_dir, notify=progress_line),
        cache=ExportCache(config.cache_dir),
        memory_cache=MemoryCache(config.cache_dir),
        checkpoints=Checkpoints(config),
        references=References(),
        data=EvalData(config.data, config.cache_dir, config.accuracy_images),
        canary=canary,
        slowdown=slowdown_factors(),
        accuracy_refs={},
    )
