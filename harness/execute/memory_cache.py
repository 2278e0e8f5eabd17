"""Host memory measured in a fresh process, kept beside the export cache and reused, labelled, on later runs.

A cell's host memory is measured in the probe's fresh process (so it does not depend on earlier cells). That costs
a process start, an import of the runtime and a load per cell, which a run with every export cached would otherwise
not pay. The figures of one artifact, loaded by one runtime version under one thread budget, do not change between
runs, so they are kept under `<cache>/memory/` and a later run reuses them, saying in `memory.origin` which run
measured them and when (as a cached export's `export_origin` does). `--refresh-cache` measures again.
"""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import UTC, datetime
from pathlib import Path

from harness.backends.base import library_version

log = logging.getLogger(__name__)

#: what a cuda cell's probe measures beside host memory (harness.measure.gpu_memory_fresh): part of its entry's key
GPU_MEASURES = "gpu-memory-fresh-process"


class MemoryCache:
    """`<cache>/memory/<cell id>-<key12>.json`: the memory section and null reasons a probe measured."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root) / "memory"

    def path(
        self,
        cell_id: str,
        artifact: Path,
        identity: str,
        library: str | None,
        threads: int,
        rounds: int,
        measures: str = "",
    ) -> Path:
        """The entry of one artifact (its path, size and mtime, or the weights hash for a checkpoint) measured by one
        runtime version under one thread budget and probe length; `measures` names what the probe measured beside
        host memory (GPU_MEASURES for a cuda cell), so an entry from a probe that measured less is not reused."""
        try:
            st = Path(artifact).stat()
            stamp = f"{st.st_size}:{st.st_mtime_ns}"
        except OSError:
            stamp = "missing"
        blob = json.dumps(
            [
                str(artifact),
                stamp,
                identity,
                library,
                library_version(library) if library else None,
                threads,
                rounds,
                *([measures] if measures else []),  # an entry without it keeps its key
            ]
        )
        return self.root / f"{cell_id}-{hashlib.sha256(blob.encode()).hexdigest()[:12]}.json"

    def get(self, path: Path) -> dict | None:
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None

    def put(self, path: Path, memory: dict, null_reasons: dict, run_id: str) -> dict:
        """Keep a fresh measurement; returns its origin line."""
        origin = f"measured by run {run_id} at {datetime.now(UTC).isoformat(timespec='seconds')}"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"memory": memory, "null_reasons": null_reasons, "origin": origin}))
        tmp.replace(path)
        return {"memory": memory, "null_reasons": null_reasons, "origin": origin}
