"""Regression detection on synthetic histories with realistic noise (no models, no GPU)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from harness.core.results_dir import HistoryError
from harness.history import query
from harness.history.cli import main_compare
from harness.history.compare import BaselineSpec, Thresholds, compare_run
from harness.history.store import connect, import_run_dir
from harness.history.synthetic import Noise, cell, make_env, make_record, noisy_samples, write_run

# name -> (cell, p50 ms, device memory MiB)
CELLS = {
    "ort-n": (cell("onnxruntime", "n"), 2.1, 900.0),
    "ort-s": (cell("onnxruntime", "s"), 3.4, 1100.0),
    "trt-n": (cell("tensorrt", "n"), 1.2, 700.0),
    "trt-s": (cell("tensorrt", "s"), 1.9, 800.0),
    "trt-m": (cell("tensorrt", "m"), 3.8, 1200.0),
    "torch-n": (cell("torch", "n"), 6.5, 1500.0),
    "torch-s": (cell("torch", "s"), 7.9, 1700.0),
    "ov-n-cpu": (cell("openvino", "n", device="cpu"), 17.0, None),
}
NOISE = Noise(run_sigma=0.01, round_sigma=0.03, outlier_rate=0.02)
ROUNDS = 60


def cid(name: str) -> str:
    return CELLS[name][0].id


def build_run(
    root: Path,
    i: int,
    rng: random.Random,
    *,
    factor=None,
    status=None,
    mem=None,
    drop=(),
    add=(),
    env=None,
    speed=1.0,
    canary=None,
):
    """Run number i of a nightly series; factor/status/mem override cells by name. `speed` slows the whole machine
    (every cell's time x speed); `canary` (ms at speed 1) adds drift-canary readings that move with it."""
    factor, status, mem = factor or {}, status or {}, mem or {}
    run_id = f"nightly-{i:03d}"
    env = env or make_env(run_id, f"2026-11-{i:02d}T02:00:00+00:00")
    env = dict(env, run_id=run_id, started_at=f"2026-11-{i:02d}T02:00:00+00:00")
    records = []
    for name in [n for n in CELLS if n not in drop] + list(add):
        c, p50, dev_mem = CELLS[name]
        drift = rng.lognormvariate(0.0, NOISE.run_sigma)
        st = status.get(name, "ok")
        samples = (
            noisy_samples(rng, p50 * drift * speed * factor.get(name, 1.0), ROUNDS, NOISE)
            if st == "ok"
            else None
        )
        m = mem.get(name, dev_mem)
        rec = make_record(run_id, c, status=st, samples_ms=samples, device_mem_mib=m)
        if canary is not None:
            reading = canary * speed * rng.lognormvariate(0.0, 0.01)
            rec.canary_ms = {"before": reading, "after": reading, "mean": reading}
        records.append(rec)
    if canary is not None:
        env = dict(env, canary={"min": canary * speed, "median": canary * speed, "max": canary * speed})
    return write_run(root, env, records)


def history(tmp_path: Path, seed: int, runs: int = 5, **last) -> tuple[Path, str]:
    """`runs` ordinary nightly runs, then one more with the overrides in `last`; all imported."""
    rng = random.Random(seed)
    db = tmp_path / "history.sqlite"
    for i in range(1, runs + 1):
        import_run_dir(db, build_run(tmp_path / "results", i, rng, drop=("torch-s",) if i == 1 else ()))
    last_dir = build_run(tmp_path / "results", runs + 1, rng, **last)
    import_run_dir(db, last_dir)
    return db, last_dir.name


def compare(db: Path, run_id: str, spec: str = "window:5", **th):
    conn = connect(db)
    try:
        (ref,) = query.resolve_run(conn, run_id)
        return compare_run(conn, ref, BaselineSpec.parse(spec), Thresholds(**th))
    finally:
        conn.close()


@pytest.mark.parametrize("seed", range(5))
def test_one_cell_slowed_by_15_percent_is_exactly_the_one_flagged(tmp_path, seed):
    db, run_id = history(tmp_path, seed, factor={"trt-s": 1.15})
    result = compare(db, run_id)
    assert result.has_history
    assert [(f.cell_id, f.kind) for f in result.regressions] == [(cid("trt-s"), "latency")]
    (finding,) = result.regressions
    assert 9 < finding.change_pct < 21
    assert "Mann-Whitney" in finding.detail
    assert result.improvements == []
    assert result.compared == len(CELLS)


@pytest.mark.parametrize("seed", range(3))
def test_unchanged_run_has_no_regression(tmp_path, seed):
    db, run_id = history(tmp_path, seed)
    result = compare(db, run_id)
    assert result.regressions == [] and result.improvements == []
    assert main_compare([run_id, "--db", str(db)]) == 0


def test_ok_to_failed_is_a_status_regression(tmp_path, capsys):
    db, run_id = history(tmp_path, 11, status={"ort-s": "run_failed"})
    result = compare(db, run_id)
    assert [(f.cell_id, f.kind, f.baseline, f.current) for f in result.regressions] == [
        (cid("ort-s"), "status", "ok", "run_failed")
    ]
    assert main_compare([run_id, "--db", str(db)]) == 1
    out = capsys.readouterr().out
    assert "**FAIL**" in out and f"`{cid('ort-s')}`" in out and "| status |" in out


def test_improvement_is_listed_not_failed(tmp_path):
    db, run_id = history(tmp_path, 12, factor={"torch-n": 0.8})
    result = compare(db, run_id)
    assert result.regressions == []
    assert [(f.cell_id, f.kind) for f in result.improvements] == [(cid("torch-n"), "latency")]
    assert result.improvements[0].change_pct < -10
    assert main_compare([run_id, "--db", str(db)]) == 0


def test_failed_to_ok_is_an_improvement_and_skip_is_only_a_change(tmp_path):
    rng = random.Random(5)
    db = tmp_path / "h.sqlite"
    for i in range(1, 4):
        st = {"ort-n": "load_failed", "trt-n": "ok"}
        import_run_dir(db, build_run(tmp_path, i, rng, status=st))
    import_run_dir(db, build_run(tmp_path, 4, rng, status={"trt-n": "skipped"}))
    result = compare(db, "nightly-004")
    assert result.regressions == []
    assert [(f.cell_id, f.kind) for f in result.improvements] == [(cid("ort-n"), "status")]
    assert [(f.cell_id, f.current) for f in result.status_changes] == [(cid("trt-n"), "skipped")]


def test_memory_rule_needs_both_percent_and_megabytes(tmp_path):
    db, run_id = history(tmp_path, 13, mem={"torch-n": 1500.0 + 100, "trt-n": 700.0 + 40})
    result = compare(db, run_id)
    # +100 MB on 1500 (6.7%) exceeds max(5%, 64 MB); +40 MB on 700 (5.7%) does not reach 64 MB.
    assert [(f.cell_id, f.kind) for f in result.regressions] == [(cid("torch-n"), "memory")]
    assert result.regressions[0].baseline == pytest.approx(1500.0)


def test_new_and_vanished_cells_are_listed(tmp_path):
    db, run_id = history(tmp_path, 14, drop=("ort-n",))
    result = compare(db, run_id)
    assert result.vanished_cells == [cid("ort-n")]
    assert result.regressions == []
    # torch-s is missing from the first run only, so in window mode it is not new; against run 1 it is.
    assert compare(db, run_id, spec="nightly-001").new_cells == [cid("torch-s")]


def test_noisy_series_needs_more_than_its_spread(tmp_path):
    """A 15% slower p50 is within 3x the spread of a cell whose p50 wanders by ~10% between runs."""
    rng = random.Random(21)
    db = tmp_path / "h.sqlite"
    for i, f in enumerate([1.0, 1.12, 0.9, 1.08, 0.95], start=1):
        import_run_dir(db, build_run(tmp_path, i, rng, factor={"torch-s": f}))
    import_run_dir(db, build_run(tmp_path, 6, rng, factor={"torch-s": 1.15}))
    assert compare(db, "nightly-006").regressions == []
    # The same change with a steady history is flagged.
    assert [f.cell_id for f in compare(db, "nightly-006", spread_k=0.0).regressions] == [cid("torch-s")]


def test_p50_jump_without_significant_rounds_is_not_flagged(tmp_path):
    """Bimodal rounds: one sample crossing modes moves the p50 by 50%, but the rounds do not differ."""
    c = CELLS["ort-n"][0]
    db = tmp_path / "h.sqlite"
    for i in range(1, 4):
        env = make_env(f"r{i}", f"2026-11-0{i}T00:00:00Z")
        import_run_dir(
            db, write_run(tmp_path, env, [make_record(f"r{i}", c, samples_ms=[10.0] * 10 + [30.0] * 10)])
        )
    env = make_env("r4", "2026-11-04T00:00:00Z")
    import_run_dir(db, write_run(tmp_path, env, [make_record("r4", c, samples_ms=[10.0] * 9 + [30.0] * 11)]))
    result = compare(db, "r4")
    assert result.regressions == []
    assert [f.kind for f in compare(db, "r4", alpha=1.01).regressions] == ["latency"]


def test_runs_compare_only_within_their_series(tmp_path):
    rng = random.Random(3)
    db = tmp_path / "h.sqlite"
    for i in range(1, 6):
        import_run_dir(db, build_run(tmp_path, i, rng))
    upgraded = make_env("x", "x", driver="560.28.03")
    import_run_dir(db, build_run(tmp_path, 6, rng, factor=dict.fromkeys(CELLS, 1.5), env=upgraded))
    first = compare(db, "nightly-006")
    assert not first.has_history and first.regressions == []
    assert main_compare(["nightly-006", "--db", str(db)]) == 0
    # Back on the old driver: compared with runs 1-5, not with the slow run of the other series.
    import_run_dir(db, build_run(tmp_path, 7, rng))
    back = compare(db, "nightly-007")
    assert back.regressions == [] and back.improvements == []
    assert set(back.baseline_runs) <= {f"nightly-{i:03d}" for i in range(1, 6)}
    with pytest.raises(HistoryError, match="only within one series"):
        compare(db, "nightly-007", spec="nightly-006")
    assert main_compare(["nightly-007", "--baseline", "nightly-006", "--db", str(db)]) == 2


def test_baseline_last_and_named_run(tmp_path):
    db, run_id = history(tmp_path, 8, factor={"ort-n": 1.3})
    for spec in ("last", "nightly-003"):
        result = compare(db, run_id, spec=spec)
        assert [f.cell_id for f in result.regressions] == [cid("ort-n")], spec
        assert len(result.baseline_runs) == 1


def test_baseline_spec_parsing():
    assert BaselineSpec.parse("window:3") == BaselineSpec("window", 3)
    assert BaselineSpec.parse("last").mode == "last"
    assert BaselineSpec.parse("nightly-7") == BaselineSpec("run", 5, "nightly-7")
    for bad in ("window:0", "window:x"):
        with pytest.raises(ValueError):
            BaselineSpec.parse(bad)


def test_compare_defaults_to_newest_run_and_writes_json_and_markdown(tmp_path, capsys):
    db, run_id = history(tmp_path, 9, factor={"trt-m": 1.4})
    md, js = tmp_path / "out.md", tmp_path / "out.json"
    assert main_compare(["--db", str(db), "--markdown", str(md), "--json", str(js)]) == 1
    assert run_id in capsys.readouterr().out
    assert cid("trt-m") in md.read_text()
    assert '"kind": "latency"' in js.read_text()


def test_compare_accepts_a_results_dir_and_imports_it(tmp_path):
    db, _ = history(tmp_path, 10)
    new_dir = build_run(tmp_path / "results", 7, random.Random(1), status={"trt-n": "crashed"})
    assert main_compare([str(new_dir), "--db", str(db)]) == 1
    conn = connect(db)
    assert query.resolve_run(conn, "nightly-007")
    conn.close()


def test_compare_errors_exit_2(tmp_path):
    assert main_compare(["--db", str(tmp_path / "none.sqlite")]) == 2
    db, _ = history(tmp_path, 2)
    assert main_compare(["no-such-run", "--db", str(db)]) == 2
    assert main_compare(["--baseline", "window:0", "--db", str(db)]) == 2


# -- small samples ---------------------------------------------------------------------------------------------
# Outliers up to 2x would blur a 2x slow-down in five rounds; the few-round tests keep only the per-round jitter.
STEADY = Noise(run_sigma=0.01, round_sigma=0.03, outlier_rate=0.0)


def few_rounds_series(tmp_path: Path, rounds: int, runs: int, last: dict[str, float], seed: int = 0) -> Path:
    """`runs` runs of two CPU cells timed `rounds` times each (large models get the runner's minimum of 5), the
    last one with the factors in `last`; all imported. Returns the database."""
    rng = random.Random(seed)
    cells = {
        "big": (cell("openvino", "x", device="cpu"), 1500.0),
        "mid": (cell("openvino", "l", device="cpu"), 700.0),
    }
    db = tmp_path / "h.sqlite"
    for i in range(1, runs + 1):
        run_id = f"r{i:02d}"
        env = make_env(run_id, f"2026-11-{i:02d}T02:00:00+00:00", hostname="cpu-vm", gpu=None, cuda=None)
        recs = []
        for name, (c, p50) in cells.items():
            f = last.get(name, 1.0) if i == runs else 1.0
            samples = noisy_samples(rng, p50 * f * rng.lognormvariate(0.0, 0.01), rounds, STEADY)
            recs.append(make_record(run_id, c, samples_ms=samples))
        import_run_dir(db, write_run(tmp_path / "results", env, recs))
    return db


@pytest.mark.parametrize("spec", ["window:5", "last"])
def test_five_round_cell_slowed_2x_is_flagged_and_an_unslowed_one_is_not(tmp_path, spec):
    """5 rounds against 25 (window) or against 5 (last): the exact rank test reaches p < 0.01 either way."""
    db = few_rounds_series(tmp_path, rounds=5, runs=6, last={"big": 2.0})
    result = compare(db, "r06", spec=spec)
    big, mid = cell("openvino", "x", device="cpu").id, cell("openvino", "l", device="cpu").id
    assert result.state == "judged"
    assert [(f.cell_id, f.kind) for f in result.regressions] == [(big, "latency")]
    assert "Mann-Whitney exact" in result.regressions[0].detail
    assert result.unjudged == [] and mid not in {f.cell_id for f in result.improvements}
    assert main_compare(["r06", "--db", str(db), "--baseline", spec]) == 1


def test_unslowed_five_round_series_passes(tmp_path):
    db = few_rounds_series(tmp_path, rounds=5, runs=6, last={})
    result = compare(db, "r06")
    assert result.state == "judged" and result.regressions == [] and result.unjudged == []


def test_too_few_rounds_is_said_not_passed(tmp_path):
    """3 rounds against the previous run's 3: no ordering reaches p < 0.01 (best 0.1): unjudged, listed."""
    db = few_rounds_series(tmp_path, rounds=3, runs=4, last={"big": 2.0})
    result = compare(db, "r04", spec="last")
    assert result.regressions == []
    unjudged = {f.cell_id: f for f in result.unjudged}
    big = cell("openvino", "x", device="cpu").id
    assert set(unjudged) == {big, cell("openvino", "l", device="cpu").id}
    assert "too few rounds to judge" in unjudged[big].detail and unjudged[big].change_pct > 80
    # Against the window (3 vs 9 rounds of three runs) the same rounds can be judged.
    assert [f.cell_id for f in compare(db, "r04").regressions] == [big]
    assert "Latency not judged" in main_compare_md(db, "r04", "last")


def main_compare_md(db: Path, run_id: str, spec: str) -> str:
    from harness.history.markdown import render_comparison

    return render_comparison(compare(db, run_id, spec=spec))


def test_insufficient_history_until_the_series_holds_three_runs(tmp_path):
    db = few_rounds_series(tmp_path, rounds=20, runs=2, last={"big": 2.0})
    result = compare(db, "r02")
    assert result.state == "insufficient history" and result.series_runs == 2
    assert result.regressions == []  # a latency change cannot fail a series this short
    (finding,) = result.unjudged
    assert (
        finding.cell_id == cell("openvino", "x", device="cpu").id and "insufficient history" in finding.detail
    )
    assert "INSUFFICIENT HISTORY" in main_compare_md(db, "r02", "window:5")
    assert main_compare(["r02", "--db", str(db)]) == 0
    assert main_compare(["r02", "--db", str(db), "--min-runs", "2"]) == 1  # asked to judge two runs: it fails
    # one more run with the same slowdown: now judged, and flagged
    db3 = few_rounds_series(tmp_path / "three", rounds=20, runs=3, last={"big": 2.0})
    judged = compare(db3, "r03")
    assert judged.state == "judged" and [f.cell_id for f in judged.regressions] == [finding.cell_id]


def test_one_run_baseline_spread_is_never_zero(tmp_path):
    """With one earlier run the p50s give no spread: the baseline rounds' spread stands in (and the detail says so),
    so a noisy cell needs more than the 10% floor."""
    rng = random.Random(4)
    c = cell("openvino", "m", device="cpu")
    db = tmp_path / "h.sqlite"
    noisy = Noise(run_sigma=0.0, round_sigma=0.12, outlier_rate=0.0)
    for i, factor in ((1, 1.0), (2, 1.0), (3, 1.0), (4, 1.25)):
        run_id = f"n{i}"
        env = make_env(run_id, f"2026-11-{i:02d}T02:00:00+00:00", hostname="cpu-vm", gpu=None, cuda=None)
        samples = noisy_samples(rng, 100.0 * factor, 200, noisy)
        import_run_dir(db, write_run(tmp_path / "results", env, [make_record(run_id, c, samples_ms=samples)]))
    result = compare(db, "n4", spec="last", window=1)
    assert result.regressions == []  # +25% is within 3 x the rounds' ~12% spread
    tight = compare(
        db, "n4", spec="last", window=1, spread_k=0.0
    )  # the same change without the spread margin
    assert [f.cell_id for f in tight.regressions] == [c.id]
    assert "baseline rounds' spread" in tight.regressions[0].detail


def canary_history(tmp_path: Path, seed: int, canary, **last) -> tuple[Path, str]:
    rng = random.Random(seed)
    db = tmp_path / "history.sqlite"
    for i in range(1, 6):
        import_run_dir(db, build_run(tmp_path / "results", i, rng, canary=canary))
    last_dir = build_run(tmp_path / "results", 6, rng, canary=canary, **last)
    import_run_dir(db, last_dir)
    return db, last_dir.name


@pytest.mark.parametrize("seed", range(3))
def test_a_machine_slower_as_a_whole_is_not_a_regression_when_the_canary_saw_it(tmp_path, seed):
    db, run_id = canary_history(tmp_path, seed, canary=0.5, speed=1.5)
    result = compare(db, run_id)
    assert [f for f in result.regressions if f.kind == "latency"] == []
    assert any(
        "drift canary moved beyond its usual band" in n and "slower than usual" in n for n in result.notes
    )


@pytest.mark.parametrize("seed", range(3))
def test_without_the_canary_the_same_slow_machine_reads_as_regressions(tmp_path, seed):
    db, run_id = canary_history(tmp_path, seed, canary=None, speed=1.5)
    result = compare(db, run_id)
    flagged = {f.cell_id for f in result.regressions if f.kind == "latency"}
    assert flagged == {c.id for c, _, _ in CELLS.values()}
    assert all("raw p50s" in f.detail for f in result.regressions)


@pytest.mark.parametrize("seed", range(3))
def test_one_cell_slowed_on_a_slow_machine_is_still_the_one_flagged_with_the_canary_note(tmp_path, seed):
    db, run_id = canary_history(tmp_path, seed, canary=0.5, speed=1.5, factor={"trt-s": 1.25})
    result = compare(db, run_id)
    (finding,) = [f for f in result.regressions if f.kind == "latency"]
    assert finding.cell_id == cid("trt-s") and finding.change_pct == pytest.approx(25, abs=6)
    assert "canary-normalised" in finding.detail and "usual band" in finding.detail


def test_a_steady_canary_adds_no_note(tmp_path):
    db, run_id = canary_history(tmp_path, 0, canary=0.5)
    result = compare(db, run_id)
    assert not any("canary" in n for n in result.notes) and result.regressions == []


def heap_history(tmp_path: Path, last_policy: str | None) -> tuple[Path, str]:
    """Five runs under the retain heap policy, then one under `last_policy` (None: env.json without `allocator`,
    as a run from before --malloc). Synthetic env.json and records (harness.history.synthetic)."""
    rng = random.Random(0)
    db = tmp_path / "history.sqlite"
    retain = {
        "policy": "retain",
        "applied": True,
        "reason": "mallopt",
        "library": "glibc 2.36",
        "settings": {},
    }
    last_dir = None
    for i in range(1, 7):
        env = make_env(f"nightly-{i:03d}", f"2026-11-{i:02d}T02:00:00+00:00")
        if i < 6:
            env["allocator"] = retain
        elif last_policy is not None:
            env["allocator"] = dict(retain, policy=last_policy, applied=last_policy == "retain")
        last_dir = build_run(tmp_path / "results", i, rng, env=env)
        import_run_dir(db, last_dir)
    return db, last_dir.name


@pytest.mark.parametrize("last", ["system", None])
def test_a_run_under_another_heap_policy_says_so_next_to_its_findings(tmp_path, last):
    db, run_id = heap_history(tmp_path, last)
    result = compare(db, run_id)
    (note,) = [n for n in result.notes if "heap policy" in n]
    assert "(retain) to this run (system)" in note and "--malloc" in note


def test_the_same_heap_policy_adds_no_note(tmp_path):
    db, run_id = heap_history(tmp_path, "retain")
    assert not any("heap policy" in n for n in compare(db, run_id).notes)
