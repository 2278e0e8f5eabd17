"""What counting the model's work costs a run: the parity reference's fp32 forward pass with harness.measure.work's
counters on (torch's FlopCounterMode and the outputs' mode) against the same pass plain, interleaved.

    .venv/bin/python benchmarks/work_count_cost.py [--rounds 5] [--threads N] [n:640 n:320 s:640 ...]

Each workload (size:side, detect, the e2e head, batch 1) is built from the ultralytics YAML (random-init weights:
neither the count nor the time depends on them) and prepared as the exporters see it. Printed first, the first
counted pass of the process (the counters' one-time cost, after a plain warm-up); then per workload the medians of
`--rounds` plain and counted passes, alternating, and their difference.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _model(size: str, side: int, tmp: Path):
    import torch
    from ultralytics import YOLO

    from harness.yolo.models import prepared_model

    ckpt = tmp / f"yolo26{size}.pt"
    if not ckpt.exists():
        torch.manual_seed(0)
        torch.save(
            {"model": YOLO(f"yolo26{size}.yaml", task="detect").model, "train_args": {"task": "detect"}}, ckpt
        )
    return prepared_model(ckpt, "e2e", (side, side))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=None, help="default: the harness's thread budget")
    p.add_argument("workloads", nargs="*", default=["n:320", "n:640", "s:640"], help="size:side")
    args = p.parse_args(argv)
    import torch

    from harness.measure.work import counting
    from harness.threads import budget

    torch.set_num_threads(args.threads or budget())
    tmp = Path(tempfile.mkdtemp())

    def plain(model, x) -> float:
        t0 = time.perf_counter()
        with torch.inference_mode():
            model(x)
        return time.perf_counter() - t0

    def counted(model, x) -> tuple[float, dict]:
        t0 = time.perf_counter()
        with torch.inference_mode(), counting(model, x) as work:
            model(x)
        return time.perf_counter() - t0, work

    first = True
    for spec in args.workloads:
        size, _, side = spec.partition(":")
        model, x = _model(size, int(side), tmp), torch.rand(1, 3, int(side), int(side))
        plain(model, x)  # warm-up
        if first:
            once, _ = counted(model, x)
            print(
                f"the first counted pass of the process (yolo26{size} {side}): {once * 1000:.0f} ms",
                flush=True,
            )
            first = False
        pairs = [(plain(model, x), counted(model, x)[0]) for _ in range(args.rounds)]
        p50, c50 = statistics.median(a for a, _ in pairs), statistics.median(b for _, b in pairs)
        print(
            f"yolo26{size} {side}x{side}: plain {p50 * 1000:.1f} ms, counted {c50 * 1000:.1f} ms, overhead "
            f"{(c50 - p50) * 1000:.1f} ms (median of {args.rounds} pairs)",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
