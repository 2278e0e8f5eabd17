"""Root conftest: registers the yolo26-bench pytest plugin (matrix options, cell parametrization, records)."""

import harness  # noqa: F401  (sets YOLO_OFFLINE / YOLO_AUTOINSTALL before anything imports ultralytics)

pytest_plugins = ["harness.pytest_plugin.plugin", "harness.pytest_plugin.xdist_gpu"]
