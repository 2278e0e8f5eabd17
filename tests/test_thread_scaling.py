"""harness.plan.thread_scaling: the compute factor corrected where a run's threads differ from its price's, both ways,
and carried from benchmarks/thread_scaling.py's JSON through scripts/plan_prices.py into the estimator. The
speedups here are synthetic (the file says so), chosen far apart so that each verdict is deterministic."""

from __future__ import annotations

import json

import pytest

from harness.plan import price
from harness.plan.thread_scaling import ThreadScaling, threads_of
from tests.test_plan_prices import ORT_X, fake_run, plan_prices

SCALING = ThreadScaling({2: 1.9}, {2: 1.3})  # synthetic speedups
TWO = {"python_s": 0.02, "compute_s": 0.05, "threads": 2}


def test_equal_or_unknown_thread_counts_leave_the_factor_alone():
    assert SCALING.compute_correction(2, 2) == 1.0
    assert SCALING.compute_correction(None, 1) == SCALING.compute_correction(2, None) == 1.0
    slower = {"python_s": 0.02, "compute_s": 0.10, "threads": 2}  # same count: the probe's 2x is the factor
    assert price.speed_factors(TWO, slower, SCALING)["compute_s"] == pytest.approx(2.0)


def test_fewer_threads_than_the_price_correct_by_the_workloads_scaling():
    # the probe loses 1.9x going to 1 thread, yolo26n 1.3x: the cells run 1.3 / 1.9 of what the probe says
    assert SCALING.compute_correction(2, 1) == pytest.approx(1.3 / 1.9)
    here = {"python_s": 0.02, "compute_s": 0.19, "threads": 1}  # the probe 3.8x slower at 1 thread in a quota
    f = price.speed_factors(TWO, here, SCALING)
    assert f["compute_s"] == pytest.approx(3.8 * 1.3 / 1.9) and f["python_s"] == 1.0
    # the other way: without the measured scaling, the probe's own 3.8x stands
    assert price.speed_factors(TWO, here)["compute_s"] == pytest.approx(3.8)
    # and more threads than the price's: the probe gains more than the cells do, so the factor rises
    assert SCALING.compute_correction(1, 2) == pytest.approx(1.9 / 1.3)


def test_a_count_not_measured_follows_amdahls_law_from_the_largest_measured():
    s = ThreadScaling({2: 2.0}, {2: 1.5})
    assert s.speedup("probe", 8) == pytest.approx(8.0)  # all parallel
    # speedup 1.5 at 2: parallel fraction 2/3, so at 4: 1 / (1/3 + 1/6) = 2
    assert s.speedup("workload", 4) == pytest.approx(2.0)
    assert ThreadScaling({2: 0.8}, {2: 1.5}).speedup("probe", 4) == 1.0  # measured under load: no gain
    assert s.speedup("workload", 1) == 1.0


def test_malformed_documents_read_as_not_known():
    assert ThreadScaling.from_doc(None) is None
    assert ThreadScaling.from_doc({"probe_speedup": {"2": 1.9}}) is None
    assert ThreadScaling.from_doc({"probe_speedup": {"two": 1.9}, "workload_speedup": {"2": 1.3}}) is None
    read = ThreadScaling.from_doc({"probe_speedup": {"2": 1.9}, "workload_speedup": {"2": 1.3}})
    assert read is not None and read.probe == {2: 1.9} and read.workload == {2: 1.3}
    assert (
        threads_of({"threads": 2}) == 2 and threads_of({"threads": True}) is None and threads_of(None) is None
    )


def test_the_benchmarks_json_reaches_the_estimator_through_the_generated_table(tmp_path):
    run = fake_run(tmp_path)
    env = json.loads((run / "env.json").read_text())
    env["machine_speed"] = {**env["machine_speed"], "threads": 2}
    env["scenario_phase"] = {
        "measured": [{"for": ["camera pick", "server fastest"]}, {"for": ["server better by its estimate"]}]
    }
    (run / "env.json").write_text(json.dumps(env))
    measured = {
        "synthetic": True,
        "measured_by": "benchmarks/thread_scaling.py",
        "cpu_model": "Synthetic CPU",
        "rounds": 7,
        "speedup": {"probe": {"2": {"median": 1.9, "range": [1.8, 2.0]}}},
        "probe_speedup": {"2": 1.9},
        "workload_speedup": {"2": 1.3},
    }
    (tmp_path / "scaling.json").write_text(json.dumps(measured))
    out = tmp_path / "prices.yaml"
    assert (
        plan_prices.main([str(run), "-o", str(out), "--thread-scaling", str(tmp_path / "scaling.json")]) == 0
    )
    assert f"--thread-scaling {tmp_path / 'scaling.json'}" in out.read_text()
    table = price.Table.read(out)
    assert table.thread_scaling is not None and table.thread_scaling.workload == {2: 1.3}
    assert table.scenario_phase_answers == ("camera", "server")  # the use cases its phase measured for
    # a machine whose probe reads 4x at 1 thread prices the stages 4 x 1.3 / 1.9; at 2 threads, 4x
    source = table.speed_of(table.lookup(ORT_X)[1])
    base = price.price_cells([ORT_X], price.Known(table, speed=source))[ORT_X.id].parts["stages"]
    one = {**source, "compute_s": source["compute_s"] * 4, "threads": 1}
    two = {**one, "threads": 2}
    assert price.price_cells([ORT_X], price.Known(table, speed=one))[ORT_X.id].parts[
        "stages"
    ] == pytest.approx(base * 4 * 1.3 / 1.9)
    assert price.price_cells([ORT_X], price.Known(table, speed=two))[ORT_X.id].parts[
        "stages"
    ] == pytest.approx(base * 4)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"probe_speedup": {"2": 1.9}, "workload_speedup": {"4": 1.3}}))
    with pytest.raises(SystemExit):
        plan_prices.main([str(run), "-o", str(out), "--thread-scaling", str(bad)])
