"""Text from a run's files on its way to a reader: the one rule for what is never shown raw.

A record's `cell_id`, `reason`, `log` or a failure message, an env.json hostname or a run id are text from a file
that anyone (a hand edit, another machine's run, a downloaded artifact) may have written. Shown raw, a NUL, an ANSI
escape (`\\x1b[2J`), a carriage return or a bidirectional override (U+202E) can hide text, forge a second line in a
terminal or a log, or make a page show other text than it holds (CVE-2021-42574, "Trojan Source").

- `page_text`: for index.html and summary.md. Every character in UNSAFE_ON_PAGE is written as Python writes it
  (`\\x00`, `\\x1b`, `\\u202e`); a tab and a newline stay (whitespace in HTML; summary.md folds whitespace itself).
  decision.json and summary.json are JSON written with `ensure_ascii`, so they escape these already.
- `terminal_text`: for one line on a terminal: `harness.core.cli_args.printable` (every character that is not
  printable escaped, a newline included), the rule the command lines already follow.
"""

from __future__ import annotations

import re

from harness.core.cli_args import printable

#: never raw on a page: C0 controls but TAB and LF, DEL, C1 controls; the bidirectional marks, embeddings,
#: overrides and isolates (U+061C, U+200E-U+200F, U+202A-U+202E, U+2066-U+2069); zero-width and invisible
#: formatting characters (U+200B-U+200D, U+2060-U+2065, U+FEFF); the line and paragraph separators
#: (U+2028-U+2029); lone surrogates (a path Python decoded with `surrogateescape`, a JSON `\\ud800`)
UNSAFE_ON_PAGE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff]"
)


def _escaped(match: re.Match[str]) -> str:
    return repr(match.group())[1:-1]  # '\x00' -> \x00, '\u202e' -> \u202e: every one of them is non-printable


def page_text(text: str) -> str:
    """`text` with every UNSAFE_ON_PAGE character escaped as Python writes it (`\\x1b`, `\\u202e`)."""
    return UNSAFE_ON_PAGE.sub(_escaped, text)


def terminal_text(text: object) -> str:
    """`text` as one line for a terminal: every non-printable character escaped (cli_args.printable)."""
    return printable(str(text))


def unsafe_on_page(text: str) -> list[str]:
    """The UNSAFE_ON_PAGE characters `text` holds, in order (for the tests and the checks)."""
    return UNSAFE_ON_PAGE.findall(text)


__all__ = ["UNSAFE_ON_PAGE", "page_text", "terminal_text", "unsafe_on_page"]
