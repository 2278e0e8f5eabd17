"""Named phases of a long export, printed as they start and end, so that a timeout can say how far it got.

An export runs in an isolated worker whose output goes to the cell's log; `phase` prints `[phase] NAME started` and
`[phase] NAME done in S s` there (and keeps the seconds), and `last_phase` reads the last such line back from the
log when the parent had to kill the worker (harness.execute.isolate).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager

_LINE = re.compile(r"^\[phase\] (?P<name>.+?) (?P<what>started|done in (?P<s>[\d.]+) s)$", re.MULTILINE)


@contextmanager
def phase(name: str, seconds: dict[str, float]) -> Iterator[None]:
    """Print the phase's start and end; put its wall seconds into `seconds[name]` when it ends."""
    print(f"[phase] {name} started", flush=True)
    t0 = time.perf_counter()
    yield
    seconds[name] = round(time.perf_counter() - t0, 3)
    print(f"[phase] {name} done in {seconds[name]:.1f} s", flush=True)


def last_phase(log_text: str) -> str | None:
    """How far an export got, from its log: 'last phase: to_executorch started, not finished (finished before
    it: torch.export done in 3.9 s; ...)'; None when it printed no phase."""
    lines = list(_LINE.finditer(log_text))
    if not lines:
        return None
    done = [f"{m['name']} done in {float(m['s']):.1f} s" for m in lines if m["s"]]
    last = lines[-1]
    if last["s"] is None:
        state, prior = f"{last['name']} started, not finished", done
    else:
        state, prior = f"{last['name']} done in {float(last['s']):.1f} s", done[:-1]
    return f"last phase: {state}" + (f" (finished before it: {'; '.join(prior)})" if prior else "")
