"""YOLO26 models (and the families a user migrates from, YOLO11 and YOLOv8): local weights or a seeded random
initialisation, prepared for inference/export.

Nothing here downloads: a missing weights file is an error, and without --weights-dir the model is built from the
ultralytics YAML with a fixed seed and saved once as a checkpoint in the cache, so the parent process and the
isolated export processes run exactly the same weights.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
from dataclasses import dataclass
from pathlib import Path

import harness  # (sets the ultralytics offline environment and its safe-load switch before it is imported)
from harness.core import locations
from harness.core.axes import DEFAULT_FAMILY
from harness.yolo import compact_weights

log = logging.getLogger(__name__)

# harness task name -> (ultralytics task, YAML/weights suffix)
ULTRALYTICS_TASK = {"detect": "detect", "seg": "segment", "pose": "pose", "obb": "obb", "cls": "classify"}
FILE_SUFFIX = {"detect": "", "seg": "-seg", "pose": "-pose", "obb": "-obb", "cls": "-cls"}


class WeightsError(ValueError):
    """A weights file that is missing, unreadable, not a checkpoint or unsafe to load; one line for the user."""


UNSAFE_OPTION = "--allow-unsafe-weights"


@dataclass(frozen=True)
class ModelSource:
    """Where a model's weights come from: a local file, or random init with a seed."""

    size: str
    task: str
    weights_dir: Path | None = None
    seed: int = 0
    #: use the committed stand-in weights (harness.accuracy.standin) where one exists and no weights_dir is given
    standin: bool = False
    #: the model family (harness.core.axes.FAMILIES): its YAML (`yolo11n.yaml`) and weights file (`yolo11n.pt`)
    family: str = DEFAULT_FAMILY

    @property
    def stem(self) -> str:
        return f"{self.family}{self.size}{FILE_SUFFIX[self.task]}"

    def weights_file(self) -> Path | None:
        return None if self.weights_dir is None else Path(self.weights_dir) / f"{self.stem}.pt"

    def check(self) -> None:
        """Raise WeightsError before any work when a requested weights file is missing or unreadable."""
        f = self.weights_file()
        if f is None:
            return
        if f.exists() and not f.is_file():  # a FIFO would block the read below; a directory is no checkpoint
            raise WeightsError(
                f"weights file {f} is not a regular file (expected {self.stem}.pt in --weights-dir)"
            )
        if not f.is_file():
            raise WeightsError(f"weights file {f} not found (expected {self.stem}.pt in --weights-dir)")
        try:
            with open(f, "rb") as fh:
                fh.read(1)
        except OSError as e:
            raise WeightsError(f"weights file {f} is not readable: {e.strerror}") from e


@dataclass(frozen=True)
class Materialized:
    """A checkpoint on disk and how to describe it in records."""

    checkpoint: Path
    weights: str  # "random-init:<seed>", "standin:<sha256>" or "<path>"
    sha256: str


#: the committed stand-in weights (scripts/train_standin.py), each trained on its task's generated dataset
#: (harness.yolo.dataset, harness.yolo.task_dataset): yolo26n-detect.pt, a checkpoint, and yolo26n-<task>.compact.pt
#: for seg, pose, obb and cls, stored int8 per channel (harness.yolo.compact_weights) and decoded on first use
STANDIN_DIR = Path(__file__).resolve().parents[2] / "weights" / "standin"


def standin_file(size: str, task: str) -> Path | None:
    """The committed stand-in file of yolo26{size} {task} (the harness's task names): a checkpoint or its compact
    form, what records name (`standin:<its sha256>`); None where none is committed (yolo26n of every task is, no
    other size). A compact file is no checkpoint: load `standin_weights`."""
    for name in (f"yolo26{size}-{task}{compact_weights.SUFFIX}", f"yolo26{size}-{task}.pt"):
        f = STANDIN_DIR / name
        if f.is_file():
            return f
    return None


