"""Errors the harness raises about itself (as opposed to what a model, an exporter or a runtime raised)."""

from __future__ import annotations


class HarnessError(RuntimeError):
    """A failure the harness caused (its own state broke a cell): classified `harness_error`, which no remedy of
    the ladder (harness.execute.ladder) is ever tried on: a workaround cannot fix the harness."""
