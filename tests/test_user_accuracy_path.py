"""The user's path, end to end: `--weights-dir` holding a yolo26n.pt and `--data` a dataset YAML in ultralytics'
layout (here the generated synthetic set written into the user's folder, the stand-in weights copied in as theirs):
every scored cell gets its mAP measured at its shape and precision, the harness's figure agrees with ultralytics'
own `model.val()` on the same images and shape within 0.005, and the camera pick is decided on that scale."""

from __future__ import annotations

import shutil

import pytest

from harness.accuracy import validator
from harness.accuracy.standin import standin_weights
from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.results_dir import Run
from harness.decide import registry
from harness.decide.accuracy import MEASURED, accuracy_of
from harness.decide.by_candidates import decide
from harness.decide.index import index_runs
from harness.decide.picks import Constraints
from harness.execute.runner import CellRunner, RunConfig
from harness.yolo import dataset as ds

IMAGES = 16
SIDES = (320, 640)


@pytest.mark.slow
@pytest.mark.export
def test_your_weights_and_data_are_measured_at_each_shape_agree_with_the_validator_and_decide_the_pick(
    tmp_path, cache_dir
):
    weights_dir = tmp_path / "my-weights"
    weights_dir.mkdir()
    mine = weights_dir / "yolo26n.pt"
    shutil.copy(standin_weights("n", "detect", cache_dir), mine)
    data = ds.generate(tmp_path / "my-data", train=1, val=IMAGES, calib=1)  # synthetic: true in its data.yaml
    cfg = RunConfig(
        run_id="mine", results_dir=tmp_path / "results", cache_dir=cache_dir, max_time_s=0.2, block_s=0.02,
        e2e=True, scenarios="none", weights_dir=weights_dir, data=data, accuracy_images=IMAGES,
    )  # fmt: skip
    runner = CellRunner(cfg, progress=lambda m: None)
    records = []
    for side in SIDES:
        cells = [
            Cell("n", "detect", "e2e", b, "cpu", Shape(side, side)) for b in ("torch-eager", "onnxruntime")
        ]
        runner.prepare(cells)
        by_id = runner.run_workload(cells)
        records += [by_id[c.id][0] for c in cells]
    images = ds.split_images(data, "val")[:IMAGES]
    idx = index_runs([Run(tmp_path / "results", "mine", {"host": {"cpu_model": "test"}}, records)])
    for rec in records:
        assert rec.status == "ok", rec.reason
        assert (
            not str(rec.weights).startswith(("standin", "random-init")) and rec.accuracy["images"] == IMAGES
        )
        assert accuracy_of(rec, idx[0].cells).source == MEASURED
    for side in SIDES:
        ref = next(r for r in records if r.backend == "torch-eager" and r.height == side)
        theirs = validator.validate(mine, images, ds.CLASSES, side, "e2e")
        assert abs(ref.accuracy["map50_95"] - theirs["map50_95"]) <= 0.005, (side, ref.accuracy, theirs)
    # the camera (a generous frame time, so every cell meets it) is decided on the measured scale
    dec = decide(registry.get("camera").case, idx[0], idx, Constraints(camera_fps=1.0))
    assert dec.accuracy_scale == MEASURED and dec.pick.cand.accuracy.source == MEASURED
    best = max(r.accuracy["map50_95"] for r in records)
    assert dec.pick.cand.accuracy.value >= best * 0.99
    if dec.fastest is not None:  # the trade, where there is one, is priced from the user's data
        assert "measured on your data" in dec.gives_up
    assert all(r["accuracy_source"] == MEASURED for r in (x.as_dict() for x in dec.ladder))