def standin_weights(size: str, task: str, cache_dir: Path | None = None) -> Path | None:
    """A loadable checkpoint of the stand-in of yolo26{size} {task}: the committed file where it is a checkpoint,
    else its compact form decoded once into `cache_dir` (default: the harness's cache); None where none is
    committed. WeightsError (one line) for a compact file that cannot be decoded."""
    f = standin_file(size, task)
    if f is None:
        return None
    return _loadable(f, sha256_file(f), Path(cache_dir or locations.cache_dir()))


def _loadable(standin: Path, digest: str, cache_dir: Path) -> Path:
    """`standin` itself when it is a checkpoint; its compact form's checkpoint, decoded into
    <cache_dir>/models/standin-<sha256[:12]>-<name>.pt unless already there (named by the compact file's digest, so a
    new stand-in never meets an old decode)."""
    if not standin.name.endswith(compact_weights.SUFFIX):
        return standin
    stem = standin.name.removesuffix(compact_weights.SUFFIX)
    ckpt = cache_dir / "models" / f"standin-{digest[:12]}-{stem}.pt"
    if not ckpt.is_file():
        try:  # written under a temp name per process, then moved into place: runs sharing a cache may race
            compact_weights.decode(standin, ckpt)
        except compact_weights.CompactWeightsError as e:
            raise WeightsError(str(e)) from None
        log.info("decoded the compact stand-in %s -> %s", standin, ckpt)
    return ckpt


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def materialize(src: ModelSource, cache_dir: Path) -> Materialized:
    """Return a checkpoint for `src`: its weights file, else the committed stand-in (when asked and one exists;
    decoded into the cache where it is stored compact), else the seeded random init, built and cached."""
    f = src.weights_file()
    if f is not None:
        src.check()
        return Materialized(f, str(f), sha256_file(f))
    if src.standin and src.family == DEFAULT_FAMILY:  # stand-ins are YOLO26's
        standin = standin_file(src.size, src.task)
        if standin is not None:
            # the digest of the committed file: a compact one always decodes to the same model
            digest = sha256_file(standin)
            return Materialized(_loadable(standin, digest, Path(cache_dir)), f"standin:{digest}", digest)
    ckpt = Path(cache_dir) / "models" / f"{src.stem}-random-init-{src.seed}.pt"
    if not ckpt.exists():
        import torch
        from ultralytics import YOLO

        ckpt.parent.mkdir(parents=True, exist_ok=True)
        torch.manual_seed(src.seed)
        yolo = YOLO(f"{src.stem}.yaml", task=ULTRALYTICS_TASK[src.task])
        calibrate_batchnorm(yolo.model)
        # a temp name per process: runs sharing a cache may build the same checkpoint at once
        tmp = ckpt.with_name(f".{ckpt.name}.{os.getpid()}.tmp")
        torch.save({"model": yolo.model, "train_args": {"task": ULTRALYTICS_TASK[src.task]}}, tmp)
        tmp.replace(ckpt)
        log.info("built %s with random init (seed %d) -> %s", src.stem, src.seed, ckpt)
    return Materialized(ckpt, f"random-init:{src.seed}", sha256_file(ckpt))


def calibrate_batchnorm(model) -> None:
    """Set BatchNorm running statistics from the bundled images.

    With PyTorch's default init, activations of a freshly built YOLO26 shrink by ~10x per stage, so every output is
    the head's bias: constant boxes and tied scores, which make parity checks vacuous and top-k order arbitrary.
    Calibrating BN statistics on real images (what a trained network's statistics look like) keeps activations at
    unit scale, so outputs vary with the input like a trained model's do. Weights stay random.
    """
    import torch

    from harness.yolo.inputs import letterboxed

    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None  # cumulative average over the calibration batches
    x = torch.from_numpy(letterboxed(640, 640, 2).copy())
    model.train()
    with torch.no_grad():
        for _ in range(2):
            model(x)
    model.eval()


