"""Schema migration of records and env.json: version 1 in, version 2 (harness.SCHEMA_VERSION) out.

Every reader of results goes through `harness.core.results_dir`, which calls these, so the report and the history
only ever see version-2 records. What v1 did not record stays null with a reason saying so; v1 values that were
not what their v2 field means (a precision copied from the request) are dropped rather than passed on as facts.
"""

from __future__ import annotations

from typing import Any

from harness.core.record import RECORD_FIELDS, Energy, Memory
from harness.core.version import SCHEMA_VERSION

V1_NOT_RECORDED = "not recorded: schema v1 record"
V1_PRECISION_COPIED = "schema v1 record: the precision was copied from the request, not read from the runtime"
V1_OPENVINO_PRECISION = "v1: OpenVINO INFERENCE_PRECISION_HINT"
V1_CACHE_HIT = "cache: an earlier run's export (v1 record does not say which)"
EXPORTED_HERE = "exported in this attempt"
V1_NO_EXPORT = "no export step recorded (schema v1 record: cache_hit is null)"
V1_ENERGY_SOURCE = "schema v1 record (memory.energy_per_inference_j): window and inference count not recorded"

# v1 `memory` keys -> v2 names; the values were already MiB (2**20 bytes), only the names said MB.
MEMORY_RENAMES = {
    "host_peak_rss_mb": "host_peak_rss_mib",
    "host_peak_delta_mb": "host_peak_delta_mib",
    "host_baseline_mb": "host_baseline_mib",
    "device_peak_used_mb": "device_peak_used_mib",
    "device_peak_process_mb": "device_peak_process_mib",
    "torch_max_allocated_mb": "torch_max_allocated_mib",
    "torch_max_reserved_mb": "torch_max_reserved_mib",
}
V1_ENERGY_KEY = "energy_per_inference_j"
# null_reasons keys (dotted paths) that v2 renamed.
REASON_RENAMES = {
    **{f"memory.{old}": f"memory.{new}" for old, new in MEMORY_RENAMES.items()},
    f"memory.{V1_ENERGY_KEY}": "energy.per_inference_j",
}
KNOWN_VERSIONS = (1, SCHEMA_VERSION)


V2_NOT_RECORDED = "not recorded: written by a harness before this field existed"


def _added_fields(rec: dict) -> dict:
    """A v2 record written before fields were added to v2 (additions only, never a change of meaning): the missing
    fields are null with the reason, so every null keeps one."""
    missing = [f for f in RECORD_FIELDS if f not in rec]
    if not missing:
        return rec
    out = {**rec, **dict.fromkeys(missing)}
    reasons = rec.get("null_reasons")
    if reasons is not None and not isinstance(reasons, dict):
        return out  # not an object: the record codec refuses it by its type, naming the field
    out["null_reasons"] = {**dict.fromkeys(missing, V2_NOT_RECORDED), **(reasons or {})}
    return out


def _version_error(version: Any) -> ValueError:
    if version is None:
        return ValueError("record has no schema_version")
    text = repr(version) if len(repr(version)) <= 100 else repr(version)[:100] + "..."
    return ValueError(
        f"record schema_version {text} is not one this harness reads "
        f"({', '.join(map(str, KNOWN_VERSIONS))}); a newer harness wrote it"
    )


def migrate_record(rec: dict) -> dict:
    """The record as schema version 2: v2 is returned as it is, v1 is converted (a new dict; the input is left
    alone). Raises ValueError for any other version, including a missing one."""
    version = rec.get("schema_version")
    if version == SCHEMA_VERSION:
        return _added_fields(rec)
    if version == 1:
        return _record_v1_to_v2(rec)
    raise _version_error(version)


