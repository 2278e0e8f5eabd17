"""The declarative remedy ladder (remedies.yaml): which known workaround applies to a failed cell."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

REMEDIES_FILE = Path(__file__).with_name("remedies.yaml")


@dataclass(frozen=True)
class Remedy:
    name: str
    description: str
    when: dict
    change: dict = field(default_factory=dict)

    def applies(self, cell, failure_class: str | None, dynamic: bool, message: str | None = None) -> bool:
        facts = {
            "backend": cell.backend,
            "head": cell.head,
            "device": cell.device,
            "dynamic": dynamic,
            "multiple_of_32": cell.shape.multiple_of_32 if cell.shape.height else True,
            "class": failure_class,
        }
        for key, want in self.when.items():
            if key == "message":
                if not message or not re.search(want, message, re.IGNORECASE):
                    return False
                continue
            allowed = want if isinstance(want, list) else [want]
            if facts.get(key) not in allowed:
                return False
        return True


@functools.lru_cache(maxsize=1)
def ladder(path: Path = REMEDIES_FILE) -> tuple[Remedy, ...]:
    with open(path) as f:
        return tuple(Remedy(**r) for r in yaml.safe_load(f)["remedies"])


def matching(
    cell, failure_class: str | None, dynamic: bool = False, message: str | None = None
) -> list[Remedy]:
    return [r for r in ladder() if r.applies(cell, failure_class, dynamic, message)]


def combined_change(remedies: list[Remedy]) -> dict:
    """The cumulative change of a chain of remedies (later ones add to earlier ones)."""
    out: dict = {"export_options": {}, "load_options": {}}
    for r in remedies:
        for k, v in r.change.items():
            if k in ("export_options", "load_options"):
                out[k].update(v)
            else:
                out[k] = v
    return out


def padded(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple
