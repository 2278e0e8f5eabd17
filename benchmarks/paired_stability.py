"""Stability of comparisons: do two runs of the same matrix give the same paired ratios?

    .venv/bin/python benchmarks/paired_stability.py RUN_DIR_A RUN_DIR_B [--limit 0.05]

For every workload and every ok backend with a paired ratio (its p50 over the workload's reference, timed
interleaved: harness/execute/workload.py), prints the ratio in each run and their relative difference; then the
worst pair, the largest change of an absolute p50 between the same runs (what comparing p50s taken apart would be
exposed to), and each run's drift canary (min / median / max). Exits 1 when a paired ratio moved by more than
`--limit` (default 5%) between the runs. Run it on two runs of the same profile taken on one machine, e.g.

    pytest suites/ --benchmark-only --profile quick --run-id quick-a
    pytest suites/ --benchmark-only --profile quick --run-id quick-b
    python benchmarks/paired_stability.py results/quick-a results/quick-b
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.core.record import CellRecord
from harness.core.results_dir import read_env, read_records


def _ok(run_dir: Path) -> dict[str, CellRecord]:
    return {r.cell_id: r for r in read_records(run_dir) if r.status == "ok" and not r.remedy and r.latency_ms}


def _canary(run_dir: Path) -> str:
    c = (read_env(run_dir) or {}).get("canary") or {}
    if c.get("median") is None:
        return f"{run_dir.name}: no canary ({c.get('reason', 'not recorded')})"
    return (
        f"{run_dir.name}: canary min {c['min']:.3f} / median {c['median']:.3f} / max {c['max']:.3f} ms "
        f"(max/min {c['max'] / c['min']:.2f}, {len(c.get('readings') or [])} readings)"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_a", type=Path)
    ap.add_argument("run_b", type=Path)
    ap.add_argument("--limit", type=float, default=0.05, help="largest allowed change of a paired ratio")
    a = ap.parse_args(argv)
    ra, rb = _ok(a.run_a), _ok(a.run_b)
    rows, p50_changes = [], []
    for cid in sorted(set(ra) & set(rb)):
        x, y = ra[cid], rb[cid]
        assert x.latency_ms and y.latency_ms  # _ok keeps records with a latency
        p50_changes.append((y.latency_ms.p50 / x.latency_ms.p50 - 1.0, cid))
        px, py = x.paired or {}, y.paired or {}
        if not px or not py or px.get("reference") == cid:
            continue
        if px.get("reference") != py.get("reference") or px.get("ratio") is None or py.get("ratio") is None:
            print(f"{cid}: different references or no ratio ({px.get('reference')} vs {py.get('reference')})")
            continue
        rows.append((py["ratio"] / px["ratio"] - 1.0, cid, px["ratio"], py["ratio"], px["reference"]))
    if not rows:
        print("no paired ratios in common between the two runs")
        return 1
    print(f"{'cell':<62} {'ratio A':>8} {'ratio B':>8} {'change':>8}  reference")
    for change, cid, ra_, rb_, ref in sorted(rows, key=lambda r: r[1]):
        print(f"{cid:<62} {ra_:>8.3f} {rb_:>8.3f} {change:>+8.2%}  {ref.split('-e2e-')[-1]}")
    worst = max(rows, key=lambda r: abs(r[0]))
    p50 = max(p50_changes, key=lambda r: abs(r[0]))
    print(
        f"\n{len(rows)} paired ratios; worst pair: {worst[1]} {worst[2]:.3f} -> {worst[3]:.3f} ({worst[0]:+.2%})"
    )
    print(f"largest change of an absolute p50 between the runs: {p50[1]} {p50[0]:+.2%}")
    print(_canary(a.run_a))
    print(_canary(a.run_b))
    ok = abs(worst[0]) <= a.limit
    print(f"paired ratios within {a.limit:.0%}: {'yes' if ok else 'NO'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
