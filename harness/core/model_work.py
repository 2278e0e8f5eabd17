"""The committed table of the models' counted work (model_work.json beside this module), for records written before
a run counted its own (harness.decide.roofline reads it; a record's `roofline` section, where it has one, wins).

scripts/model_work.py generates it with harness.measure.work on the ultralytics YAML models (80 classes, the
architecture of every random-init model; weights do not change the count) on the meta device, batch 1, at the
shapes the committed records and the profiles use. `lookup` gives a cell's work: the entry of its model and shape
(the input and activations times the batch, the weights once), else the nearest counted shape of the same model
scaled by the input area, said so in `how`: a convolution's work and output scale with the area, the attention's
matrix products (aten.bmm, baddbmm, the attention kernels: every token against every token) with its square, a
classifier's products on pooled features (aten.mm, addmm) not at all (tests/test_model_work.py).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

TABLE = Path(__file__).with_name("model_work.json")


@functools.lru_cache(maxsize=1)
def table() -> dict:
    """The committed table ({} when it is missing or unreadable: every lookup is then a null with the reason)."""
    try:
        data = json.loads(TABLE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


#: the prefix of the stand-in weights' entries (weights/standin: 5 classes, so its head differs from the YAML's 80)
STANDIN = "standin/"


def key(size: str, task: str, head: str, height: int, width: int, standin: bool = False) -> str:
    return f"{STANDIN if standin else ''}{size}/{task}/{head}/{height}x{width}"


#: how each counted operator's FLOPs scale with the input area: as the area, as its square, or not at all
AREA_POWER = {"aten.convolution": 1, "aten.bmm": 2, "aten.baddbmm": 2, "aten.mm": 0, "aten.addmm": 0}


def _scaled(entry: dict, total: str, by_op: str, area_scale: float) -> float:
    ops = entry.get(by_op)
    if not isinstance(ops, dict) or not ops:
        return float(entry.get(total) or 0) * area_scale
    return sum(
        float(v) * area_scale ** AREA_POWER.get(op, 2 if "attention" in op else 1) for op, v in ops.items()
    )


def scaled_flops(entry: dict, area_scale: float) -> float:
    """An entry's FLOPs at `area_scale` times its input area: each operator by its power of the area (AREA_POWER;
    the attention kernels as their square, anything else as the area), the total alone where the entry has no
    per-operator counts."""
    return _scaled(entry, "flops", "ops", area_scale)


def scaled_activations(entry: dict, area_scale: float) -> float:
    """An entry's activation elements at `area_scale` times its input area, operator by operator as the FLOPs."""
    return _scaled(entry, "activation_elements", "activation_ops", area_scale)


def lookup(
    size: str | None,
    task: str | None,
    head: str | None,
    height: int | None,
    width: int | None,
    batch: int | None,
    weights: str | None = None,
) -> tuple[dict | None, str]:
    """(work of one call, how it was found) for a cell, or (None, why not). `weights`: the record's; a record of the
    committed stand-in (`standin:<sha256>`) gets the stand-in's entries where the table has them."""
    if not height or not width:
        return None, "no one input shape (the dynamic probe): the work of its sweep shapes is theirs"
    data = table()
    entries = data.get("entries") if isinstance(data.get("entries"), dict) else {}
    if not entries:
        return None, f"the committed work table {TABLE.name} is missing"
    standin = str(weights or "").startswith("standin:") and any(
        k.startswith(f"{STANDIN}{size}/{task}/{head}/") for k in entries
    )
    exact = entries.get(key(str(size), str(task), str(head), height, width, standin))
    scale, how = 1.0, "counted" + (" on the stand-in weights" if standin else "")
    if not isinstance(exact, dict):
        prefix = key(str(size), str(task), str(head), 0, 0, standin).rsplit("/", 1)[0] + "/"
        near = []
        for k, v in entries.items():
            if k.startswith(prefix) and isinstance(v, dict):
                h, _, w = k[len(prefix) :].partition("x")
                if h.isdigit() and w.isdigit():
                    near.append((abs(int(h) * int(w) - height * width), k, int(h) * int(w), v))
        if not near:
            return None, f"the committed work table has no yolo26{size} {task} {head} entry"
        _, k, area, exact = min(near)
        scale = height * width / area
        how = f"scaled by the input area from the count at {k.rsplit('/', 1)[1]}"
    b = int(batch or 1)
    work = {
        "flops": scaled_flops(exact, scale) * b,
        "weight_elements": exact.get("weight_elements"),
        "input_elements": float(exact.get("input_elements") or 0) * scale * b,
        "activation_elements": scaled_activations(exact, scale) * b,
        "how": (
            f"the committed table {TABLE.name} ({how}; {data.get('method', 'harness.measure.work')}, "
            f"{exact.get('classes', data.get('classes', '?'))} classes, torch {data.get('torch', '?')}, batch {b})"
        ),
    }
    return work, ""
