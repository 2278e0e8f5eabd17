"""Numbers in words for the decision's figures: rounded for reading (`fmt_num`), byte counts (`fmt_bytes`)."""

from __future__ import annotations

import logging
import math

log = logging.getLogger(__name__)


def fmt_num(value: float, digits: int = 3) -> str:
    """Round to `digits` significant figures without scientific notation for ordinary magnitudes."""
    if value == 0:
        return "0"
    mag = math.floor(math.log10(abs(value)))
    decimals = max(0, digits - 1 - mag)
    if abs(value) >= 10 ** (digits + 3):
        return f"{value:,.0f}"
    return f"{value:.{decimals}f}"


def fmt_bytes(n: float) -> str:
    """A byte count in B, KiB, MiB or GiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{fmt_num(n)} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{fmt_num(n)} GiB"
