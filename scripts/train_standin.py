"""Train the stand-in yolo26n detect weights on the generated synthetic dataset, on a CPU, reproducibly.

Pretrained YOLO26 weights cannot be fetched here, and random weights make accuracy meaningless, so the harness
ships weights trained on its own generated dataset (harness.yolo.dataset): a yolo26n built from `yolo26n.yaml`,
trained with ultralytics' own trainer, a fixed seed and deterministic=True, then validated. They measure whether
a backend keeps a trained network's accuracy, not how well YOLO26 detects real objects.

    python scripts/train_standin.py            # the committed weights: see weights/standin/yolo26n-detect.json

writes weights/standin/yolo26n-detect.pt (optimizer stripped) and yolo26n-detect.json (the command, wall time,
epochs, images, CPU, val mAP, dataset parameters, sha256). The trainer's own output goes to a temporary directory.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shlex
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import harness  # noqa: E402, F401  (sets the offline environment before ultralytics is imported)
from harness.accuracy.validator import torchvision_placeholder  # noqa: E402
from harness.yolo import dataset as ds  # noqa: E402

log = logging.getLogger("train_standin")

OUT_DIR = REPO / "weights" / "standin"
STEM = "yolo26n-detect"


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=12)
    p.add_argument(
        "--train-images",
        type=int,
        default=ds.DatasetSpec.train,
        help="train split size of the generated dataset",
    )
    p.add_argument("--val-images", type=int, default=ds.DatasetSpec.val)
    p.add_argument("--calib-images", type=int, default=ds.DatasetSpec.calib)
    p.add_argument("--dataset-seed", type=int, default=0)
    p.add_argument("--seed", type=int, default=0, help="training seed")
    p.add_argument("--imgsz", type=int, default=320)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: all cores)")
    p.add_argument("--dataset-dir", type=Path, default=None, help="default: a temporary directory")
    p.add_argument("--out-dir", type=Path, default=OUT_DIR)
    return p.parse_args(argv)


def _train_kwargs(a: argparse.Namespace, data: Path, project: Path) -> dict:
    return {
        "data": str(data),
        "epochs": a.epochs,
        "imgsz": a.imgsz,
        "batch": a.batch,
        "device": "cpu",
        "workers": 0,
        "seed": a.seed,
        "deterministic": True,
        "pretrained": False,
        "amp": False,
        "plots": False,
        "cache": "ram",
        "close_mosaic": max(1, a.epochs // 4),
        "warmup_epochs": 1.0,
        "val": False,  # validate once, after the last epoch: per-epoch validation would eat the budget
        "project": str(project),
        "name": "train",
        "exist_ok": True,
        "verbose": False,
    }


#: what the metadata's val mAP figures are (written beside them)
VAL_QUANTITY = (
    "ultralytics YOLO(weights).val(data, imgsz, batch=16; square letterbox, val's default) on all val ima"
    "ges of the generated dataset, end-to-end head (YOLO26's default, no NMS): the training run's own val"
    "idation, not the harness's accuracy pass (the first 32 val images, batch 1)"
)


def _val(weights: Path, data: Path, imgsz: int) -> dict[str, float]:
    from ultralytics import YOLO

    m = YOLO(str(weights)).val(
        data=str(data), imgsz=imgsz, batch=16, device="cpu", plots=False, workers=0, verbose=False
    )
    return {"map50_95": round(float(m.box.map), 4), "map50": round(float(m.box.map50), 4)}


def main(argv: list[str] | None = None) -> int:
    """Generate the dataset, train, validate, strip the optimizer and write the weights and their record."""
    import torch
    from ultralytics import YOLO
    from ultralytics.utils.torch_utils import get_cpu_info, strip_optimizer

    from harness.yolo.models import check_checkpoint, sha256_file

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    a = _args(argv)
    threads = a.threads or torch.get_num_threads() or 1
    torchvision_placeholder()
    with tempfile.TemporaryDirectory(prefix="standin-") as tmp:
        root = a.dataset_dir or Path(tmp) / "dataset"
        t0 = time.perf_counter()
        data = ds.generate(
            root, seed=a.dataset_seed, train=a.train_images, val=a.val_images, calib=a.calib_images
        )
        gen_s = time.perf_counter() - t0

        torch.manual_seed(a.seed)
        model = YOLO("yolo26n.yaml", task="detect")
        # ultralytics' select_device("cpu") sets torch to min(8, cores - 1) threads: one on a 2-core machine
        model.add_callback("on_train_start", lambda trainer: torch.set_num_threads(threads))
        t0 = time.perf_counter()
        model.train(**_train_kwargs(a, data, Path(tmp) / "runs"))
        train_s = time.perf_counter() - t0
        best = Path(tmp) / "runs" / "train" / "weights" / "best.pt"

        a.out_dir.mkdir(parents=True, exist_ok=True)
        out = a.out_dir / f"{STEM}.pt"
        strip_optimizer(best, s=str(out), updates={"train_args": {"task": "detect", "imgsz": a.imgsz}})
        check_checkpoint(out, allow_unsafe=False)  # loads through ultralytics' safe path, as the harness does
        val = {str(s): _val(out, data, s) for s in sorted({a.imgsz, 640})}

    command = "python scripts/train_standin.py " + " ".join(shlex.quote(x) for x in (argv or sys.argv[1:]))
    record = {
        "weights": f"{STEM}.pt",
        "sha256": sha256_file(out),
        "size_bytes": out.stat().st_size,
        "command": command.strip(),
        "model": "yolo26n.yaml (detect), trained from scratch",
        "trainer": "ultralytics YOLO(...).train",
        "train_args": {k: v for k, v in _train_kwargs(a, Path("<dataset>"), Path("<tmp>")).items()},
        "epochs": a.epochs,
        "train_images": a.train_images,
        "dataset": {
            **ds.DatasetSpec(a.dataset_seed, a.train_images, a.val_images, a.calib_images).__dict__,
            "generator_version": ds.GENERATOR_VERSION,
            "classes": list(ds.CLASSES),
        },
        "wall_s": {"generate": round(gen_s, 1), "train": round(train_s, 1)},
        "cpu": get_cpu_info(),
        # the machine's load when training ended: wall time on a shared machine depends on it
        "loadavg_1_5_15": [round(v, 2) for v in os.getloadavg()],
        "cores": os.cpu_count(),
        "threads": threads,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "ultralytics": __import__("ultralytics").__version__,
        "val": {"split": "val", "images": a.val_images, "quantity": VAL_QUANTITY, "by_imgsz": val},
        "synthetic": True,
    }
    (a.out_dir / f"{STEM}.json").write_text(json.dumps(record, indent=1) + "\n")
    log.info("wrote %s (%.1f MB), val %s, train %.0f s", out, out.stat().st_size / 1e6, val, train_s)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
