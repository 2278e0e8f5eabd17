"""Compact weights: an ultralytics checkpoint stored with its large tensors int8, rebuilt into a checkpoint on use.

The tracked tree travels to a GPU machine with every GPU command, and the stand-in weights were most of it. A
compact file keeps what rebuilds the checkpoint and little else: every floating-point tensor of the state dict with
two or more dims and at least MIN_QUANTIZED elements as int8, symmetric, one fp16 scale per output channel (dim 0);
the rest (BatchNorm, biases, small tensors, integer buffers) as it is stored (fp16 for an ultralytics checkpoint);
the model's class name (one of MODEL_CLASSES), its YAML dict, the attributes a fresh build of that YAML does not
reproduce (class names, training args, ...), and the checkpoint's other entries (train_args, metadata). It is a
torch.save archive of plain tensors, dicts, lists and strings, so it loads with `torch.load(weights_only=True)`:
nothing in it runs code. `decode` builds the model with ultralytics' own class from the YAML, loads the weights
(strict), halves it as ultralytics' strip_optimizer does and saves `{"model": model, ...}` like any checkpoint.

Lossy by design: a decoded weight is within one quantization step of its channel (scale = max|w| / 127) of the
original; `encode` checks that, the state dict's keys, shapes and dtypes and the models' attributes before it
writes anything, and what the loss costs in accuracy is measured where a compact file is made
(scripts/train_standin.py --compact-only).
"""

from __future__ import annotations

import copy
import io
import logging
import os
import zipfile
from pathlib import Path
from typing import Any, BinaryIO

log = logging.getLogger(__name__)

FORMAT = "yolo26-bench compact weights"
#: how a compact weights file's name ends (yolo26n-seg.compact.pt): it is a torch.save archive, not a checkpoint
SUFFIX = ".compact.pt"
VERSION = 1
#: a floating-point tensor of at least two dims and this many elements is stored int8; a smaller one stays as it is
MIN_QUANTIZED = 1024
QMAX = 127
#: the ultralytics model classes (ultralytics.nn.tasks) a compact file may name: one per task
MODEL_CLASSES = ("DetectionModel", "SegmentationModel", "PoseModel", "OBBModel", "ClassificationModel")
#: what ultralytics' Detect head caches from its last forward pass (the anchor grid of the last input shape): a
#: rebuilt model starts without them and computes them on its first forward, as for any new shape
FORWARD_CACHES = frozenset({"anchors", "strides", "shape"})
#: fp16's smallest positive (subnormal) value: the least scale, so that an all-zero channel divides by no zero
_MIN_SCALE = 2.0**-24
_MISSING = object()


class CompactWeightsError(ValueError):
    """A compact weights file that cannot be read or rebuilt, or a checkpoint that cannot be made compact; one line."""


def quantize(w):
    """(int8 tensor, fp16 scale per output channel) of a float tensor: symmetric, scale = max|w| / 127 per dim-0
    slice, rounded up to an fp16 value so that no weight falls outside [-127, 127] steps."""
    import torch

    flat = w.detach().float().flatten(1)
    amax = flat.abs().amax(dim=1)
    # x (1 + 2^-10) before rounding to fp16 (relative step 2^-10 or finer): the fp16 scale is never below amax/127
    scale = (amax / QMAX * (1 + 2.0**-10)).half().clamp_min(_MIN_SCALE)
    q = torch.round(flat / scale.float()[:, None]).clamp(-QMAX, QMAX).to(torch.int8)
    return q.view(w.shape), scale


def dequantize(q, scale):
    """The fp32 tensor an int8 tensor and its per-channel scales stand for."""
    return (q.float().flatten(1) * scale.float()[:, None]).view(q.shape)


def _quantized(t) -> bool:
    return t.is_floating_point() and t.dim() >= 2 and t.numel() >= MIN_QUANTIZED


def _module_attrs(module) -> dict[str, Any]:
    """A module's own attributes that rebuilding from the YAML may not reproduce: its instance variables but for
    PyTorch's own (parameters, buffers, submodules, hooks), `training` and the forward caches. Private ones count:
    ultralytics keeps the head's choice of branch in `_end2end`."""
    import torch

    internal = set(vars(torch.nn.Module()))
    return {
        k: v
        for k, v in vars(module).items()
        if k not in internal
        and k != "training"
        and k not in FORWARD_CACHES
        and not isinstance(v, torch.nn.Module)
    }


def _same(a: Any, b: Any) -> bool:
    import torch

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.shape == b.shape
            and a.dtype == b.dtype
            and bool(torch.equal(a, b))
        )
    if isinstance(a, dict) and isinstance(b, dict):  # compared item by item: a tensor has no plain ==
        return type(a) is type(b) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    return type(a) is type(b) and a == b