# ---- loading checkpoints safely ------------------------------------------------------------------------------
# A .pt file is a pickle: unpickling it in full runs whatever callables it names. Checkpoints are loaded through
# ultralytics' safe path (torch.load(weights_only=True) plus an allow-list of torch and ultralytics model classes)
# unless --allow-unsafe-weights was given; the pre-check (check_checkpoint) refuses a file that needs more before
# any work, and load_yolo refuses it again wherever it is loaded (the export workers, torch backends, references).


def unsafe_weights_allowed() -> bool:
    """Whether this run allows full unpickling (--allow-unsafe-weights, inherited by the worker processes)."""
    return os.environ.get(harness.ALLOW_UNSAFE_WEIGHTS_ENV) == "1"


def allow_unsafe_weights() -> None:
    """--allow-unsafe-weights: checkpoints may be unpickled in full, in this process and its workers."""
    os.environ[harness.ALLOW_UNSAFE_WEIGHTS_ENV] = "1"
    os.environ["ULTRALYTICS_SAFE_LOAD"] = "0"


def _apply_load_policy() -> None:
    """Set ultralytics' loader to this run's policy. It reads ULTRALYTICS_SAFE_LOAD once, at its import, so a
    process that imported ultralytics before harness set the variable would otherwise keep its own value."""
    from ultralytics.nn import tasks

    safe = not unsafe_weights_allowed()
    if not hasattr(tasks, "SAFE_LOAD"):
        if safe:
            raise WeightsError(
                "this ultralytics version has no safe checkpoint loading (ULTRALYTICS_SAFE_LOAD); upgrade "
                f"ultralytics, or pass {UNSAFE_OPTION} if you trust the weights files"
            )
        return
    tasks.SAFE_LOAD = safe


