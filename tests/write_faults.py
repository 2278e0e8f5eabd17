"""A pytest plugin for the write-error tests: record appends fail with ENOSPC, as on a full disk.

Loaded into a suite run with `-p tests.write_faults`; YOLO26_TEST_ENOSPC_AFTER=N lets the first N record appends
through, then every append writes half its bytes and fails with ENOSPC (what a filling disk does). Only the
harness's record writer is affected (harness.core.results_dir._write_all), never pytest's own output.
"""

from __future__ import annotations

import errno
import os

from harness.core import results_dir

ENV = "YOLO26_TEST_ENOSPC_AFTER"


def _install(after: int) -> None:
    real = results_dir._write_all
    written = [0]

    def write_all(fd: int, data: bytes) -> None:
        if written[0] >= after:
            os.write(fd, data[: len(data) // 2])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written[0] += 1
        real(fd, data)

    results_dir._write_all = write_all


if os.environ.get(ENV):
    _install(int(os.environ[ENV]))
