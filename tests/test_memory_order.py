"""Host memory does not depend on which cells ran before: two orders of the same cells give the same peaks.

Each order runs as a fresh process, as a real run would (the exports are in the session's export cache before either
starts), so the only difference between the two is the order of the cells.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.core.axes import Shape
from tests.conftest import REPO, shared_export

BACKENDS = ["onnxruntime", "openvino", "torch-eager"]

SCRIPT = """
import json, sys
from pathlib import Path
from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.execute.runner import CellRunner, RunConfig
from harness.execute.memory_cache import MemoryCache

out, cache, order = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3].split(",")
# memory is measured in a fresh probe process (load, first run, memory_rounds runs): accuracy, end-to-end pairs and
# scenarios come after it and change none of its figures
cfg = RunConfig(run_id="r", results_dir=out, cache_dir=cache, max_time_s=0.1, block_s=0.02, warmup=1, remedies=False,
                accuracy=False, e2e=False, scenarios="none")
runner = CellRunner(cfg, progress=lambda m: None)
runner.memory_cache = MemoryCache(out)  # measure afresh: no figures reused from another order's run
cells = [Cell("n", "detect", "e2e", b, "cpu", Shape(160, 160)) for b in order]
runner.preload(cells)
recs = [runner.run_cell(c) for c in cells]
print(json.dumps({r.backend: [r.status, r.memory.to_dict() if r.memory else None] for r in recs}))
"""


def _run(tmp_path, cache_dir, name: str, order: list[str]) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / name), str(cache_dir), ",".join(order)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert all(status == "ok" for status, _ in out.values()), out
    assert all(mem["origin"] == "measured in this attempt" for _, mem in out.values()), out
    return {b: mem for b, (_, mem) in out.items()}


@pytest.mark.slow
@pytest.mark.export
def test_two_orders_give_the_same_peaks(tmp_path, cache_dir):
    for (
        b
    ) in BACKENDS:  # every artifact in the session's export cache first (made once per session, not measured)
        shared_export(cache_dir, b, Shape(160, 160))
    forward = _run(tmp_path, cache_dir, "forward", BACKENDS)
    backward = _run(tmp_path, cache_dir, "backward", BACKENDS[::-1])
    for b in BACKENDS:
        assert same_peaks(forward[b], backward[b]), (b, forward[b], backward[b])


def same_peaks(f: dict, r: dict) -> bool:
    """Whether two orders' memory figures of one backend agree: peak RSS within 5%, neither delta negative."""
    return (
        f["host_peak_rss_mib"] == pytest.approx(r["host_peak_rss_mib"], rel=0.05)
        and min(f["host_peak_delta_mib"], r["host_peak_delta_mib"]) >= 0
    )


def test_the_verdict_both_ways():
    """The fast tier's case: the comparison itself, on figures written here (not measured)."""
    a = {"host_peak_rss_mib": 600.0, "host_peak_delta_mib": 120.0}
    assert same_peaks(a, {"host_peak_rss_mib": 620.0, "host_peak_delta_mib": 80.0})
    assert not same_peaks(a, {"host_peak_rss_mib": 700.0, "host_peak_delta_mib": 120.0})  # 17% apart
    assert not same_peaks(a, {"host_peak_rss_mib": 600.0, "host_peak_delta_mib": -1.0})
