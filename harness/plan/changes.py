"""Which cells the change since the last run touches: the files changed in git since that run's commit, and the
library versions that differ from its env.json.

- a backend's own module (harness/backends/<module>.py): that backend's cells;
- the export code every backend shares (harness/backends/base.py, harness/backends/_shared/, the export stages
  of harness/execute/): every cell;
- a library whose version changed (env.json `libraries`): the cells of the backends whose `library` it is, and
  every cell when it is ultralytics or torch's export stack (every export goes through them).
Anything else (the report, the history, tests) touches no cell: its effect is not a measurement.
"""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

from harness import backends
from harness.core.cell import Cell

log = logging.getLogger(__name__)

SHARED_EXPORT_CODE = (
    "harness/backends/base.py",
    "harness/backends/_shared/",
    "harness/execute/exporting.py",
    "harness/execute/export_cache.py",
    "harness/yolo/",
)
#: libraries every export goes through
EVERY_CELL_LIBRARIES = ("ultralytics", "torch")


def changed_files(since_commit: str | None, repo: Path | None = None) -> tuple[list[str], str | None]:
    """Files changed between `since_commit` and the working tree (committed or not), and why none could be
    listed (no commit recorded, no git, an unknown commit) as the second item."""
    if not since_commit:
        return [], "the last run recorded no commit"
    commit = since_commit.removesuffix("-dirty")
    try:
        out = subprocess.run(
            ["git", "diff", "--name-only", commit],
            cwd=repo,
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return [], f"git diff failed ({e})"
    if out.returncode != 0:
        return [], f"git diff {commit[:12]} failed: {out.stderr.strip().splitlines()[-1:] or out.returncode}"
    return [line for line in out.stdout.splitlines() if line], None


def _module_backends() -> dict[str, list[str]]:
    """Backend module path (harness/backends/x.py) -> the backends it defines."""
    out: dict[str, list[str]] = {}
    for name in backends.names():
        module = type(backends.get(name)).__module__
        out.setdefault(module.replace(".", "/") + ".py", []).append(name)
    return out


def touched(
    cells: Iterable[Cell],
    files: Iterable[str],
    old_libraries: Mapping[str, str | None] | None,
    new_libraries: Mapping[str, str | None] | None,
) -> dict[str, str]:
    """Cell id -> what of the change touches it (a file or `library a -> b`), for the cells the change touches."""
    files = list(files)
    why_backend: dict[str, str] = {}
    why_all: str | None = None
    by_module = _module_backends()
    for f in files:
        if any(f == p or (p.endswith("/") and f.startswith(p)) for p in SHARED_EXPORT_CODE):
            why_all = why_all or f
        for name in by_module.get(f, []):
            why_backend.setdefault(name, f)
    if old_libraries is not None and new_libraries is not None:
        for lib in sorted(set(old_libraries) | set(new_libraries)):
            old, new = old_libraries.get(lib), new_libraries.get(lib)
            if old == new:
                continue
            what = f"{lib} {old} -> {new}"
            if lib in EVERY_CELL_LIBRARIES:
                why_all = why_all or what
            for name in backends.names():
                if getattr(backends.get(name), "library", None) == lib:
                    why_backend.setdefault(name, what)
    out: dict[str, str] = {}
    for c in cells:
        why = why_backend.get(c.backend) or why_all
        if why:
            out[c.id] = why
    return out
