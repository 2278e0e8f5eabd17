import time

import numpy as np
import pytest

from harness.measure.host_memory import MB, PeakProbe, Sampler, rss_probe

# samplers run on a clock: run under load by scripts/flaky_check.sh
pytestmark = pytest.mark.timing


def test_rss_sampler_sees_a_real_allocation_peak():
    with Sampler([rss_probe()], hz=200) as s:
        block = np.ones(300 * MB // 8)  # 300 MB, touched
        time.sleep(0.1)
        del block
    p = s.get("host_rss")
    assert (p.peak - p.baseline) / MB > 250
    assert s.samples >= 5


def test_a_failing_probe_reports_its_error_and_others_go_on():
    def boom():
        raise RuntimeError("no device")

    good = PeakProbe("const", lambda: 42.0)
    bad = PeakProbe("bad", boom)
    with Sampler([good, bad], hz=500):
        time.sleep(0.02)
    assert good.peak == 42.0
    assert bad.peak is None and "no device" in bad.error
