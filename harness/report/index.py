"""Moved to harness.decide.index (the decision stage reads the records first); re-exported here so that report
sections written against the old path keep working."""

from harness.decide.index import *  # noqa: F403
