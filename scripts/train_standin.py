"""Train the stand-in yolo26n weights of a task on the generated synthetic dataset, on a CPU, reproducibly.

Pretrained YOLO26 weights cannot be fetched here, and random weights make accuracy meaningless, so the harness
ships weights trained on its own generated datasets (harness.yolo.dataset, harness.yolo.task_dataset): a yolo26n of
the task built from its YAML (`yolo26n.yaml`, `yolo26n-seg.yaml`, ...), trained with ultralytics' own trainer, a
fixed seed and deterministic=True, then validated. They measure whether a backend keeps a trained network's
accuracy, not how well YOLO26 detects, segments, finds keypoints or classifies real objects.

    python scripts/train_standin.py                     # detect: see weights/standin/yolo26n-detect.json
    python scripts/train_standin.py --task seg ...      # the command each json records

writes weights/standin/yolo26n-<task>.pt (optimizer stripped, fp16) and yolo26n-<task>.json (the command, wall time,
epochs, images, CPU, the val metrics, dataset parameters, sha256). The trainer's own output goes to a temporary
directory.
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
from harness.yolo import task_dataset  # noqa: E402
from harness.yolo.models import ULTRALYTICS_TASK  # noqa: E402

log = logging.getLogger("train_standin")

OUT_DIR = REPO / "weights" / "standin"
#: the model YAML of each task (the harness's task names, harness.yolo.models)
MODEL_YAML = {
    "detect": "yolo26n.yaml",
    "seg": "yolo26n-seg.yaml",
    "pose": "yolo26n-pose.yaml",
    "obb": "yolo26n-obb.yaml",
    "cls": "yolo26n-cls.yaml",
}


def stem(task: str) -> str:
    return f"yolo26n-{task}"


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", choices=tuple(MODEL_YAML), default="detect")
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
    p.add_argument(
        "--val-imgsz",
        type=int,
        nargs="+",
        default=None,
        help="shapes the json's val metrics are measured at (default: --imgsz and 640; cls: --imgsz and 320)",
    )
    p.add_argument("--batch", type=int, default=16)
    p.add_argument(
        "--nbs",
        type=int,
        default=64,
        help="ultralytics' nominal batch size: gradients accumulate over nbs/batch batches per optimizer step "
        "(default 64, ultralytics' own); --nbs equal to --batch steps after every batch",
    )
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: all cores)")
    p.add_argument("--dataset-dir", type=Path, default=None, help="default: a temporary directory")
    p.add_argument("--out-dir", type=Path, default=OUT_DIR)
    return p.parse_args(argv)


def _train_kwargs(a: argparse.Namespace, data: Path, project: Path) -> dict:
    return {
        # ultralytics reads a classification dataset from its folder (ImageFolder), the others from the yaml
        "data": str(data.parent if a.task == "cls" else data),
        "epochs": a.epochs,
        "imgsz": a.imgsz,
        "batch": a.batch,
        "nbs": a.nbs,
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
#: the same for classify (no letterbox: ultralytics' classify transform, resize the shorter side and centre crop)
VAL_QUANTITY_CLS = (
    "ultralytics YOLO(weights).val(data, imgsz, batch=16; classify transform: shorter side resized, centre c"
    "rop) on all val images of the generated classify dataset: the training run's own validation, not the h"
    "arness's accuracy pass (32 val images evenly spaced over the classes, batch 1)"
)
#: what each task's val figures are: the task's own metrics, as its ultralytics validator reports them
VAL_METRICS = {
    "detect": "box mAP50-95, mAP50",
    "seg": "mask mAP50-95 and mAP50 (map50_95, map50), box mAP50-95 and mAP50",
    "pose": "pose (keypoint OKS) mAP50-95 and mAP50 (map50_95, map50), box mAP50-95 and mAP50",
    "obb": "rotated-box mAP50 (the field's metric, also as map50) and mAP50-95 (obb_map50_95)",
    "cls": "top-1 and top-5 accuracy",
}


def _val(weights: Path, data: Path, imgsz: int, task: str) -> dict[str, float]:
    from ultralytics import YOLO

    m = YOLO(str(weights)).val(
        data=str(data.parent if task == "cls" else data),
        imgsz=imgsz,
        batch=16,
        device="cpu",
        plots=False,
        workers=0,
        verbose=False,
    )
    r4 = lambda v: round(float(v), 4)  # noqa: E731
    if task == "cls":
        return {"top1": r4(m.top1), "top5": r4(m.top5)}
    box = {"map50_95": r4(m.box.map), "map50": r4(m.box.map50)}
    if task == "seg":
        return {
            "map50_95": r4(m.seg.map),
            "map50": r4(m.seg.map50),
            "box_map50_95": box["map50_95"],
            "box_map50": box["map50"],
        }
    if task == "pose":
        return {
            "map50_95": r4(m.pose.map),
            "map50": r4(m.pose.map50),
            "box_map50_95": box["map50_95"],
            "box_map50": box["map50"],
        }
    if task == "obb":
        return {"map50": box["map50"], "obb_map50_95": box["map50_95"]}
    return box


def drop_transforms(path: Path) -> None:
    """Take the classify model's `transforms` (torchvision objects ultralytics' trainer attaches for prediction) out
    of the checkpoint: unpickling them imports torchvision, which fails on this stack without
    harness.yolo.torchvision_compat, so the file would not load where the harness loads weights. Without them
    ultralytics predicts with classify_transforms, as for a model built from its YAML."""
    import torch

    ckpt = torch.load(path, map_location="cpu", weights_only=False)
    for key in ("model", "ema"):
        if ckpt.get(key) is not None and hasattr(ckpt[key], "transforms"):
            del ckpt[key].transforms
    torch.save(ckpt, path)


def deflate(path: Path) -> None:
    """Rewrite a torch.save archive with its records deflate-compressed (the same names, order and bytes; a fixed
    date, so the file is reproducible): fp16 weights shrink about 11%, and torch.load reads it as before (not
    memory-mapped; ultralytics does not map checkpoints). The tracked tree travels with every GPU command, so every
    megabyte counts. The detect stand-in predates this and stays as it was (its sha256 is in committed records)."""
    import zipfile

    tmp = path.with_name(f".{path.name}.deflate")
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(tmp, "w") as dst:
        for info in src.infolist():
            out = zipfile.ZipInfo(info.filename, date_time=(1980, 1, 1, 0, 0, 0))
            out.compress_type = zipfile.ZIP_DEFLATED
            dst.writestr(out, src.read(info.filename), compresslevel=9)
    tmp.replace(path)


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
    utask = ULTRALYTICS_TASK[a.task]
    with tempfile.TemporaryDirectory(prefix="standin-") as tmp:
        root = a.dataset_dir or Path(tmp) / "dataset"
        t0 = time.perf_counter()
        data = task_dataset.generate_any(
            root,
            seed=a.dataset_seed,
            train=a.train_images,
            val=a.val_images,
            calib=a.calib_images,
            task=a.task,
        )
        gen_s = time.perf_counter() - t0

        torch.manual_seed(a.seed)
        model = YOLO(MODEL_YAML[a.task], task=utask)
        # ultralytics' select_device("cpu") sets torch to min(8, cores - 1) threads: one on a 2-core machine
        model.add_callback("on_train_start", lambda trainer: torch.set_num_threads(threads))
        t0 = time.perf_counter()
        model.train(**_train_kwargs(a, data, Path(tmp) / "runs"))
        train_s = time.perf_counter() - t0
        best = Path(tmp) / "runs" / "train" / "weights" / "best.pt"

        a.out_dir.mkdir(parents=True, exist_ok=True)
        out = a.out_dir / f"{stem(a.task)}.pt"
        strip_optimizer(best, s=str(out), updates={"train_args": {"task": utask, "imgsz": a.imgsz}})
        if a.task == "cls":
            drop_transforms(out)
        if a.task != "detect":
            deflate(out)
        check_checkpoint(out, allow_unsafe=False)  # loads through ultralytics' safe path, as the harness does
        shapes = a.val_imgsz or [a.imgsz, 320 if a.task == "cls" else 640]
        val = {str(s): _val(out, data, s, a.task) for s in sorted(set(shapes))}

    command = "python scripts/train_standin.py " + " ".join(shlex.quote(x) for x in (argv or sys.argv[1:]))
    classes = list(task_dataset.CLS_NAMES if a.task == "cls" else ds.CLASSES)
    spec = ds.DatasetSpec(a.dataset_seed, a.train_images, a.val_images, a.calib_images)
    record = {
        "weights": f"{stem(a.task)}.pt",
        "task": a.task,
        "sha256": sha256_file(out),
        "size_bytes": out.stat().st_size,
        "command": command.strip(),
        "model": f"{MODEL_YAML[a.task]} ({utask}), trained from scratch",
        "trainer": "ultralytics YOLO(...).train",
        "train_args": {k: v for k, v in _train_kwargs(a, Path("<dataset>"), Path("<tmp>")).items()},
        "epochs": a.epochs,
        "train_images": a.train_images,
        "dataset": (
            {**spec.__dict__, "generator_version": ds.GENERATOR_VERSION, "classes": classes}
            if a.task == "detect"
            else task_dataset.manifest(a.task, spec)
        ),
        "wall_s": {"generate": round(gen_s, 1), "train": round(train_s, 1)},
        "cpu": get_cpu_info(),
        # the machine's load when training ended: wall time on a shared machine depends on it
        "loadavg_1_5_15": [round(v, 2) for v in os.getloadavg()],
        "cores": os.cpu_count(),
        "threads": threads,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "ultralytics": __import__("ultralytics").__version__,
        "val": {
            "split": "val",
            "images": a.val_images,
            "quantity": VAL_QUANTITY_CLS if a.task == "cls" else VAL_QUANTITY,
            "metrics": VAL_METRICS[a.task],
            "by_imgsz": val,
        },
        "synthetic": True,
    }
    (a.out_dir / f"{stem(a.task)}.json").write_text(json.dumps(record, indent=1) + "\n")
    log.info("wrote %s (%.1f MB), val %s, train %.0f s", out, out.stat().st_size / 1e6, val, train_s)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
