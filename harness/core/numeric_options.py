"""Every numeric option of the suite and of the `yolo26-bench` commands: declared once here, parsed by one function.

A declaration says the option's type (whole number or not), its range and its unit; every value is finite (never
`inf` or `nan`) and inside the range, or the command ends with one line naming the option, before any file is
written. The suite (harness.pytest_plugin.options) and `report` take the same declarations for the options they
share, so they agree on `--min-shape` and every other bound.
"""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass

from harness.core.axes import MAX_SIDE, MIN_SIDE

#: the random-init seed seeds torch's generator; kept to numpy's range so any seeding library accepts it
MAX_SEED = 2**32 - 1
#: longest value text shown in an error line (a 1 MB argument is cut, never echoed whole)
SHOWN = 40
_INTEGER = re.compile(r"[+-]?\d{1,30}")
#: memory bounds: 16 TiB in MiB, 64 TiB in GB; no machine this runs on has more
MAX_MIB = 16 * 1024 * 1024
MAX_GB = 65536.0


class OptionValueError(ValueError):
    """A numeric option's value that is not a number, not finite or out of its range: one line naming it."""


@dataclass(frozen=True)
class Number:
    """One numeric option: `flag`, whole number or not, `low` (excluded when `strict`) to `high`, its unit."""

    flag: str
    integer: bool
    low: float
    high: float
    strict: bool = False
    unit: str = ""

    @property
    def name(self) -> str:
        """The option's destination name (`--camera-fps` -> camera_fps), as argparse and pytest store it."""
        return self.flag.lstrip("-").replace("-", "_")

    def want(self) -> str:
        """The valid range in words: `> 0 and <= 10000 fps`."""
        unit = f" {self.unit}" if self.unit else ""
        return f"{'>' if self.strict else '>='} {_number(self.low)} and <= {_number(self.high)}{unit}"

    def value_error(self, raw: object) -> str | None:
        """Why `raw` is not a valid value, without the option's name (None: it is valid)."""
        try:
            self.parse(raw)
        except OptionValueError as e:
            return str(e).removeprefix(f"{self.flag}: ")
        return None

    def parse(self, raw: object) -> int | float | None:
        """The value of `raw` (text from a command line, or a number; None stays None), or OptionValueError."""
        if raw is None:
            return None
        value = self._number(raw)
        above = value > self.low if self.strict else value >= self.low
        if not math.isfinite(value) or not above or value > self.high:
            raise OptionValueError(f"{self.flag}: {value} is out of range (must be {self.want()})")
        return value

    def _number(self, raw: object) -> int | float:
        if isinstance(raw, bool):
            raise OptionValueError(f"{self.flag}: {raw!r} is not a number (must be {self.want()})")
        if isinstance(raw, int) and self.integer:
            return raw
        if isinstance(raw, int | float) and not self.integer:
            return float(raw)
        text = str(raw).strip()
        shown = repr(text if len(text) <= SHOWN else text[:SHOWN] + "...")
        if self.integer:
            if not _INTEGER.fullmatch(text):
                raise OptionValueError(
                    f"{self.flag}: {shown} is not a whole number (must be one {self.want()})"
                )
            return int(text)
        try:
            if len(text) > 400:  # float() of a megabyte of digits is slow and says nothing more
                raise ValueError(text)
            return float(text)
        except ValueError:
            raise OptionValueError(f"{self.flag}: {shown} is not a number (must be {self.want()})") from None

    def argparse_type(self):
        """The `type=` of an argparse option: the value, or argparse's one error line naming the option."""

        def parse(text: str) -> int | float | None:
            why = self.value_error(text)
            if why is not None:
                raise argparse.ArgumentTypeError(why)
            return self.parse(text)

        parse.__name__ = self.name  # argparse names the type in some messages
        return parse


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


_ALL = (
    # the suite (pytest suites/ ...): timing and export
    Number("--export-timeout", False, 0, 7 * 24 * 3600.0, strict=True, unit="s"),
    Number("--probe-timeout", False, 0, 7 * 24 * 3600.0, strict=True, unit="s"),
    Number("--export-memory-gb", False, 0, MAX_GB, strict=True, unit="GB"),
    Number("--max-time", False, 0, 24 * 3600.0, strict=True, unit="s"),
    Number("--export-workers", True, 1, 256),
    Number("--warmup", True, 0, 100_000, unit="rounds"),
    Number("--rounds", True, 1, 10_000_000, unit="rounds"),
    Number("--timing-episodes", True, 1, 20),
    Number("--accuracy-images", True, 1, 100_000, unit="images"),
    Number("--seed", True, 0, MAX_SEED),
    Number("--scenario-budget", False, 0, 7 * 24 * 3600.0, unit="s"),
    # the suite and `report` (the decision's constraints; the suite forwards them to the report it renders)
    Number("--server-bound-ms", False, 0, 3_600_000.0, strict=True, unit="ms"),
    Number("--camera-fps", False, 0, 10_000.0, strict=True, unit="fps"),
    Number("--memory-cap", False, 0, float(MAX_MIB), strict=True, unit="MiB"),
    Number("--min-shape", True, MIN_SIDE, MAX_SIDE, unit="px"),
    Number("--headroom", False, 0, 1.0, strict=True),
    # `compare` (the regression rules)
    Number("--threshold", False, 0, 1000.0, strict=True, unit="%"),
    Number("--spread-k", False, 0, 1000.0),
    Number("--spread-window", True, 1, 10_000, unit="runs"),
    Number("--alpha", False, 0, 1.0, strict=True),
    Number("--min-runs", True, 1, 10_000, unit="runs"),
    Number("--mem-pct", False, 0, 1000.0, unit="%"),
    Number("--mem-mib", False, 0, float(MAX_MIB), unit="MiB"),
)
#: flag -> declaration, every numeric option of every command
NUMBERS: dict[str, Number] = {n.flag: n for n in _ALL}
#: the suite's numeric options (pytest suites/ ...)
SUITE = _ALL[:16]
#: the options `report` shares with the suite
REPORT = _ALL[11:16]
#: `compare`'s
COMPARE = _ALL[16:]


def number(flag: str) -> Number:
    """The declaration of `flag`."""
    return NUMBERS[flag]