def attribute_differences(a, b) -> list[str]:
    """`module.attr` of every attribute (read as ultralytics reads it: instance, else class attribute) where models
    `a` and `b` differ, over every submodule; the forward caches excepted. Empty when ultralytics sees them alike."""
    mods_a, mods_b = dict(a.named_modules()), dict(b.named_modules())
    out = [f"{n} (module only in one model)" for n in sorted(set(mods_a) ^ set(mods_b))]
    for name in mods_a.keys() & mods_b.keys():
        ma, mb = mods_a[name], mods_b[name]
        if type(ma) is not type(mb):
            out.append(f"{name} ({type(ma).__name__} vs {type(mb).__name__})")
            continue
        for k in sorted(_module_attrs(ma).keys() | _module_attrs(mb).keys()):
            if not _same(getattr(ma, k, _MISSING), getattr(mb, k, _MISSING)):
                out.append(f"{name or '<model>'}.{k}")
    return sorted(out)


def _build(class_name: str, yaml: dict):
    """A fresh model of ultralytics' class from its YAML dict, without touching the caller's random state (the build
    initialises weights that are then overwritten)."""
    import torch
    from ultralytics.nn import tasks

    if class_name not in MODEL_CLASSES:
        raise CompactWeightsError(f"model class {class_name!r} is not one of {', '.join(MODEL_CLASSES)}")
    with torch.random.fork_rng(devices=[]):
        model = getattr(tasks, class_name)(copy.deepcopy(yaml), ch=yaml.get("channels", 3), verbose=False)
    return model.eval()


def _save_deflated(obj: Any, path: Path) -> None:
    """torch.save `obj` to `path` with the archive's records deflate-compressed and a fixed date (torch.load reads
    deflated records). Saved through memory, so the archive's folder is torch's fixed `archive`, not named after the
    file: the same weights give the same bytes under any name."""
    import torch

    raw = io.BytesIO()
    torch.save(obj, raw)
    deflate(raw, path)


