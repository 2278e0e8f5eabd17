"""Classify a failed cell from what it left behind: the exception's message and type, the traceback, a signal.

The rules are data (patterns.yaml beside this module); this module applies them and extracts the particulars a
reader needs to act: the offending operators, the shape guards torch could not prove, and torch's own suggested
fix. `classify` returns the record's `failure` dict.
"""

from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

log = logging.getLogger(__name__)

PATTERNS_FILE = Path(__file__).with_name("patterns.yaml")
SCHEMA_VERSION = 1
MAX_MESSAGE = 500

_RULE_KEYS = {"class", "status", "signals", "stages", "exception_types", "patterns", "remedy"}
# "module.Type: message" at the start of a line: the line Python prints for an exception.
_EXC_LINE = re.compile(
    r"^(?P<type>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Expired|Fault))(?::\s?(?P<msg>.*))?$"
)
_NOISE = (
    re.compile(r"^Traceback \(most recent call last\):"),
    re.compile(r"^(During handling of the above exception|The above exception was the direct cause)"),
    re.compile(r"\b\w*Warning\b:"),  # "file.py:12: UserWarning: ..." lines printed beside the error
    re.compile(r"^\s*warnings\.warn\("),
    re.compile(r"^\[?[WI]\d{4} \d\d:\d\d:\d\d"),  # glog / c10 warning and info lines
)


@dataclass(frozen=True)
class Rule:
    """One classification rule; see patterns.yaml for the matching semantics."""

    cls: str
    status: tuple[str, ...] = ()
    signals: tuple[str, ...] | str = ()
    stages: tuple[str, ...] = ()
    exception_types: tuple[str, ...] = ()
    patterns: tuple[re.Pattern, ...] = ()
    remedy: str | None = None

    @property
    def has_evidence(self) -> bool:
        return bool(self.exception_types or self.patterns)

    def conditions_hold(self, status: str | None, signal: str | None, stage: str) -> bool:
        if self.status and status not in self.status:
            return False
        if self.signals == "any":
            if not signal:
                return False
        elif self.signals and signal not in self.signals:
            return False
        return not (self.stages and stage not in self.stages)

    def evidence_in(self, text: str, exception_type: str | None) -> bool:
        if exception_type and any(_type_matches(exception_type, t) for t in self.exception_types):
            return True
        return any(p.search(text) for p in self.patterns)


@dataclass(frozen=True)
class Patterns:
    """The parsed patterns.yaml."""

    classes: tuple[str, ...]
    rules: tuple[Rule, ...]
    fallback: dict
    op_patterns: tuple[re.Pattern, ...]
    op_list_headers: tuple[re.Pattern, ...]
    guard_patterns: tuple[re.Pattern, ...]
    guard_symbol_patterns: tuple[re.Pattern, ...]
    suggested_fix_header: str


def _compile(rx: str) -> re.Pattern:
    return re.compile(rx, re.IGNORECASE | re.MULTILINE)


def parse_patterns(data: dict) -> Patterns:
    """Validate and compile a patterns document; raises ValueError on anything it does not understand."""
    if data.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"patterns schema_version {data.get('schema_version')!r} is not {SCHEMA_VERSION}")
    classes = tuple(data["classes"])
    rules = []
    for n, r in enumerate(data["rules"]):
        unknown = set(r) - _RULE_KEYS
        if unknown:
            raise ValueError(f"rule {n}: unknown keys {sorted(unknown)}")
        if r["class"] not in classes:
            raise ValueError(f"rule {n}: class {r['class']!r} is not one of {classes}")
        signals = r.get("signals", ())
        try:
            rules.append(
                Rule(
                    cls=r["class"],
                    status=tuple(r.get("status", ())),
                    signals=signals if signals == "any" else tuple(signals),
                    stages=tuple(r.get("stages", ())),
                    exception_types=tuple(r.get("exception_types", ())),
                    patterns=tuple(_compile(p) for p in r.get("patterns", ())),
                    remedy=r.get("remedy"),
                )
            )
        except re.error as e:
            raise ValueError(f"rule {n} ({r['class']}): bad pattern: {e}") from None
    fallback = data["fallback"]
    fb_classes = {
        *fallback.get("status", {}).values(),
        *fallback.get("stage", {}).values(),
        fallback["default"],
    }
    bad = fb_classes - set(classes)
    if bad:
        raise ValueError(f"fallback classes {sorted(bad)} are not in {classes}")
    return Patterns(
        classes=classes,
        rules=tuple(rules),
        fallback=fallback,
        op_patterns=tuple(_compile(p) for p in data.get("op_patterns", ())),
        op_list_headers=tuple(_compile(p) for p in data.get("op_list_headers", ())),
        guard_patterns=tuple(_compile(p) for p in data.get("guard_patterns", ())),
        guard_symbol_patterns=tuple(_compile(p) for p in data.get("guard_symbol_patterns", ())),
        suggested_fix_header=data["suggested_fix_header"],
    )


