"""Moved to harness.decide.paired (the decision stage reads the records first); re-exported here so that report
sections written against the old path keep working."""

from harness.decide.paired import *  # noqa: F403
