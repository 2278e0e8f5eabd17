"""Train the stand-in yolo26n weights of a task on the generated synthetic dataset, on a CPU, reproducibly.

Pretrained YOLO26 weights cannot be fetched here, and random weights make accuracy meaningless, so the harness
ships weights trained on its own generated datasets (harness.yolo.dataset, harness.yolo.task_dataset): a yolo26n of
the task built from its YAML (`yolo26n.yaml`, `yolo26n-seg.yaml`, ...), trained with ultralytics' own trainer, a
fixed seed and deterministic=True, then validated. They measure whether a backend keeps a trained network's
accuracy, not how well YOLO26 detects, segments, finds keypoints or classifies real objects.

    python scripts/train_standin.py                     # detect: see weights/standin/yolo26n-detect.json
    python scripts/train_standin.py --task seg ... --compact   # the command each json records
    python scripts/train_standin.py --task seg --compact-only  # compact a trained yolo26n-seg.pt, no training

writes weights/standin/yolo26n-<task>.pt (optimizer stripped, fp16) and yolo26n-<task>.json (the command, wall time,
epochs, images, CPU, the val metrics, dataset parameters, sha256). With --compact the weights are stored as
yolo26n-<task>.compact.pt instead (int8 per output channel, harness.yolo.compact_weights: about half the bytes; the
tracked tree travels with every GPU command), validated again as the harness loads them (decoded), and the json keeps
the fp16 figures beside them (val_fp16_before_compaction, compaction). The detect stand-in stays an fp16 checkpoint
(committed records quote its sha256). The trainer's own output goes to a temporary directory.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
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
from harness.yolo import compact_weights, task_dataset  # noqa: E402
from harness.yolo import dataset as ds  # noqa: E402
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
    p.add_argument(
        "--compact",
        action="store_true",
        help="store the trained weights compact (yolo26n-<task>.compact.pt: int8 per output channel) and validate "
        "them decoded; the fp16 checkpoint is not kept",
    )
    p.add_argument(
        "--compact-only",
        action="store_true",
        help="no training: compact <out-dir>/yolo26n-<task>.pt (what a run without --compact wrote), validate it "
        "before and after on its json's dataset and shapes, and rewrite the json as --compact would have",
    )
    a = p.parse_args(argv)
    if (a.compact or a.compact_only) and a.task == "detect":
        p.error("the detect stand-in stays an fp16 checkpoint: committed records and docs quote its sha256")
    return a


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
    "ges of the generated dataset, one-to-many head through the validator's NMS (ultralytics 8.4.190's defau"
    "lt, nms=None), NMS's time limit lifted: the training run's own validation, not the harness's accuracy p"
    "ass (the first 32 val images, batch 1)"
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


@contextlib.contextmanager
def _no_nms_time_limit():
    """ultralytics' NMS stops after 2 s + 0.05 s per image of a batch and leaves the batch's remaining images without
    detections. On a loaded 2-core CPU the pose stand-in's val at 640 crossed it now and then: its mAP50-95 ranged
    0.208 to 0.222 over runs of the same file. Without the limit the figures are the model's, not the machine's."""
    from ultralytics.utils import nms

    real = nms.non_max_suppression
    nms.non_max_suppression = functools.partial(real, max_time_img=3600.0)
    try:
        yield
    finally:
        nms.non_max_suppression = real


def _val(weights: Path, data: Path, imgsz: int, task: str) -> dict[str, float]:
    from ultralytics import YOLO

    with _no_nms_time_limit():
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
    """Rewrite a torch.save archive in place with its records deflate-compressed (harness.yolo.compact_weights.
    deflate): fp16 weights shrink about 11%, and torch.load reads it as before (not memory-mapped; ultralytics does
    not map checkpoints). The detect stand-in predates this and stays as it was (its sha256 is in committed records)."""
    tmp = path.with_name(f".{path.name}.deflate")
    compact_weights.deflate(path, tmp)
    tmp.replace(path)


#: the compact format in words, for the json
COMPACT_FORMAT = (
    "torch.save archive of plain tensors (loads with weights_only=True): every floating-point tensor of >= 2 dims "
    f"and >= {compact_weights.MIN_QUANTIZED} elements int8, symmetric, one fp16 scale per output channel (dim 0, "
    "max|w|/127); BatchNorm, biases and smaller tensors fp16 as trained; the model's YAML, class and attributes, "
    "rebuilt with ultralytics' model class on first use (harness.yolo.compact_weights)"
)


def compacted(record: dict, ckpt: Path, data: Path, shapes: list[int], val_before: dict, tmp: Path) -> dict:
    """Store the fp16 checkpoint `ckpt` compact beside it (then remove it), validate the decoded weights at `shapes`
    as `_val` did the fp16 ones (`val_before`), and return `record` describing the compact file: its sha256 and
    size, the val figures after compaction, the fp16 figures under val_fp16_before_compaction, and the compaction
    (format, bytes before and after, the change of each figure)."""
    from harness.yolo.models import check_checkpoint, sha256_file

    task = record["task"]
    out = ckpt.with_name(f"{stem(task)}{compact_weights.SUFFIX}")
    fp16_sha, t0 = sha256_file(ckpt), time.perf_counter()
    summary = compact_weights.encode(ckpt, out)
    encode_s = time.perf_counter() - t0
    decoded = compact_weights.decode(out, tmp / f"{stem(task)}-decoded.pt")
    check_checkpoint(decoded, allow_unsafe=False)
    val_after = {str(s): _val(decoded, data, s, task) for s in sorted(set(shapes))}
    change = {
        side: {k: round(v - val_before[side][k], 4) for k, v in figures.items()}
        for side, figures in val_after.items()
    }
    command = record["command"] if "--compact" in record["command"] else f"{record['command']} --compact"
    val = {k: v for k, v in record["val"].items() if k not in ("by_imgsz", "weights")}
    # what _val measures now, on both sides (a json written before NMS's time limit was lifted says otherwise)
    val["quantity"] = VAL_QUANTITY_CLS if task == "cls" else VAL_QUANTITY
    record = {
        **record,
        "weights": out.name,
        "sha256": sha256_file(out),
        "size_bytes": out.stat().st_size,
        "command": command,
        "val": {
            **val,
            "weights": f"{out.name} decoded as the harness loads it (harness.yolo.compact_weights.decode)",
            "by_imgsz": val_after,
        },
        "val_fp16_before_compaction": {
            **val,
            "weights": f"the fp16 checkpoint {ckpt.name} before compaction (sha256 {fp16_sha}, "
            f"{summary['bytes_before']} bytes; not committed)",
            "by_imgsz": val_before,
        },
        "compaction": {
            "format": COMPACT_FORMAT,
            "command": f"python scripts/train_standin.py --task {task} --compact-only",
            "fp16_sha256": fp16_sha,
            **summary,
            "val_change": change,
            "wall_s": {"encode": round(encode_s, 1)},
        },
    }
    ckpt.unlink()  # the compact file is what is kept
    log.info("compact %s: %d -> %d bytes, val %s -> %s", out, summary["bytes_before"], summary["bytes_after"],
             val_before, val_after)  # fmt: skip
    return record


def compact_only(a: argparse.Namespace) -> int:
    """--compact-only: the trained fp16 checkpoint of `a.task` compacted, validated before and after on the dataset
    and shapes its json names, the json rewritten."""
    json_path = a.out_dir / f"{stem(a.task)}.json"
    ckpt = a.out_dir / f"{stem(a.task)}.pt"
    if not ckpt.is_file() or not json_path.is_file():
        raise SystemExit(
            f"nothing to compact: {ckpt} and its json are needed (the fp16 checkpoint a run without --compact writes)"
        )
    record = json.loads(json_path.read_text())
    spec = record["dataset"]
    shapes = [int(s) for s in record["val"]["by_imgsz"]]
    torchvision_placeholder()
    with tempfile.TemporaryDirectory(prefix="standin-compact-") as tmp:
        data = task_dataset.generate_any(
            Path(tmp) / "dataset",
            seed=spec["seed"],
            train=spec["train"],
            val=spec["val"],
            calib=spec["calib"],
            task=a.task,
        )
        val_before = {str(s): _val(ckpt, data, s, a.task) for s in sorted(set(shapes))}
        record = compacted(record, ckpt, data, shapes, val_before, Path(tmp))
    json_path.write_text(json.dumps(record, indent=1) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Generate the dataset, train, validate, strip the optimizer and write the weights and their record."""
    import torch
    from ultralytics import YOLO
    from ultralytics.utils.torch_utils import strip_optimizer

    from harness.yolo.models import check_checkpoint

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    a = _args(argv)
    if a.compact_only:
        return compact_only(a)
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
        record = _record(a, argv, out, val, gen_s, train_s, threads)
        if a.compact:
            record = compacted(record, out, data, shapes, val, Path(tmp))

    (a.out_dir / f"{stem(a.task)}.json").write_text(json.dumps(record, indent=1) + "\n")
    log.info("wrote %s (%s bytes), val %s, train %.0f s", record["weights"], record["size_bytes"],
             record["val"]["by_imgsz"], train_s)  # fmt: skip
    return 0


def _record(
    a: argparse.Namespace, argv, out: Path, val: dict, gen_s: float, train_s: float, threads: int
) -> dict:
    """The json written beside the weights."""
    import torch
    from ultralytics.utils.torch_utils import get_cpu_info

    from harness.yolo.models import sha256_file

    utask = ULTRALYTICS_TASK[a.task]
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
    return record


if __name__ == "__main__":
    raise SystemExit(main())
