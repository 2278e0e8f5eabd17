"""On-disk export cache keyed by everything that changes the artifact.

Key: backend, device, weights hash, task, head, shape (or dynamic range), batch, precision, export options, and the
versions of torch, ultralytics and the backend's library. A second run with nothing changed exports nothing.
Deterministic failures (export_failed) are cached too; timeouts and crashes are not, so they are retried.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import shutil
from dataclasses import asdict
from pathlib import Path

from harness.backends.base import library_version
from harness.execute.isolate import ExportOutcome

log = logging.getLogger(__name__)

_HARNESS = Path(__file__).resolve().parent.parent
# The harness code that shapes every artifact; a backend's own module is added per backend. A change to any of
# these files invalidates the cached exports that depend on it.
SHARED_EXPORT_SOURCES = (
    "yolo/models.py",
    "yolo/dynamic.py",
    "yolo/inputs.py",
    "backends/base.py",
    "backends/_shared/ultralytics_export.py",
    "backends/_shared/executorch_export.py",
)


@functools.lru_cache(maxsize=64)
def export_code_digest(backend_module: str | None = None) -> str:
    h = hashlib.sha256()
    files = [_HARNESS / f for f in SHARED_EXPORT_SOURCES]
    if backend_module:
        files.append(Path(backend_module))
    for f in files:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def cache_key(fields: dict, library: str | None, backend_module: str | None = None) -> str:
    libs = {name: library_version(name) for name in ("torch", "ultralytics", library) if name}
    code = export_code_digest(backend_module)
    blob = json.dumps({"fields": fields, "libs": libs, "code": code}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


class ExportCache:
    """exports/<readable name>-<key12>/ holding the artifact and meta.json (the ExportOutcome)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root) / "exports"

    def entry_dir(self, name: str, key: str) -> Path:
        return self.root / f"{name}-{key[:12]}"

    def lookup(self, entry: Path) -> ExportOutcome | None:
        meta = entry / "meta.json"
        if not meta.exists():
            return None
        try:
            d = json.loads(meta.read_text())
            outcome = ExportOutcome(**d)
        except (ValueError, TypeError) as e:
            log.warning("ignoring unreadable cache entry %s: %s", meta, e)
            return None
        if outcome.status == "ok" and not (outcome.artifact and Path(outcome.artifact).exists()):
            return None
        return outcome

    def store(self, entry: Path, outcome: ExportOutcome) -> None:
        if outcome.status not in ("ok", "export_failed"):
            return
        tmp = entry / "meta.json.tmp"
        tmp.write_text(json.dumps(asdict(outcome), default=str))
        tmp.replace(entry / "meta.json")

    def clear(self, entry: Path) -> None:
        shutil.rmtree(entry, ignore_errors=True)
