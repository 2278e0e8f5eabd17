"""Run ids: each names a directory under --results-dir (results/<run_id>/), so it must be a plain file name.

Letters, digits, `.`, `_` and `-` only, no leading dot (no hidden directory, no `.` or `..`), no `..` anywhere
and at most MAX_LENGTH characters: `../escaped`, `/abs`, `a/b` or `..` can never place cells.jsonl, env.json or
logs outside --results-dir.
"""

from __future__ import annotations

import re
import socket
from datetime import UTC, datetime

MAX_LENGTH = 128
_SAFE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")


class RunIdError(ValueError):
    """A run id that is not a safe directory name; the message is one line for the user."""


def check(run_id: str, option: str = "--run-id") -> str:
    """`run_id` unchanged when it is a safe directory name; else RunIdError naming `option` and the rule."""
    if not _SAFE.fullmatch(run_id) or ".." in run_id or len(run_id) > MAX_LENGTH:
        raise RunIdError(
            f"{option} {run_id!r}: use letters, digits, '.', '_' and '-' only (at most {MAX_LENGTH}, "
            "no leading '.', no '..'): it names a directory inside --results-dir"
        )
    return run_id


def default() -> str:
    """UTC timestamp and short host name, with any character outside the safe set replaced by '-'."""
    host = re.sub(r"[^A-Za-z0-9_-]", "-", socket.gethostname().split(".")[0]) or "host"
    return check(datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + host[:64])
