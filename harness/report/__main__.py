"""`python -m harness.report ...`: the same as `python -m harness report ...`."""

from harness.report.cli import main

raise SystemExit(main())
