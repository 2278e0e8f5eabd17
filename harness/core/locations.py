"""Where the harness keeps what it writes when no option says: the results directory and the export cache.

`--results-dir` defaults to $YOLO26_BENCH_RESULTS_DIR, else `results`; `--cache-dir` (and the generated dataset
under it) to $YOLO26_BENCH_CACHE_DIR, else `.cache/yolo26-bench`, both relative to the working directory. The
variables move a whole clone's defaults at once (results on a bigger disk, a cache shared by several clones); the
harness's own tests set both to temporary directories, so that no test reads or writes a clone's default cache,
results or reports (a main job run in the clone before the tests changes nothing in them). Read when asked, not at
import, so that a variable set before a command (or a test session) starts is the one used.
"""

from __future__ import annotations

import os

RESULTS_DIR_ENV = "YOLO26_BENCH_RESULTS_DIR"
CACHE_DIR_ENV = "YOLO26_BENCH_CACHE_DIR"
#: the built-in defaults, when the variables are unset (or empty)
RESULTS_DIR = "results"
CACHE_DIR = ".cache/yolo26-bench"


def results_dir() -> str:
    """The default results directory: $YOLO26_BENCH_RESULTS_DIR, else `results`."""
    return os.environ.get(RESULTS_DIR_ENV) or RESULTS_DIR


def cache_dir() -> str:
    """The default export cache: $YOLO26_BENCH_CACHE_DIR, else `.cache/yolo26-bench`."""
    return os.environ.get(CACHE_DIR_ENV) or CACHE_DIR
