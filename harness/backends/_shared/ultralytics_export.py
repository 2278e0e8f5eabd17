"""Export through ultralytics' own exporter (the path users run), into a given directory."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from contextlib import contextmanager
from pathlib import Path

from harness.backends.base import ExportRequest

log = logging.getLogger(__name__)


@contextmanager
def budget_for_select_device():
    """Make ultralytics' `select_device("cpu")` set torch to the run's thread budget, not min(8, cores - 1).

    The exporter calls select_device, which calls torch.set_num_threads(ultralytics.utils.torch_utils.NUM_THREADS);
    that module constant is the budget while the export runs. The budget is applied again afterwards either way.
    """
    from ultralytics.utils import torch_utils

    from harness.threads import apply_torch, budget

    saved = torch_utils.NUM_THREADS
    torch_utils.NUM_THREADS = budget()
    try:
        yield
    finally:
        torch_utils.NUM_THREADS = saved
        apply_torch()


def export_with_ultralytics(req: ExportRequest, fmt: str, **kwargs) -> Path:
    """Run `YOLO(checkpoint).export(format=fmt, ...)` writing into req.out_dir; return the artifact path.

    The exporter writes next to the checkpoint, so the checkpoint is linked into the output directory first.
    The head is selected through ultralytics' documented API for the installed version (harness.yolo.heads: from
    8.4.142 `e2e` is nms=False, the one-to-one head with top-k, and `raw` nms=None, the one-to-many head).
    """
    from harness.yolo import heads
    from harness.yolo.models import load_yolo

    out = Path(req.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    link = out / f"{req.family}{req.size}-{req.task}.pt"
    if not link.exists():
        os.symlink(Path(req.checkpoint).resolve(), link)
    yolo = load_yolo(link)
    args = {
        "format": fmt,
        "imgsz": (req.height, req.width) if not req.dynamic else max(req.height, req.width, 640),
        "batch": req.batch,
        "dynamic": req.dynamic,
        **heads.select(req.head, req.family).export_args,
        "device": "cpu" if req.device == "cpu" else 0,
        "half": req.precision == "fp16",
        "int8": req.precision == "int8",
        "verbose": False,
    }
    args.update(kwargs)
    with budget_for_select_device():
        artifact = Path(yolo.export(**args))
    link.unlink()
    if not artifact.exists():
        raise RuntimeError(f"ultralytics export reported {artifact}, which does not exist")
    return artifact


@contextlib.contextmanager
def no_font_download():
    """ultralytics' dataset check (`check_det_dataset`, run by its int8 exporters) ends by fetching a plotting font
    from GitHub when none is installed; the harness plots nothing with it, and nothing may download at run time."""
    import ultralytics.data.utils as data_utils

    original = data_utils.check_font
    data_utils.check_font = lambda *a, **k: None
    try:
        yield
    finally:
        data_utils.check_font = original


def artifact_bytes(path: Path) -> int:
    """Size of a file, or of every file under a directory artifact."""
    path = Path(path)
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return path.stat().st_size


def remove_artifact(path: Path) -> None:
    path = Path(path)
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists():
        path.unlink()
