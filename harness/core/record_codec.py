"""The one place a record turns into its JSON line and back: `CellRecord` <-> dict <-> one line of cells.jsonl.

`record_from_dict` validates before it builds: an unknown (misspelt) top-level field, a missing one, a value of the
wrong type, a section key its dataclass does not know, or a value outside its field's vocabulary (a status not in
STATUSES, an axis value not in harness.core.axes: ENUMERATED) is a RecordError naming the cell, the field and the
value. Older
schema versions are migrated first (harness.core.migrate), so a CellRecord is always the current version.
`record_to_dict` gives the fields in the written order (RECORD_FIELDS, then the OPTIONAL_FIELDS that are set)
and a section's keys in its dataclass's order, leaving out the keys its record did not carry (a Latency of a record
written before `p50_ci` existed); a record read back in another order (an older record, migrated) keeps it. So
reading a record and writing it back gives what read_records gives, field for field and in the same order.
"""

from __future__ import annotations

import json
import types
import typing
from dataclasses import MISSING, fields, is_dataclass
from typing import Any

from harness.core.axes import FAMILIES, HEADS, PRECISIONS, SIZES, TASKS
from harness.core.migrate import migrate_record
from harness.core.record import (
    OPTIONAL_DEFAULTS,
    OPTIONAL_FIELDS,
    STATUSES,
    CellRecord,
    Energy,
    Latency,
    Memory,
    Roofline,
)

#: the sections typed as dataclasses (the others are dict[str, Any]: their keys vary)
SECTION_TYPES: tuple[type, ...] = (Latency, Memory, Energy, Roofline)
#: the attribute a record read back carries when its fields were not in the written order (a v2 record written
#: before fields were added: the migration appends them at the end): written back, it keeps that order
_ORDER = "_field_order"
#: the attribute a section read from a record carries when that record lacked some of its keys: they stay absent
#: when it is written back (a default filled in would change the record)
_ABSENT = "_absent_keys"


class RecordError(ValueError):
    """A record that does not fit CellRecord: the message names the cell, the field and what is wrong."""


#: fields whose value is one of a closed vocabulary: a record naming another ("splendid", size "zz") is no record
#: the readers can place (a matrix badge, a size ladder's rung); what a cell id is made of must be there too
ENUMERATED: dict[str, tuple[str, ...]] = {
    "status": STATUSES,
    "size": SIZES,
    "task": TASKS,
    "head": HEADS,
    "precision_requested": PRECISIONS,
    "family": FAMILIES,
}


#: the most characters of a value a RecordError shows (a record's 10 MB string is named, not printed)
SHOWN_LIMIT = 200


def shown(value: Any) -> str:
    """`repr(value)`, cut to SHOWN_LIMIT characters with how long it was: what an error message shows of a value."""
    text = repr(value)
    return text if len(text) <= SHOWN_LIMIT else f"{text[:SHOWN_LIMIT]}... ({len(text)} characters)"


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


_RECORD_HINTS = _hints(CellRecord)
_SECTION_HINTS = {cls: _hints(cls) for cls in SECTION_TYPES}


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _fits(value: Any, tp: Any) -> bool:
    """Whether a JSON value fits the annotation `tp` (int counts as float, bool never as a number)."""
    if tp is Any:
        return True
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, arg) for arg in typing.get_args(tp))
    if tp is type(None):
        return value is None
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if tp is str:
        return isinstance(value, str)
    if origin is list:
        (item,) = typing.get_args(tp)
        return isinstance(value, list) and all(_fits(v, item) for v in value)
    if origin is dict:
        key, val = typing.get_args(tp)
        return isinstance(value, dict) and all(_fits(k, key) and _fits(v, val) for k, v in value.items())
    if isinstance(tp, type) and is_dataclass(tp):
        return isinstance(value, tp)
    raise TypeError(f"no check for the annotation {tp!r}")  # a new kind of annotation needs its check here


def _section_class(tp: Any) -> type | None:
    """The section dataclass in an annotation like `Latency | None`, else None."""
    for arg in typing.get_args(tp) or (tp,):
        if arg in SECTION_TYPES:
            return arg
    return None


def _section_from_dict(cls: type, data: dict, where: str) -> Any:
    names = [f.name for f in fields(cls)]
    unknown = [k for k in data if k not in names]
    if unknown:
        raise RecordError(f"{where}: unknown keys {shown(unknown)} (a {cls.__name__} has {names})")
    if list(data) != [k for k in names if k in data]:
        raise RecordError(f"{where}: keys {shown(list(data))} are not in {cls.__name__}'s order {names}")
    for k, v in data.items():
        # a number refused as NaN or infinite is written as null with its reason (record.check_finite)
        refused = v is None and _fits(0.0, _SECTION_HINTS[cls][k])
        if not refused and not _fits(v, _SECTION_HINTS[cls][k]):
            raise RecordError(
                f"{where}.{k}: {shown(v)} is not {_type_name(_SECTION_HINTS[cls][k])} ({type(v).__name__})"
            )
    # a key the record lacks stays absent when written back; read, it is its default, or None where the class has
    # none (a section a test or an older writer built by hand, with only some figures)
    required = [f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING]
    section = cls(**{**dict.fromkeys(k for k in required if k not in data), **data})
    absent = tuple(k for k in names if k not in data)
    if absent:
        object.__setattr__(section, _ABSENT, absent)  # works on a frozen dataclass too (no __slots__)
    return section


