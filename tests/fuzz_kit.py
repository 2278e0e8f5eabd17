"""What the fuzz tests share: the seed and example count (printed, replayable), hypothesis' settings, and a command
run in-process with its terminal output captured, judged as a refusal (one error line, exit status 2)."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import random
import sys

import pytest
from hypothesis import HealthCheck, Phase, settings

SEED = int(os.environ.get("FUZZ_SEED") or random.SystemRandom().randrange(2**32))


def examples(default: int) -> int:
    """Examples per test: $FUZZ_EXAMPLES, else the module's default."""
    return int(os.environ.get("FUZZ_EXAMPLES") or default)


def fuzz_settings(default_examples: int, *extra_checks: HealthCheck) -> settings:
    """hypothesis' settings for a fuzz module (and the seed line on stderr): nothing written into the checkout (the
    seed replays an example); FUZZ_NO_SHRINK=1 reports the first failing example as found."""
    n = examples(default_examples)
    print(f"\nfuzz seed {SEED} (FUZZ_SEED={SEED} replays it), {n} examples per test", file=sys.stderr)
    return settings(
        max_examples=n,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, *extra_checks],
        phases=[p for p in Phase if not (os.environ.get("FUZZ_NO_SHRINK") and p is Phase.shrink)],
    )


@contextlib.contextmanager
def captured():
    """stdout and stderr as text, the root logger writing to that stderr (as the commands' own setup does)."""
    out, err = io.StringIO(), io.StringIO()
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    handler = logging.StreamHandler(err)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root.handlers = [handler]
    root.setLevel(logging.INFO)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            yield out, err
    finally:
        root.handlers, root.level = saved[0], saved[1]


def call(main, argv: list[str]) -> tuple[int, str]:
    """(exit status, stderr) of a command's `main(argv)`; SystemExit read as its status."""
    with captured() as (_, err):
        try:
            status = main(argv)
        except SystemExit as e:
            status = e.code if isinstance(e.code, int) else 2
    return status, err.getvalue()


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.strip() and not line.startswith("INFO ")]


def refused(main, argv: list[str], where: str) -> str:
    """Run `main(argv)`; it must refuse in one error line with exit status 2, no exception and no traceback: that
    line is returned. `where` names the example in a failure."""
    try:
        status, err = call(main, argv)
    except Exception as e:  # an exception out of the command: the traceback a user would see
        pytest.fail(f"{where}: {type(e).__name__}: {e}")
    lines = error_lines(err)
    assert status == 2, f"{where}: exit status {status}, stderr {err[-500:]!r}"
    assert len(lines) == 1 and "Traceback" not in err, f"{where}: {len(lines)} error lines: {err[-1500:]!r}"
    return lines[0]
