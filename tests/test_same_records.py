"""benchmarks/same_records.py: the check that a refactor wrote the same records (issue 26) finds what changed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "results/samples/2026-11-25-cpu-2core-default"
sys.path.insert(0, str(ROOT / "benchmarks"))

import same_records  # noqa: E402


def _copy(tmp_path: Path, edit=None) -> Path:
    out = tmp_path / "run"
    out.mkdir()
    lines = []
    for line in (SAMPLE / "cells.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if edit and rec["status"] == "ok" and rec["backend"] == "onnxruntime":
            edit(rec)
        lines.append(json.dumps(rec))
    (out / "cells.jsonl").write_text("\n".join(lines) + "\n")
    return out


def test_a_run_against_its_own_records_is_the_same(tmp_path, capsys):
    assert same_records.main([str(SAMPLE), str(_copy(tmp_path))]) == 0
    assert "180 cells in both runs, 0 with differences" in capsys.readouterr().out


def test_a_renamed_field_a_reordered_section_and_a_changed_verdict_are_found(tmp_path, capsys):
    def edit(rec):
        rec["latency_ms"]["p50_median"] = rec["latency_ms"].pop("p50")  # renamed
        rec["memory"] = dict(reversed(list(rec["memory"].items())))  # same keys, another order
        rec["parity"]["ok"] = not rec["parity"]["ok"]  # a verdict

    assert same_records.main([str(SAMPLE), str(_copy(tmp_path, edit))]) == 1
    out = capsys.readouterr().out
    assert "only in B: ['latency_ms.p50_median']" in out
    assert "parity.ok: True != False" in out


def test_timed_figures_alone_differing_is_the_same(tmp_path):
    def edit(rec):
        rec["latency_ms"]["p50"] *= 1.3
        rec["samples_ms"] = rec["samples_ms"][:3]
        rec["duration_s"] += 5

    assert same_records.main([str(SAMPLE), str(_copy(tmp_path, edit))]) == 0