def section_items(section: Any) -> list[tuple[str, Any]]:
    """(key, value) of a record section as the record holds it: a typed section's fields (but those the record it
    was read from lacked), a dict section's items; none for a null section."""
    if type(section) in SECTION_TYPES:
        absent = getattr(section, _ABSENT, ())
        return [(f.name, getattr(section, f.name)) for f in fields(section) if f.name not in absent]
    return list(section.items()) if isinstance(section, dict) else []


def _section_to_dict(section: Any) -> dict[str, Any]:
    return dict(section_items(section))


def record_from_dict(data: dict[str, Any], migrate: bool = True) -> CellRecord:
    """The typed record of a record dict, migrated first when `migrate` (a record read back: an older schema
    version is converted, a field added since it was written becomes null with the reason). A record about to be
    written is not migrated (`migrate=False`): it must carry every field itself.

    Raises RecordError for an unknown or missing top-level field, a value of the wrong type, or a section that does
    not fit its dataclass; ValueError (from the migration) for an unknown schema version.
    """
    if not isinstance(data, dict):
        raise RecordError(f"a record is a JSON object, not {type(data).__name__}")
    rec = migrate_record(data) if migrate else data
    cell = rec.get("cell_id")
    cell = cell if isinstance(cell, str) and len(cell) <= SHOWN_LIMIT else shown(cell)
    known = _RECORD_HINTS.keys()
    unknown = [k for k in rec if k not in known]
    if unknown:
        raise RecordError(f"record {cell}: unknown fields {shown(unknown)}; a CellRecord has no such field")
    missing = [f.name for f in fields(CellRecord) if f.name not in rec and f.name not in OPTIONAL_FIELDS]
    if missing:
        raise RecordError(f"record {cell}: missing fields {missing}")
    values: dict[str, Any] = {}
    for name, value in rec.items():
        tp = _RECORD_HINTS[name]
        cls = _section_class(tp)
        if cls is not None and isinstance(value, dict):
            value = _section_from_dict(cls, value, f"record {cell}: {name}")
        if not _fits(value, tp):
            raise RecordError(
                f"record {cell}: field {name} = {shown(value)} is not {_type_name(tp)} ({type(value).__name__})"
            )
        if name in ENUMERATED and value not in ENUMERATED[name]:
            raise RecordError(
                f"record {cell}: field {name} = {shown(value)} is not one of {', '.join(ENUMERATED[name])}"
            )
        values[name] = value
    if not values.get("cell_id"):
        raise RecordError(f"record {cell}: field cell_id = {shown(values.get('cell_id'))} is empty")
    out = CellRecord(**values)
    if tuple(rec) != _written_names(out):
        object.__setattr__(out, _ORDER, tuple(rec))
    return out


def _written_names(rec: CellRecord) -> tuple[str, ...]:
    """The fields record_to_dict writes for a record built here: every field in order, an optional one when set
    (other than its default: a YOLO26 record carries no `family`)."""
    return tuple(
        f.name
        for f in fields(rec)
        if f.name not in OPTIONAL_FIELDS or getattr(rec, f.name) != OPTIONAL_DEFAULTS.get(f.name)
    )


def record_to_dict(rec: CellRecord) -> dict[str, Any]:
    """The record as the dict written to cells.jsonl: fields in the written order, sections as plain dicts; the
    OPTIONAL_FIELDS only when set."""
    names = getattr(rec, _ORDER, None) or _written_names(rec)
    # an optional field set after the record was read (a merge names the machine) follows the read order
    names = (*names, *(n for n in _written_names(rec) if n not in names))
    out: dict[str, Any] = {}
    for name in names:
        value = getattr(rec, name)
        out[name] = _section_to_dict(value) if type(value) in SECTION_TYPES else value
    return out


def record_to_json(rec: CellRecord) -> str:
    """The record's line in cells.jsonl (without the newline). NaN and infinity are refused (not JSON);
    RecordWriter nulls them with a reason before it gets here."""
    return json.dumps(record_to_dict(rec), sort_keys=False, allow_nan=False, default=str)


def record_from_json(line: str | bytes) -> CellRecord:
    """The typed record on one line of cells.jsonl, migrated to the current schema version.

    Raises RecordError (a ValueError) when the line is not a JSON object or does not fit CellRecord."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as e:
        raise RecordError(f"not JSON: {e}") from None
    return record_from_dict(data)


__all__ = [
    "SECTION_TYPES",
    "RecordError",
    "record_from_dict",
    "record_from_json",
    "record_to_dict",
    "record_to_json",
    "section_items",
]
