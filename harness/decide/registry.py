"""The use-case registry: an explicit dict filled by `register_use_case`, as backends and trackers are registered.

Every module of `harness.decide.usecases` is a use case: the registry imports each on its first use, and each
declares its objective, its constraints, the figure it ranks on and its tie rule, then registers itself. A use case
added anywhere else (a test module) registers the same way and appears in decision.json and on the page with no
other edit.

A use case is anything with the `UseCase` attributes and a `decide(indexes, cons)` that returns its `Outcome`s:
one per machine for the use cases answered per machine, one across the machines for the others.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
from dataclasses import dataclass
from typing import Protocol

from harness.decide.index import RunIndex
from harness.decide.picks import Constraints, UseCaseAnswer

log = logging.getLogger(__name__)

#: where a use case shows on the report's first screen: always, only when it has a pick or a tie, or not at all
ALWAYS, IF_ANSWERED, NOT_SHOWN = "always", "if-answered", "not-shown"


@dataclass(frozen=True)
class Outcome:
    """One use case answered on one machine (or across the machines): the answer the page shows, and its entry in
    decision.json (None: the use case compares backends across machines and is not a per-machine decision)."""

    answer: UseCaseAnswer
    entry: dict | None = None


class UseCase(Protocol):
    """What the registry needs of a use case."""

    @property
    def key(self) -> str: ...

    @property
    def order(self) -> int: ...  # page order, lowest first

    @property
    def first_screen(self) -> str: ...  # ALWAYS, IF_ANSWERED or NOT_SHOWN

    @property
    def scenario(self) -> str | None: ...  # the scenario its figure reads (None: the record's own figures)

    def decide(self, indexes: list[RunIndex], cons: Constraints) -> list[Outcome]: ...


_REGISTRY: dict[str, UseCase] = {}
_discovered = False


def register_use_case(case: UseCase) -> UseCase:
    """Add `case` to the registry; a key registered twice is a bug (ValueError)."""
    if case.key in _REGISTRY:
        raise ValueError(f"use case {case.key!r} registered twice")
    _REGISTRY[case.key] = case
    return case


def unregister_use_case(key: str) -> None:
    """Remove a use case (tests that register their own)."""
    _REGISTRY.pop(key, None)


def use_case_modules() -> tuple[str, ...]:
    """The modules of harness.decide.usecases, by name (the `_`-prefixed ones are helpers)."""
    from harness.decide import usecases

    return tuple(
        f"{usecases.__name__}.{m.name}"
        for m in pkgutil.iter_modules(usecases.__path__)
        if not m.name.startswith("_")
    )


def _load_modules() -> None:
    global _discovered
    if _discovered:
        return
    _discovered = True
    for m in use_case_modules():
        importlib.import_module(m)


def use_cases() -> list[UseCase]:
    """Every registered use case, in page order."""
    _load_modules()
    return sorted(_REGISTRY.values(), key=lambda c: (c.order, c.key))


def get(key: str) -> UseCase:
    """The registered use case `key` (KeyError with the known keys when there is none)."""
    _load_modules()
    if key not in _REGISTRY:
        raise KeyError(f"no use case {key!r}; registered: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[key]