@functools.cache
def load_patterns(path: Path = PATTERNS_FILE) -> Patterns:
    """The classification data, parsed once per process."""
    with open(path, encoding="utf-8") as f:
        return parse_patterns(yaml.safe_load(f))


def failure_classes() -> tuple[str, ...]:
    """Every class `classify` can return."""
    return load_patterns().classes


def evidence_line(text: str, cls: str, limit: int = 200) -> str | None:
    """The first line of `text` (a worker's log) that a rule of class `cls` takes as evidence (one of its patterns,
    or an exception line of one of its exception types: `MemoryError`), stripped and cut to `limit` characters;
    None when there is none. Read where no exception reached the harness: a worker that died of a signal or exited
    without a result, whose log is all there is."""
    rules = [r for r in load_patterns().rules if r.cls == cls and r.has_evidence]
    for line in text.splitlines():
        if _is_noise(line):
            continue
        etype, _ = _split_exception_prefix(line)
        if any(
            (etype and any(_type_matches(etype, t) for t in r.exception_types))
            or any(p.search(line) for p in r.patterns)
            for r in rules
        ):
            return line.strip()[:limit]
    return None


def classify(
    message: str | None,
    traceback: str | None = None,
    exception_type: str | None = None,
    stage: str = "export",
    signal: str | None = None,
    status: str | None = None,
) -> dict:
    """The record's `failure` dict for a failure described by its message, traceback, type, signal and status.

    `message` is the exception's str() (or any error text), `traceback` the formatted traceback or log excerpt,
    `exception_type` the qualified type name, `stage` where it failed (export, load, run, parity), `signal` the
    signal name that killed the process, `status` the record's status. Returns {class, stage, message (the
    exception's own first line), ops, guards, suggested_fix, exception_type, signal, log (None: the caller knows
    where the log is)}.
    """
    pats = load_patterns()
    message = message or None
    traceback = traceback or None
    parsed_type, parsed_msg = _exception_line(traceback) if traceback else (None, None)
    first = _first_meaningful_line(message) if message else None
    if first is not None:
        prefix_type, rest = _split_exception_prefix(first)
        if prefix_type and (exception_type is None or _type_matches(exception_type, prefix_type)):
            exception_type = exception_type or prefix_type
            first = rest or prefix_type
    exception_type = exception_type or parsed_type
    line = first or parsed_msg

    primary = "\n".join(t for t in (message, exception_type) if t)
    if not primary and parsed_msg:
        primary = "\n".join(t for t in (parsed_msg, parsed_type) if t)
    rule = _match(pats, primary, exception_type, stage, signal, status, use_conditions=True)
    if rule is None and traceback:
        rule = _match(pats, traceback, exception_type, stage, signal, status, use_conditions=False)
    if rule is not None:
        cls = rule.cls
    elif not (message or traceback or exception_type or signal or status):
        cls = "unknown"
    else:
        fb = pats.fallback
        cls = fb.get("status", {}).get(status) or fb.get("stage", {}).get(stage) or fb["default"]

    texts = [t for t in (message, traceback) if t]
    ops = _first_nonempty(lambda t: _ops(pats, t), texts)
    guards = _first_nonempty(lambda t: _guards(pats, t), texts)
    fix = _first_nonempty(lambda t: _suggested_fix(pats, t), texts) or None
    if fix is None and rule is not None:
        fix = rule.remedy
    if line is None and signal:
        line = f"killed by {signal}"
    if line is None and exception_type:  # an exception without a message (MemoryError()): its type says it
        line = exception_type.rsplit(".", 1)[-1]
    return {
        "class": cls,
        "stage": stage,
        "message": line[:MAX_MESSAGE] if line else None,
        "ops": ops,
        "guards": guards,
        "suggested_fix": fix,
        "exception_type": exception_type,
        "signal": signal,
        "log": None,
    }


