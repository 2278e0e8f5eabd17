"""Versions: this harness's, its record schema's, and an installed library's.

They live in the core so that the core stands alone; `harness.__version__` and `harness.SCHEMA_VERSION` re-export
the first two.
"""

from __future__ import annotations

__version__ = "0.1.0"
#: the version of the records and env.json a run writes (older ones are migrated by harness.core.migrate)
SCHEMA_VERSION = 2


def library_version(module: str) -> str | None:
    """Installed version of a distribution/module, without importing it."""
    from importlib import metadata

    # TensorRT's wheels: the `tensorrt` metapackage, or the CUDA-specific package alone
    names = {
        "onnxruntime": ("onnxruntime", "onnxruntime-gpu"),
        "tensorrt": ("tensorrt", "tensorrt-cu13", "tensorrt-cu12", "tensorrt-cu11"),
    }
    for dist in names.get(module, (module,)):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None
