"""`python -m harness COMMAND ...`: the same entry point as the `yolo26-bench` console script (harness.cli)."""

from __future__ import annotations

import sys

from harness.cli import main

if __name__ == "__main__":
    sys.exit(main())
