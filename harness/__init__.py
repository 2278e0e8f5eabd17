"""yolo26-bench: benchmark and compatibility-matrix harness for Ultralytics YOLO26."""

import os

from harness import offline

# The versions live in the core (which imports nothing above it); re-exported here for users.
from harness.core.version import SCHEMA_VERSION as SCHEMA_VERSION
from harness.core.version import __version__ as __version__

# Before anything imports ultralytics or a runtime (they read these at import): no network, no pip, no telemetry.
offline.apply()

#: set to "1" by --allow-unsafe-weights; inherited by the export and probe workers
ALLOW_UNSAFE_WEIGHTS_ENV = "YOLO26_BENCH_ALLOW_UNSAFE_WEIGHTS"
# ultralytics' own switch for loading checkpoints with torch.load(weights_only=True) and an allow-list of its model
# classes: a .pt file is a pickle, and a full unpickle runs whatever code the file names. harness.yolo.models
# applies the same policy again per load, for a process that imported ultralytics before this package.
os.environ["ULTRALYTICS_SAFE_LOAD"] = "0" if os.environ.get(ALLOW_UNSAFE_WEIGHTS_ENV) == "1" else "1"
