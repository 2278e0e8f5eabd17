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
    dists = names.get(module, (module,))
    if len(dists) > 1:
        # several distributions provide the module (onnxruntime and onnxruntime-gpu): the one whose files sit
        # beside the module that imports first (the GPU kit puts onnxruntime-gpu first on PYTHONPATH, ahead of the
        # machine's CPU onnxruntime, which stays installed)
        found = _importing_distribution(module, dists)
        if found is not None:
            return found
    for dist in dists:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def _importing_distribution(module: str, dists: tuple[str, ...]) -> str | None:
    """The version of whichever of `dists` is installed in the folder `module` would import from (found without
    importing it), or None."""
    import importlib.util
    from importlib import metadata
    from pathlib import Path

    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    locations = list(spec.submodule_search_locations or [])
    where = Path(locations[0]) if locations else Path(spec.origin) if spec.origin else None
    if where is None:
        return None
    wanted = {d.lower().replace("_", "-") for d in dists}
    for dist in metadata.distributions(path=[str(where.parent)]):
        name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        if name in wanted:
            return dist.version
    return None