def _match(pats, text, exception_type, stage, signal, status, use_conditions: bool) -> Rule | None:
    for rule in pats.rules:
        if not rule.conditions_hold(status, signal, stage):
            continue
        if rule.has_evidence:
            if rule.evidence_in(text, exception_type):
                return rule
        elif use_conditions:  # a rule of conditions alone is decided by the first pass
            return rule
    return None


def _type_matches(actual: str, wanted: str) -> bool:
    return actual == wanted or actual.rsplit(".", 1)[-1] == wanted.rsplit(".", 1)[-1]


def _is_noise(line: str) -> bool:
    return not line.strip() or any(p.search(line) for p in _NOISE)


def _first_meaningful_line(text: str) -> str | None:
    for line in text.splitlines():
        if not _is_noise(line):
            return line.strip()
    return None


def _split_exception_prefix(line: str) -> tuple[str | None, str | None]:
    m = _EXC_LINE.match(line.strip())
    if not m or m.group("type").endswith("Warning"):
        return None, line
    return m.group("type"), (m.group("msg") or "").strip() or None


def _exception_line(tb: str) -> tuple[str | None, str | None]:
    """(type, first message line) of the exception that ended a formatted traceback (the last one chained)."""
    lines = tb.splitlines()
    last_frame = max((i for i, ln in enumerate(lines) if ln.startswith("  File ")), default=None)
    candidates = lines[last_frame + 1 :] if last_frame is not None else lines
    for ln in candidates:
        if ln.startswith((" ", "\t")) or _is_noise(ln):
            continue  # the frame's source line and its ^^^^ markers
        t, msg = _split_exception_prefix(ln)
        if t:
            return t, msg
        if last_frame is not None:
            return None, ln.strip()
    if last_frame is None:  # not a Python traceback: the last exception-looking line of the text
        for ln in reversed(lines):
            t, msg = _split_exception_prefix(ln)
            if t:
                return t, msg
        return None, _first_meaningful_line(tb)
    return None, None


def _first_nonempty(fn, texts):
    """fn's result on the first text where it finds something (the message before the traceback)."""
    for t in texts:
        v = fn(t)
        if v:
            return v
    return []


def _dedupe(items) -> list:
    return list(dict.fromkeys(i for i in items if i))


def _ops(pats: Patterns, text: str) -> list[str]:
    found = []
    for p in pats.op_patterns:
        found.extend((m.start(), m.group("op").strip("'`\"")) for m in p.finditer(text))
    lines = text.splitlines()
    for i, ln in enumerate(lines):
        header = next((m for h in pats.op_list_headers if (m := h.search(ln))), None)
        if header is None:
            continue
        inline = ln[header.end() :].rpartition(":")[2]  # "... operations: Foo, Bar"
        found.extend(
            (header.start(), op.strip()) for op in inline.split(",") if re.fullmatch(r"\s*[\w.:]+\s*", op)
        )
        for nxt in lines[i + 1 :]:  # "... kernels (2 total):" then "  - name" lines
            m = re.match(r"^\s*-\s+(\S+)\s*$", nxt)
            if not m:
                break
            found.append((header.start(), m.group(1)))
    found.sort(key=lambda x: x[0])
    return _dedupe(op for _, op in found)


def _guards(pats: Patterns, text: str) -> list[str]:
    symbols = {}
    for p in pats.guard_symbol_patterns:
        for m in p.finditer(text):
            symbols[m.group("source")] = m.group("name")
    guards = []
    for p in pats.guard_patterns:
        for m in p.finditer(text):
            guards.append((m.start(), normalize_guard(m.group("guard"), symbols)))
    guards.sort(key=lambda x: x[0])
    return _dedupe(g for _, g in guards)


def normalize_guard(guard: str, symbols: dict[str, str] | None = None) -> str:
    """Readable guard text: input-size sources replaced by their symbol, `((-1) + h)` written `(h - 1)`."""
    g = guard.strip()
    for source, name in (symbols or {}).items():
        g = g.replace(source, name)
    return re.sub(r"\(\(-(\d+)\) \+ (\w+)\)", r"(\2 - \1)", g)


def _suggested_fix(pats: Patterns, text: str) -> str | None:
    lines = text.splitlines()
    header = pats.suggested_fix_header
    for i, ln in enumerate(lines):
        pos = ln.find(header)
        if pos < 0:
            continue
        rest = ln[pos + len(header) :].strip()
        if rest:
            return rest
        fixes = []
        for nxt in lines[i + 1 :]:
            if not nxt.strip() or not nxt.startswith((" ", "\t")):
                break
            fixes.append(nxt.strip())
        if fixes:
            return "; ".join(fixes)
    return None
