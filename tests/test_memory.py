import json
import subprocess
import sys
import time

import pytest

from harness.measure.host_memory import PeakProbe, Sampler
from tests.conftest import REPO

# samplers run on a clock: run under load by scripts/flaky_check.sh
pytestmark = pytest.mark.timing


# A fresh interpreter per sample: in the test process (an xdist worker holding earlier tests' runtimes and threads)
# memory released by something else in that process during the window once took 51 MB off a 300 MB peak (CI).
SAMPLE = """
import json, sys, time
import numpy as np
from harness.measure.host_memory import MB, Sampler, rss_probe
with Sampler([rss_probe()], hz=200) as s:
    block = np.ones(int(sys.argv[1]) * MB // 8) if int(sys.argv[1]) else None  # touched
    time.sleep(0.1)
    del block
p = s.get("host_rss")
print(json.dumps({"delta_mb": (p.peak - p.baseline) / MB, "samples": s.samples}))
"""


def _sampled(alloc_mb: int) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", SAMPLE, str(alloc_mb)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.process
def test_rss_sampler_sees_a_real_allocation_peak():
    seen = _sampled(300)
    assert seen["delta_mb"] > 250 and seen["samples"] >= 5


@pytest.mark.process
def test_rss_sampler_sees_no_peak_where_nothing_was_allocated():
    seen = _sampled(0)
    assert seen["delta_mb"] < 50 and seen["samples"] >= 5


def test_a_failing_probe_reports_its_error_and_others_go_on():
    def boom():
        raise RuntimeError("no device")

    good = PeakProbe("const", lambda: 42.0)
    bad = PeakProbe("bad", boom)
    with Sampler([good, bad], hz=500):
        time.sleep(0.02)
    assert good.peak == 42.0
    assert bad.peak is None and "no device" in bad.error
