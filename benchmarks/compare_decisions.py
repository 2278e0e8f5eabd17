"""Two runs' answers side by side: for each use case of two decision.json files (the report's `decision.json`), the
pick and its ties in each, and whether they agree.

    python benchmarks/compare_decisions.py BEFORE/decision.json AFTER/decision.json

Per use case one line: "same pick", "same tie" (the same set of configurations, pick and ties), "differ, intervals
overlap" (the two picks differ, but the figure's interval of the one run's pick overlaps that of the other run's
pick: the runs cannot tell them apart) or "DIFFER" (disjoint intervals, or a pick in only one run). Exit 1 when any
use case reads DIFFER. A configuration is backend, size, shape, precision, batch and device (the cell, not the
run's figures).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def config_key(entry: dict | None) -> tuple | None:
    c = (entry or {}).get("configuration") or {}
    if not c:
        return None
    return (
        c.get("backend"),
        c.get("size"),
        c.get("shape"),
        c.get("precision"),
        c.get("batch"),
        c.get("device"),
    )


def label(key: tuple | None) -> str:
    if key is None:
        return "no pick"
    backend, size, shape, precision, batch, device = key
    return f"{backend} yolo26{size} {shape} {precision} b{batch} {device}"


def picks(decisions: dict) -> dict[tuple[str, str], dict]:
    """(use case, machine) -> the decision."""
    return {(d.get("use_case"), d.get("machine") or ""): d for d in decisions.get("decisions") or []}


def overlap(a: list | None, b: list | None) -> bool | None:
    if not a or not b or None in (a[0], a[1], b[0], b[1]):
        return None
    return a[0] <= b[1] and b[0] <= a[1]


def verdict(before: dict | None, after: dict | None) -> tuple[str, str]:
    pa, pb = (before or {}).get("pick"), (after or {}).get("pick")
    ka, kb = config_key(pa), config_key(pb)
    ties_a = {ka, *(config_key(t) for t in (before or {}).get("tied_with") or [])} - {None}
    ties_b = {kb, *(config_key(t) for t in (after or {}).get("tied_with") or [])} - {None}
    shown = (
        f"{label(ka)} ({(pa or {}).get('figure')}, {(pa or {}).get('interval')})"
        f" | {label(kb)} ({(pb or {}).get('figure')}, {(pb or {}).get('interval')})"
    )
    if ka is None and kb is None:
        return "same pick (none)", shown
    if ka == kb and ties_a == ties_b:
        return ("same tie" if len(ties_a) > 1 else "same pick"), shown
    if ka == kb:
        return "same pick, other ties", shown
    if kb in ties_a or ka in ties_b:
        return "differ within a tie", shown
    ov = overlap((pa or {}).get("interval"), (pb or {}).get("interval"))
    if ov:
        return "differ, intervals overlap", shown
    return "DIFFER", shown


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    before, after = (picks(json.loads(Path(p).read_text(encoding="utf-8"))) for p in argv)
    bad = 0
    for key in sorted(set(before) | set(after), key=lambda k: (k[0] or "", k[1])):
        word, shown = verdict(before.get(key), after.get(key))
        bad += word == "DIFFER"
        # machines' names differ between runs on one machine only by the host name: print the use case alone
        print(f"{key[0]}: {word}: {shown}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