def _record_v1_to_v2(old: dict) -> dict:
    rec = dict(old)
    if old.get("null_reasons") is not None and not isinstance(old["null_reasons"], dict):
        raise ValueError(f"null_reasons is a {type(old['null_reasons']).__name__}, not an object")
    reasons = {REASON_RENAMES.get(k, k): v for k, v in (old.get("null_reasons") or {}).items()}
    rec["memory"], rec["energy"] = _split_memory(old.get("memory"), reasons)
    if (
        "memory" in reasons
    ):  # the whole section was null: so is the energy split out of it, for the same reason
        reasons.setdefault("energy", reasons["memory"])
    for f in ("threads", "threads_requested", "precision_detail"):
        rec[f] = None
        reasons[f] = V1_NOT_RECORDED
    rec["precision_source"] = None
    if old.get("precision_executed") is not None:
        if (
            old.get("backend") == "openvino"
        ):  # v1 read OpenVINO's hint from the compiled model: a real reading
            rec["precision_source"] = V1_OPENVINO_PRECISION
        else:
            rec["precision_executed"] = None
            rec["precision_source"] = V1_PRECISION_COPIED
            reasons["precision_executed"] = V1_PRECISION_COPIED
    cache_hit = old.get("cache_hit")
    if cache_hit is None:
        rec["export_origin"] = None
        reasons.setdefault("export_origin", V1_NO_EXPORT)
    else:
        rec["export_origin"] = V1_CACHE_HIT if cache_hit else EXPORTED_HERE
    rec["null_reasons"] = reasons
    rec["schema_version"] = SCHEMA_VERSION
    # v2 field order first (as the runner writes it), then whatever else the record carries (merge's fields).
    ordered = {f: rec.get(f) for f in RECORD_FIELDS}
    ordered.update((k, v) for k, v in rec.items() if k not in ordered)
    return ordered


def _split_memory(mem: Any, reasons: dict) -> tuple[dict | None, dict | None]:
    """v1 `memory` -> (v2 `memory`, v2 `energy`); keys v1 did not know of are kept as they are."""
    if not isinstance(mem, dict):
        return None, None
    rest = {MEMORY_RENAMES.get(k, k): v for k, v in mem.items() if k != V1_ENERGY_KEY}
    memory = {**Memory().to_dict(), **rest}
    for name in Memory.__dataclass_fields__:
        if memory.get(name) is None and name != "source" and f"memory.{name}" not in reasons:
            reasons[f"memory.{name}"] = V1_NOT_RECORDED
    energy = Energy(per_inference_j=mem.get(V1_ENERGY_KEY)).to_dict()
    if energy["per_inference_j"] is not None:
        energy["source"] = V1_ENERGY_SOURCE
        reasons["energy.window_s"] = reasons["energy.inferences"] = V1_NOT_RECORDED
    return memory, energy


def migrate_env(env: dict) -> dict:
    """env.json as schema version 2: v2 is returned as it is; v1 (or no version: env.json before v2 did not always
    carry one) gains `threads` with a null budget. A merged run's per-machine env.json files are migrated too.
    Raises ValueError for an unknown version."""
    version = env.get("schema_version")
    if version == SCHEMA_VERSION and not _has_old_machines(env):
        return env
    if version not in (None, *KNOWN_VERSIONS):
        text = repr(version) if len(repr(version)) <= 100 else repr(version)[:100] + "..."
        raise ValueError(
            f"env.json schema_version {text} is not one this harness reads "
            f"({', '.join(map(str, KNOWN_VERSIONS))}); a newer harness wrote it"
        )
    out = dict(env)
    if version != SCHEMA_VERSION:
        host = env.get("host") if isinstance(env.get("host"), dict) else {}
        out.setdefault(
            "threads",
            {"budget": None, "physical_cores": host.get("cpu_cores_physical"), "source": V1_NOT_RECORDED},
        )
        out["schema_version"] = SCHEMA_VERSION
    machines = env.get("machines")
    if isinstance(machines, list):
        out["machines"] = [
            dict(m, env=migrate_env(m["env"]))
            if isinstance(m, dict) and isinstance(m.get("env"), dict)
            else m
            for m in machines
        ]
    return out


def _has_old_machines(env: dict) -> bool:
    machines = env.get("machines")
    return isinstance(machines, list) and any(
        isinstance(m, dict)
        and isinstance(m.get("env"), dict)
        and m["env"].get("schema_version") != SCHEMA_VERSION
        for m in machines
    )
