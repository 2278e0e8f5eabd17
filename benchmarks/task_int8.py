"""int8 of every task against its fp32 floor: the run's accuracy stage on the stand-in weights of each task, the
PyTorch fp32 cell beside int8 cells of the backends named, at one shape, and the decision's floor verdict
(harness.decide.picks.below_accuracy_floor).

    .venv/bin/python benchmarks/task_int8.py [--tasks seg,pose,obb,cls] [--backends onnxruntime,openvino]
        [--shape 320] [--images 16] [--cache-dir DIR]

Prints one line per cell: its task's figure, its ratio to the fp32 reference and the floor's verdict.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import harness  # noqa: F401  (offline environment before ultralytics is imported)


def main() -> None:
    from harness.core.axes import Shape
    from harness.core.cell import Cell
    from harness.decide.picks import below_accuracy_floor
    from harness.execute.runner import CellRunner, RunConfig

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", default="seg,pose,obb,cls")
    p.add_argument("--backends", default="onnxruntime,openvino")
    p.add_argument("--shape", type=int, default=320)
    p.add_argument("--images", type=int, default=16)
    p.add_argument("--cache-dir", type=Path, default=None, help="export cache (default: a temporary one)")
    a = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="task-int8-") as tmp:
        cfg = RunConfig(
            run_id="task-int8",
            results_dir=Path(tmp) / "results",
            cache_dir=a.cache_dir or Path(tmp) / "cache",
            max_time_s=0.2,
            block_s=0.02,
            e2e=False,
            scenarios="none",
            accuracy_images=a.images,
            canary=False,
        )
        runner = CellRunner(cfg, progress=lambda m: None)
        shape = Shape(a.shape, a.shape)
        for task in a.tasks.split(","):
            cells = [Cell("n", task, "e2e", "torch-eager", "cpu", shape)]
            cells += [Cell("n", task, "e2e", b, "cpu", shape, 1, "int8") for b in a.backends.split(",")]
            runner.prepare(cells)
            by_id = runner.run_workload(cells)
            for c in cells:
                rec = by_id[c.id][0]
                acc = rec.accuracy
                if acc is None:
                    why = rec.null_reasons.get("accuracy") or rec.reason
                    print(f"{c.id}: {rec.status}, no accuracy ({why})", flush=True)
                    continue
                verdict = below_accuracy_floor(rec) or "meets its floor"
                print(
                    f"{c.id}: {acc['metric']} {acc['map50_95']:.4f} on {acc['images']} images, "
                    f"{acc['ratio']:.4f} of the fp32 reference: {verdict}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
