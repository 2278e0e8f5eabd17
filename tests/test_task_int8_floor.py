"""Per task, the run's accuracy stage on the task's stand-in weights and generated val images: the PyTorch fp32 cell is
its own reference, a real int8 cell (ONNX Runtime static QDQ at 320, calibrated on the generated calibration images)
is scored beside it with the task's metric, and the decision's int8 floor (harness.decide.picks.ACCURACY_FLOORS,
`below_accuracy_floor`) is checked on it; and the other way, the same int8 runner with its classes shifted by the
corruption knob (harness.measure.corrupt) falls below the floor, named as such."""

from __future__ import annotations

import pytest

from harness.accuracy import task_eval as te
from harness.core.axes import Shape
from harness.core.null_reasons import unexplained_nulls
from harness.decide.picks import ACCURACY_FLOORS, below_accuracy_floor
from harness.execute.runner import CellRunner, RunConfig
from harness.measure.corrupt import CORRUPT_ENV

TASKS = ("seg", "pose", "obb", "cls")
SHAPE = Shape(320, 320)
IMAGES = 16

pytestmark = [pytest.mark.slow, pytest.mark.export]


def _run(tmp_path, cache_dir, run_id: str) -> dict[str, dict]:
    from harness.core.cell import Cell

    cfg = RunConfig(
        run_id=run_id,
        results_dir=tmp_path,
        cache_dir=cache_dir,
        max_time_s=0.2,
        block_s=0.02,
        e2e=False,
        scenarios="none",
        accuracy_images=IMAGES,
        canary=False,
    )
    runner = CellRunner(cfg, progress=lambda m: None)
    out = {}
    for task in TASKS:
        cells = [
            Cell("n", task, "e2e", "torch-eager", "cpu", SHAPE),
            Cell("n", task, "e2e", "onnxruntime", "cpu", SHAPE, 1, "int8"),
        ]
        runner.prepare(cells)
        by_id = runner.run_workload(cells)
        out[task] = {c.precision: by_id[c.id][0] for c in cells}
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory, cache_dir) -> dict[str, dict[str, dict]]:
    """One run of every task's fp32 and int8 cells, and the same again with the int8 runner's outputs spoiled (its
    export is the first run's, from the cache)."""
    mp = pytest.MonkeyPatch()
    try:
        plain = _run(tmp_path_factory.mktemp("plain"), cache_dir, "plain")
        mp.setenv(CORRUPT_ENV, "onnxruntime=shift-classes")
        spoiled = _run(tmp_path_factory.mktemp("spoiled"), cache_dir, "spoiled")
    finally:
        mp.undo()
    return {"plain": plain, "spoiled": spoiled}


@pytest.mark.parametrize("task", TASKS)
def test_int8_cell_is_scored_with_its_task_metric_and_checked_against_the_floor(runs, task):
    fp32, int8 = runs["plain"][task]["fp32"], runs["plain"][task]["int8"]
    assert fp32.weights.startswith("standin:") and fp32.weights == int8.weights
    ref = fp32.accuracy
    assert ref["metric"] == te.PRIMARY[task][1] and ref["ratio"] == 1.0 and ref["images"] == IMAGES
    assert ref["map50_95"] > 0.1  # a trained model: the floor means something
    for key in te.TASK_KEYS[task]:
        assert key in ref and key in int8.accuracy
    acc = int8.accuracy
    assert int8.calibration and int8.calibration["images"] > 0
    assert acc["reference_map50_95"] == ref["map50_95"]
    assert acc["ratio"] == pytest.approx(acc["map50_95"] / ref["map50_95"])
    assert acc["ratio"] > 0.5, acc  # int8 still does the task (a broken calibration scores near zero)
    verdict = below_accuracy_floor(int8)
    assert (verdict is None) == (acc["ratio"] >= ACCURACY_FLOORS["int8"]), (verdict, acc)
    assert unexplained_nulls(fp32) == [] and unexplained_nulls(int8) == []
    print(
        f"{task} int8 onnxruntime: {acc['metric']} {acc['map50_95']:.4f}, ratio {acc['ratio']:.4f}: {verdict}"
    )


@pytest.mark.parametrize("task", TASKS)
def test_a_spoiled_int8_runner_falls_below_the_floor(runs, task):
    """The verdict the other way: classes shifted by one, the task's figure collapses and the floor names it."""
    int8 = runs["spoiled"][task]["int8"]
    assert "shift-classes" in " ".join(int8.corrupted or [])
    acc = int8.accuracy
    assert acc["ratio"] < 0.5 and acc["tier"] == "below 95%", acc
    why = below_accuracy_floor(int8)
    assert why is not None and "floor 0.95" in why
    assert runs["spoiled"][task]["fp32"].accuracy["ratio"] == 1.0  # the reference is not spoiled


def test_your_weights_on_your_data_of_the_task_are_measured_and_data_of_another_task_is_named(
    tmp_path, cache_dir
):
    """The user's path: yolo26n-pose.pt in --weights-dir and a pose dataset as --data: the cell's figure is measured
    (the record names the file, not the stand-in); --data of another task is a null naming why."""
    import shutil

    from harness.accuracy.standin import standin_weights
    from harness.core.cell import Cell
    from harness.yolo import task_dataset as td

    weights = tmp_path / "weights"
    weights.mkdir()
    shutil.copy(standin_weights("n", "pose", cache_dir), weights / "yolo26n-pose.pt")
    pose = td.generate_any(tmp_path / "my-pose", train=1, val=8, calib=2, task="pose")
    seg = td.generate_any(tmp_path / "my-seg", train=1, val=8, calib=2, task="seg")
    recs = {}
    for name, data in (("pose", pose), ("seg", seg)):
        cfg = RunConfig(
            run_id=f"user-{name}",
            results_dir=tmp_path / "results",
            cache_dir=cache_dir,
            max_time_s=0.2,
            block_s=0.02,
            e2e=False,
            scenarios="none",
            accuracy_images=8,
            canary=False,
            weights_dir=weights,
            data=data,
        )
        runner = CellRunner(cfg, progress=lambda m: None)
        cell = Cell("n", "pose", "e2e", "torch-eager", "cpu", SHAPE)
        runner.prepare([cell])
        recs[name] = runner.run_workload([cell])[cell.id][0]
    mine = recs["pose"]
    assert mine.weights == str(weights / "yolo26n-pose.pt") and mine.accuracy["dataset"] == str(pose)
    assert mine.accuracy["metric"] == te.PRIMARY["pose"][1] and mine.accuracy["map50_95"] > 0.05
    other = recs["seg"]
    assert other.accuracy is None and "cannot score pose" in other.null_reasons["accuracy"]
    assert "no kpt_shape" in other.null_reasons["accuracy"]
