"""Moved to harness.decide.load (the decision stage reads the records first); re-exported here so that report
sections written against the old path keep working."""

from harness.decide.load import *  # noqa: F403