def _refused_by_weights_only(exc: BaseException) -> bool:
    """Whether `exc` (or an exception it was raised from) is torch's weights-only unpickler refusing a global."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, pickle.UnpicklingError):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def _archive_globals(path: Path) -> list[str]:
    """The globals the checkpoint's pickle names beyond torch's weights-only allow-list, read from its opcodes
    (nothing is executed); WeightsError when `path` is not a torch.save archive."""
    import torch

    try:
        return sorted(torch.serialization.get_unsafe_globals_in_checkpoint(str(path)))
    except Exception as e:
        # torch's reader knows pickle protocol 2's opcodes only; a checkpoint saved with pickle_protocol=4 (FRAME,
        # STACK_GLOBAL, MEMOIZE) is still a torch.save archive: read its globals from the opcodes here
        found = _protocol4_globals(path)
        if found is not None:
            return found
        detail = " ".join(str(e).split())[:200]
        raise WeightsError(
            f"weights file {path} is not a PyTorch checkpoint (torch.save archive): {detail}"
        ) from None


def _protocol4_globals(path: Path) -> list[str] | None:
    """The globals a torch.save archive's pickle names beyond torch's weights-only allow-list, read with
    pickletools (nothing is executed, any pickle protocol); None when `path` is not such an archive."""
    import pickletools
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            names = [n for n in z.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
            if len(names) != 1:
                return None
            data = z.read(names[0])
        found: set[str] = set()
        memo: list = []
        strings: list = []  # values pushed, as far as STACK_GLOBAL needs them (module, then name)
        for op, arg, _ in pickletools.genops(data):
            if op.name in ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE"):
                strings.append(arg)
            elif op.name == "MEMOIZE":
                memo.append(strings[-1] if strings else None)
            elif op.name in ("BINGET", "LONG_BINGET") and isinstance(arg, int) and arg < len(memo):
                strings.append(memo[arg])
            elif op.name == "GLOBAL":
                found.add(str(arg).replace(" ", "."))
            elif op.name == "STACK_GLOBAL" and len(strings) >= 2:
                found.add(f"{strings[-2]}.{strings[-1]}")
    except (OSError, ValueError, zipfile.BadZipFile, KeyError):
        return None
    try:
        from torch._weights_only_unpickler import _get_allowed_globals

        allowed = set(_get_allowed_globals())
    except (ImportError, AttributeError):
        allowed = set()
    return sorted(g for g in found if g not in allowed)


def _unsafe_message(path: Path) -> str:
    # After the refused safe load, the names ultralytics allow-listed are registered: what is left is refused.
    refused = _archive_globals(path)
    names = f" ({', '.join(refused[:5])}{', ...' if len(refused) > 5 else ''})" if refused else ""
    return (
        f"weights file {path} needs full unpickling{names}, which can run code: refused "
        f"(pass {UNSAFE_OPTION} only for a file you trust)"
    )


def check_checkpoint(path: Path, allow_unsafe: bool | None = None) -> None:
    """Raise WeightsError (one line) unless `path` is a torch.save archive that loads as an ultralytics
    checkpoint; with unsafe loading not allowed it is loaded here, safely, so nothing in it runs."""
    path = Path(path)
    allow_unsafe = unsafe_weights_allowed() if allow_unsafe is None else allow_unsafe
    _archive_globals(path)
    if allow_unsafe:
        return  # loaded in full where it is used, as the user allowed; nothing is unpickled before then
    from ultralytics.nn.tasks import torch_safe_load

    _apply_load_policy()
    try:
        ckpt, _ = torch_safe_load(str(path), safe_only=True)
    except Exception as e:
        if _refused_by_weights_only(e):
            raise WeightsError(_unsafe_message(path)) from None
        detail = " ".join(str(e).split())[:200]
        raise WeightsError(f"weights file {path} is not a loadable checkpoint: {detail}") from None
    if not isinstance(ckpt, dict) or (ckpt.get("ema") is None and ckpt.get("model") is None):
        raise WeightsError(
            f"weights file {path} is a PyTorch file but not an ultralytics checkpoint (no model)"
        )


def load_yolo(checkpoint: Path):
    """Load an ultralytics YOLO object from a local checkpoint (never a hub name), safely unless allowed."""
    from ultralytics import YOLO

    checkpoint = Path(checkpoint)
    if not checkpoint.is_file():
        raise WeightsError(f"checkpoint {checkpoint} not found")
    _apply_load_policy()
    try:
        return YOLO(str(checkpoint))
    except Exception as e:
        if not unsafe_weights_allowed() and _refused_by_weights_only(e):
            raise WeightsError(_unsafe_message(checkpoint)) from None
        raise


def prepared_model(
    checkpoint: Path, head: str, imgsz: tuple[int, int], dynamic: bool = False, fmt: str = "torch"
):
    """The network as ultralytics' exporter prepares it: eval, fp32, fused, export-mode head.

    `head` is "e2e" (one-to-one head with top-k, output [B, 300, 6+extra]) or "raw" (one-to-many head, output
    [B, 4+nc+extra, anchors], needs external NMS).
    """
    import torch
    from ultralytics.nn.modules import Classify, Detect

    from harness.yolo import heads

    model = load_yolo(checkpoint).model
    heads.apply(model, head)
    for p in model.parameters():
        p.requires_grad = False
    model.eval().float()
    model = model.fuse(verbose=False) if hasattr(model, "fuse") else model
    strides = [int(s) for s in model.stride.tolist()]
    for m in model.modules():
        if isinstance(m, Classify):
            m.export = True
            m.format = fmt
        if isinstance(m, Detect):
            m.dynamic = dynamic
            m.export = True
            m.format = fmt
            available = sum((imgsz[0] // s) * (imgsz[1] // s) for s in strides)
            m.max_det = min(300, available)
            m.agnostic_nms = False
            m.xyxy = False
            m.shape = None
    torch.set_grad_enabled(False)
    return model
