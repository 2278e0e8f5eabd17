"""Machine fingerprint: what must be equal for two runs to be comparable (one "series").

The fingerprint holds the GPU model(s), driver, CUDA version, the backend library versions and the record schema
version; the CPU model stands in for the GPU on machines without one. The hostname is deliberately not part of it:
two identical machines form one series, and a host whose driver is upgraded starts a new one.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass

log = logging.getLogger(__name__)

# Libraries env.json lists that do not change what is measured (the measurement tooling): a new version of one of
# them must not start a new series. Every other library listed (backends, their converters, numpy for pre/post
# processing) is part of the fingerprint.
NOT_IN_FINGERPRINT = frozenset({"nvidia-ml-py", "pytest-benchmark"})


@dataclass(frozen=True)
class Fingerprint:
    """The comparable identity of a machine and software stack. `series_id` is a stable hash of it."""

    schema_version: int
    gpu_models: tuple[str, ...]
    driver: str | None
    cuda: str | None
    cpu_model: str | None
    libraries: tuple[tuple[str, str], ...]

    def to_dict(self) -> dict:
        """Plain-JSON form, as stored in the history database."""
        return {
            "schema_version": self.schema_version,
            "gpu_models": list(self.gpu_models),
            "driver": self.driver,
            "cuda": self.cuda,
            "cpu_model": self.cpu_model,
            "libraries": dict(self.libraries),
        }

    @property
    def series_id(self) -> str:
        """16 hex digits of the SHA-256 of the canonical JSON form."""
        blob = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @property
    def label(self) -> str:
        """A short human-readable description, e.g. for Markdown headers."""
        parts = [" + ".join(self.gpu_models) if self.gpu_models else (self.cpu_model or "unknown CPU")]
        if self.driver:
            parts.append(f"driver {self.driver}")
        if self.cuda:
            parts.append(f"CUDA {self.cuda}")
        parts.extend(f"{name} {version}" for name, version in self.libraries)
        parts.append(f"schema {self.schema_version}")
        return ", ".join(parts)


def fingerprint_from_env(env: dict, schema_version: int) -> Fingerprint:
    """Build the fingerprint of a run from its env.json and the schema version of its records.

    Library entries whose version is null are dropped, so that a library key added to env.json later (always
    null on machines without it) does not split an existing series; so are the NOT_IN_FINGERPRINT tools.
    """
    gpus = env.get("gpu") or []
    gpu_models = tuple(sorted({str(g.get("name")) for g in gpus if g.get("name")}))
    drivers = sorted({str(g.get("driver")) for g in gpus if g.get("driver")})
    cuda = (env.get("cuda") or {}).get("version")
    cpu_model = None if gpu_models else (env.get("host") or {}).get("cpu_model")
    libraries = tuple(
        sorted(
            (str(k), str(v))
            for k, v in (env.get("libraries") or {}).items()
            if v is not None and k not in NOT_IN_FINGERPRINT
        )
    )
    return Fingerprint(
        schema_version=int(schema_version),
        gpu_models=gpu_models,
        driver=",".join(drivers) or None,
        cuda=str(cuda) if cuda is not None else None,
        cpu_model=cpu_model,
        libraries=libraries,
    )


def machine_name(env: dict) -> str:
    """The machine a run came from: its hostname, or 'unknown' when env.json does not say."""
    return str((env.get("host") or {}).get("hostname") or "unknown")
