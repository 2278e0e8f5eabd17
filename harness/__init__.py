"""yolo26-bench: benchmark and compatibility-matrix harness for Ultralytics YOLO26."""

import os

# ultralytics reads these at import time: without them it tries to pip-install requirements and phone home.
os.environ.setdefault("YOLO_OFFLINE", "1")
os.environ.setdefault("YOLO_AUTOINSTALL", "0")
os.environ.setdefault("YOLO_VERBOSE", "False")

__version__ = "0.1.0"
SCHEMA_VERSION = 2
