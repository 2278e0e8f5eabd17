"""How an isolated step (an export, or a probe's load and first run in a separate process) ended.

It lives below harness.execute, which makes these outcomes (harness.execute.isolate) and caches them
(harness.execute.export_cache), because the diagnosis of a failure (harness.diagnosis.failure) reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ExportOutcome:
    """How an isolated step ended. status: ok, export_failed (or run_failed for probes), timeout or crashed."""

    status: str
    export_s: float | None
    artifact: str | None = None
    info: dict = field(default_factory=dict)
    message: str | None = None
    exception_type: str | None = None
    traceback: str | None = None
    signal: str | None = None
    wall_s: float | None = None  # None: the outcome came from the export cache
    log: str | None = None
    exported_by_run: str | None = None  # the run that made the export (kept in the cache's meta.json)
    exported_at: str | None = None
    # Where the export cache keeps it (harness.execute.export_cache); not stored in meta.json's outcome:
    cache_entry: str | None = None  # the entry directory, when the export is cached
    content_sha256: str | None = None  # digest of the entry's file hashes (names the content that was loaded)
    cache_note: str | None = (
        None  # why an entry was not used and the export made again (corrupt, other limits)
    )
    #: a native crash's Python stack as faulthandler printed it (harness.diagnosis.native_fault.NativeFault.to_dict)
    fault: dict | None = None
    fresh_failure: dict | None = None  # a fresh export of this content failed to load or run: {stage, reason}
