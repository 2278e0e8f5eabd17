"""The benchmark matrix: one test per cell (size x task x head x backend x device x shape x batch x precision).

Run with `pytest suites/ --benchmark-only`; select with --profile, --sizes, --backends, --shapes, ... (README).
"""

from harness.pytest_plugin import run_cell_test


def test_cell(cell, bench_session, benchmark):
    rec = run_cell_test(cell, bench_session, benchmark)
    assert rec["status"] == "ok", rec["reason"]
    assert rec["latency_ms"] is None or rec["latency_ms"]["p50"] > 0
