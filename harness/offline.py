"""Nothing leaves the machine: the switches that keep the libraries the harness loads from phoning home.

Applied by `import harness` (harness/__init__.py), so before any runtime is imported: in the benchmark process, and
in every export and probe worker (they run `python -m harness.execute.worker`, which imports this package first,
and inherit the environment variables in any case).

- ultralytics: `YOLO_OFFLINE=1` (no online checks, no usage events, no downloads), `YOLO_AUTOINSTALL=0` (no pip).
- ONNX Runtime (1.29+ ships telemetry on Linux too): `ORT_DISABLE_TELEMETRY=1`, its documented opt-out, read when
  its environment is created, i.e. before `onnxruntime.disable_telemetry_events()` can be called; the backends call
  that as well (`quiet_onnxruntime`).
- OpenVINO: its model converter (`openvino.convert_model`, used by ultralytics' OpenVINO export) sends Google
  Analytics events through the optional `openvino-telemetry` package unless the user ran `opt_in_out --opt_out`
  (a consent file in the home directory). Rather than rewrite the user's consent file, the harness makes that
  package unimportable in its own processes; OpenVINO then uses the no-op stub it ships for installs without it.
"""

from __future__ import annotations

import logging
import os
import sys

log = logging.getLogger(__name__)

#: variables forced in every harness process (a user's own value would turn a switch back on)
FORCED_ENV = {
    "YOLO_OFFLINE": "1",
    "YOLO_AUTOINSTALL": "0",
    "ORT_DISABLE_TELEMETRY": "1",
}
#: variables only defaulted (a user may want them otherwise)
DEFAULT_ENV = {"YOLO_VERBOSE": "False"}
#: packages that exist only to send usage data; importing one fails, and its users fall back to a no-op stub
TELEMETRY_PACKAGES = ("openvino_telemetry",)


def apply() -> None:
    """Set the offline environment and block the telemetry packages in this process (idempotent)."""
    os.environ.update(FORCED_ENV)
    for name, value in DEFAULT_ENV.items():
        os.environ.setdefault(name, value)
    for name in TELEMETRY_PACKAGES:
        if sys.modules.get(name) is not None:  # imported before harness: too late to stop it in this process
            log.warning("%s was imported before harness; its telemetry may be active in this process", name)
            continue
        sys.modules[name] = None  # `import openvino_telemetry` now raises ImportError


def quiet_onnxruntime(ort) -> None:
    """ONNX Runtime's runtime telemetry switch, for the imported module `ort` (ORT_DISABLE_TELEMETRY covers the
    events sent while its environment is created)."""
    disable = getattr(ort, "disable_telemetry_events", None)
    if disable is not None:
        disable()
