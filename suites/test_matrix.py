"""The benchmark matrix: one test per cell (size x task x head x backend x device x shape x batch x precision).

Run with `pytest suites/ --benchmark-only`; select with --profile, --sizes, --backends, --shapes, ... (README).
"""

from harness.pytest_plugin.plugin import run_cell_test


def test_cell(cell, bench_session, benchmark):
    rec = run_cell_test(cell, bench_session, benchmark)
    if bench_session.config.getoption("update_expected"):
        return
    assert rec.status in ("ok", "exported"), rec.reason
    if rec.status == "ok" and not rec.dynamic:
        assert rec.latency_ms is not None and rec.latency_ms.p50 > 0
        assert rec.parity is not None and rec.parity["ok"]
