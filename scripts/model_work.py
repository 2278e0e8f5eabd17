"""Write the committed table of the models' counted work (harness/core/model_work.json): never typed by hand.

    .venv/bin/python scripts/model_work.py [-o harness/core/model_work.json] [--cache-dir DIR]

Each entry is harness.measure.work's count (FLOPs by torch's FlopCounterMode; the elements a forward pass moves at
least) of the prepared fp32 model as the exporters see it (harness.yolo.models.prepared_model: fused, eval,
export-mode head), built from the ultralytics YAML with the harness's seed (80 classes, the random-init models'
architecture; weights do not change the count), counted on the meta device (shapes only), batch 1.
It covers every size, task and head at 640x640 and yolo26n detect at every static shape of the profiles and of the
committed records (SHAPES), and the same yolo26n detect shapes on the committed stand-in weights (`standin/` keys:
5 classes, a smaller head). A record written before a run counted its own work gets its entry
(harness.core.model_work.lookup); a shape not in the table is scaled by the input area from the nearest one.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

#: yolo26n detect's shapes: the profiles' (quick, default, nightly) and the committed records'
SHAPES = (
    (160, 160),
    (192, 192),
    (320, 320),
    (384, 640),
    (480, 480),
    (640, 640),
    (672, 672),
    (800, 800),
    (960, 960),
    (1280, 1280),
)


def _entry(work: dict, classes: int) -> dict:
    keys = ("flops", "weight_elements", "input_elements", "activation_elements", "ops", "activation_ops")
    return {"classes": classes, **{k: work[k] for k in keys}}


def main(argv: list[str] | None = None) -> int:
    import torch
    import ultralytics
    from ultralytics import YOLO

    from harness.core import model_work
    from harness.core.axes import HEADS, SIZES, TASKS
    from harness.measure.work import METHOD, count_on_meta
    from harness.yolo.models import (
        ULTRALYTICS_TASK,
        ModelSource,
        load_yolo,
        prepared_model,
        standin_weights,
    )

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-o", "--output", type=Path, default=model_work.TABLE)
    p.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="where the YAML models' checkpoints are written or found (default: a fresh temporary directory)",
    )
    args = p.parse_args(argv)
    cache_dir = args.cache_dir or Path(tempfile.mkdtemp(prefix="model-work-"))
    wanted = [(s, t, h, 640, 640) for s in SIZES for t in TASKS for h in HEADS]
    wanted += [("n", "detect", h, height, width) for h in HEADS for height, width in SHAPES]
    entries: dict[str, dict] = {}
    t0 = time.perf_counter()
    for size, task, head, height, width in dict.fromkeys(wanted):
        src = ModelSource(size, task, seed=0)
        ckpt = cache_dir / f"{src.stem}.pt"
        if not ckpt.exists():  # the ultralytics YAML model (weights do not change the count: no calibration)
            torch.manual_seed(src.seed)
            yolo = YOLO(f"{src.stem}.yaml", task=ULTRALYTICS_TASK[task])
            torch.save({"model": yolo.model, "train_args": {"task": ULTRALYTICS_TASK[task]}}, ckpt)
        model = prepared_model(ckpt, head, (height, width))
        work = count_on_meta(model, (1, 3, height, width))
        entries[model_work.key(size, task, head, height, width)] = _entry(work, 80)
        print(f"{size} {task} {head} {height}x{width}: {work['flops'] / 1e9:.3f} GFLOP", flush=True)
    # the committed stand-in (yolo26n detect, 5 classes): what the records of yolo26n detect ran without --weights-dir
    for size, task in (("n", "detect"),):
        ckpt = standin_weights(size, task, cache_dir)
        if ckpt is None:
            continue
        classes = int(load_yolo(ckpt).model.nc)
        for head in HEADS:
            for height, width in dict.fromkeys((*SHAPES, (640, 640))):
                model = prepared_model(ckpt, head, (height, width))
                work = count_on_meta(model, (1, 3, height, width))
                entries[model_work.key(size, task, head, height, width, standin=True)] = _entry(work, classes)
        print(f"stand-in yolo26{size} {task} ({classes} classes): {len(SHAPES)} shapes x {len(HEADS)} heads")
    table = {
        "generated_by": "scripts/model_work.py",
        "method": METHOD.format(ops="counted: convolutions and matrix products").replace(
            "the fp32 reference model",
            "the ultralytics YAML model, prepared as for export, on the meta device",
        ),
        "classes": 80,
        "batch": 1,
        "torch": torch.__version__,
        "ultralytics": ultralytics.__version__,
        "entries": entries,
    }
    args.output.write_text(json.dumps(table, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    print(f"{len(entries)} entries -> {args.output} in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
