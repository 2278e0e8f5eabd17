"""Relations between a record's figures that must hold (harness.check.relations) and the `check` command."""
