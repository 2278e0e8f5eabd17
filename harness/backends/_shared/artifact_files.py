"""The files of a directory artifact, named at export and loaded by those names.

A backend whose artifact is a directory (OpenVINO's IR, ExecuTorch's .pte with its .ptd weights) records the
names of the files it wrote in the export's info, and its loader opens exactly those: a loader that picked a file
by pattern (`next(dir.glob("*.xml"))`) would run whatever else lies in the directory, a model nobody exported.
"""

from __future__ import annotations

from pathlib import Path


class ArtifactFileError(ValueError):
    """A recorded file name that is missing, not a plain name, or not a regular file inside the artifact."""


def only_file(directory: Path, pattern: str) -> str:
    """At export: the name of the one file matching `pattern` that the exporter wrote into `directory`."""
    found = sorted(p.name for p in Path(directory).glob(pattern) if p.is_file())
    if len(found) != 1:
        raise ArtifactFileError(
            f"the export wrote {len(found)} files matching {pattern} into {directory} ({', '.join(found)}); "
            "expected one"
        )
    return found[0]


def recorded_file(artifact: Path, export_info: dict, key: str) -> Path:
    """At load: the file the export recorded under `key` in its info, inside `artifact` (a directory)."""
    name = export_info.get(key)
    if not isinstance(name, str) or not name or name in (".", "..") or "/" in name or "\\" in name:
        raise ArtifactFileError(
            f"the export of {artifact} recorded no usable {key} ({name!r}); export it again"
        )
    path = Path(artifact) / name
    if path.is_symlink() or not path.is_file():
        raise ArtifactFileError(f"{path}: the recorded {key} is not a regular file in the artifact")
    return path