def deflate(src: Path | BinaryIO, dst: Path) -> None:
    """Copy a torch.save archive with its records deflate-compressed (the same names, order and bytes; a fixed
    date, so the file is reproducible). torch.load reads it as before (not memory-mapped)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            out = zipfile.ZipInfo(info.filename, date_time=(1980, 1, 1, 0, 0, 0))
            out.compress_type = zipfile.ZIP_DEFLATED
            zout.writestr(out, zin.read(info.filename), compresslevel=9)


def _model_of(ckpt: dict):
    """The model a checkpoint holds: its EMA where there is one (as ultralytics loads it), else its model."""
    return ckpt["ema"] if ckpt.get("ema") is not None else ckpt.get("model")


def _load_checkpoint(path: Path) -> dict:
    from ultralytics.nn.tasks import torch_safe_load

    try:
        ckpt, _ = torch_safe_load(str(path), safe_only=True)
    except Exception as e:
        detail = " ".join(str(e).split())[:200]
        raise CompactWeightsError(f"checkpoint {path} cannot be loaded safely: {detail}") from None
    if not isinstance(ckpt, dict) or _model_of(ckpt) is None:
        raise CompactWeightsError(f"{path} is not an ultralytics checkpoint (no model)")
    return ckpt


def encode(checkpoint_in: Path, compact_out: Path) -> dict:
    """Write the compact form of the ultralytics checkpoint `checkpoint_in` to `compact_out`, after checking that it
    decodes to the same model (state-dict keys, shapes and dtypes; weights within one int8 step of their channel;
    the attributes ultralytics reads). Returns what was stored: bytes before and after, tensors and elements int8
    and kept, the largest error in steps."""
    checkpoint_in, compact_out = Path(checkpoint_in), Path(compact_out)
    ckpt = _load_checkpoint(checkpoint_in)
    model = _model_of(ckpt)
    class_name = type(model).__name__
    fresh = _build(class_name, model.yaml)
    fresh_mods = dict(fresh.named_modules())
    attrs = {}
    for name, module in model.named_modules():
        mine = {
            k: v
            for k, v in _module_attrs(module).items()
            if not _same(v, getattr(fresh_mods.get(name), k, _MISSING))
        }
        if mine:
            attrs[name] = mine
    state = model.state_dict()
    int8, scale, kept = {}, {}, {}
    for k, t in state.items():
        if _quantized(t):
            int8[k], scale[k] = quantize(t)
        else:
            kept[k] = t.detach().clone()
    archive = {
        "format": FORMAT,
        "version": VERSION,
        "model_class": class_name,
        "yaml": model.yaml,
        "attrs": attrs,
        "checkpoint": {k: v for k, v in ckpt.items() if k not in ("model", "ema")},
        "keys": list(state),
        "int8": int8,
        "scale": scale,
        "kept": kept,
    }
    # written under a temp name and checked there: a file that does not decode to the model never takes the name
    tmp = compact_out.with_name(f".{compact_out.name}.{os.getpid()}.tmp")
    try:
        _save_deflated(archive, tmp)
        problems = _differences(model, rebuild(tmp)[0])
        if problems:
            raise CompactWeightsError(
                f"{checkpoint_in} does not come back from its compact form: {'; '.join(problems[:5])}"
            )
        tmp.replace(compact_out)
    finally:
        tmp.unlink(missing_ok=True)
    steps = max((_error_steps(state[k], int8[k], scale[k]) for k in int8), default=0.0)
    summary = {
        "bytes_before": checkpoint_in.stat().st_size,
        "bytes_after": compact_out.stat().st_size,
        "int8_tensors": len(int8),
        "int8_elements": sum(t.numel() for t in int8.values()),
        "kept_tensors": len(kept),
        "kept_elements": sum(t.numel() for t in kept.values()),
        "max_error_steps": round(steps, 4),
    }
    log.info("compact %s -> %s: %s", checkpoint_in, compact_out, summary)
    return summary


def _error_steps(original, q, scale) -> float:
    """The largest distance of a decoded weight from the original, in quantization steps of its channel."""
    err = (dequantize(q, scale) - original.float()).abs().flatten(1)
    return float((err / scale.float()[:, None]).max())


def _differences(original, rebuilt) -> list[str]:
    """What makes `rebuilt` not the compact form of `original`: state-dict keys, shapes, dtypes, weights further
    than one step of their channel, attributes."""
    import torch

    a, b = original.state_dict(), rebuilt.state_dict()
    if list(a) != list(b):
        return [f"state-dict keys differ ({len(set(a) ^ set(b))} not in both)"]
    out = []
    for k, ta in a.items():
        tb = b[k]
        if ta.shape != tb.shape or ta.dtype != tb.dtype:
            out.append(f"{k}: {tuple(ta.shape)} {ta.dtype} vs {tuple(tb.shape)} {tb.dtype}")
        elif _quantized(ta):
            _, s = quantize(ta)
            err = (ta.float() - tb.float()).abs().flatten(1)
            if bool((err > s.float()[:, None]).any()):
                out.append(f"{k}: a weight moved more than one int8 step")
        elif not torch.equal(ta, tb):
            out.append(f"{k}: changed, though stored as it was")
    return out + [f"attribute {d} differs" for d in attribute_differences(original, rebuilt)]


def read(compact: Path) -> dict:
    """The archive of a compact weights file, loaded with weights_only=True; CompactWeightsError (one line) for a
    file that is missing, damaged or of another format."""
    import torch

    compact = Path(compact)
    try:
        archive = torch.load(compact, map_location="cpu", weights_only=True)
    except Exception as e:
        detail = " ".join(str(e).split())[:200]
        raise CompactWeightsError(
            f"compact weights {compact} cannot be read (damaged or not a compact weights file): {detail}"
        ) from None
    if not isinstance(archive, dict) or archive.get("format") != FORMAT:
        raise CompactWeightsError(f"{compact} is a PyTorch file but not a compact weights file")
    if archive.get("version") != VERSION:
        raise CompactWeightsError(
            f"compact weights {compact} are version {archive.get('version')!r}; this harness reads version {VERSION}"
        )
    return archive


def rebuild(compact: Path):
    """(model, the checkpoint's other entries) rebuilt from a compact weights file: ultralytics' model class built
    from the YAML, the weights loaded strictly, fp16, eval, no gradients, the stored attributes set."""
    archive = read(compact)
    try:
        model = _build(archive["model_class"], archive["yaml"])
        state = {
            k: (
                dequantize(archive["int8"][k], archive["scale"][k])
                if k in archive["int8"]
                else archive["kept"][k]
            )
            for k in archive["keys"]
        }
        model.load_state_dict(state, strict=True)
        model.half().eval()
        for p in model.parameters():
            p.requires_grad = False
        mods = dict(model.named_modules())
        for name, attrs in archive["attrs"].items():
            for k, v in attrs.items():
                setattr(mods[name], k, v)
        rest = dict(archive["checkpoint"])
    except CompactWeightsError:
        raise
    except Exception as e:
        detail = " ".join(str(e).split())[:200]
        raise CompactWeightsError(
            f"compact weights {compact} do not rebuild a model: {type(e).__name__}: {detail}"
        ) from None
    return model, rest


def decode(compact: Path, out_checkpoint: Path) -> Path:
    """Write the ultralytics checkpoint a compact weights file stands for to `out_checkpoint` (under a temp name per
    process, then moved into place: runs sharing a cache may decode at once); returns its path."""
    import torch

    model, rest = rebuild(compact)
    out_checkpoint = Path(out_checkpoint)
    out_checkpoint.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_checkpoint.with_name(f".{out_checkpoint.name}.{os.getpid()}.tmp")
    try:
        torch.save({**rest, "model": model}, tmp)
        tmp.replace(out_checkpoint)
    finally:
        tmp.unlink(missing_ok=True)
    return out_checkpoint
