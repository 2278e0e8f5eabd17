"""The isolated process: `python -m harness.execute.worker REQUEST.json`.

Two modes. `export` (default) runs one backend export. `probe` loads a fresh artifact and runs it once at one
shape, so that a runtime that aborts or segfaults on an artifact takes down this process, not the run. Either
writes RESULT.json beside the request. A crash, hang or out-of-memory kill of this process is observed by the
parent (harness.execute.isolate) and recorded.
"""

from __future__ import annotations

import importlib
import json
import logging
import sys
import time
import traceback
from pathlib import Path


def _export(payload: dict) -> dict:
    from harness import backends
    from harness.backends.base import ExportRequest

    req = ExportRequest.from_dict(payload)
    print(
        f"[worker] exporting {req.backend} {req.size}/{req.task}/{req.head} {req.height}x{req.width}"
        f"{' dynamic' if req.dynamic else ''} {req.options or ''}",
        flush=True,
    )
    result = backends.get(req.backend).export(req)
    return {"artifact": result.artifact, "info": result.info}


def _probe(payload: dict) -> dict:
    """Load the artifact and run it: once, or `rounds` times under the host memory tracker (a fresh process, so
    the figures do not depend on what an earlier cell left in the benchmark process)."""
    from harness import backends
    from harness.core.cell import Cell
    from harness.measure.host_memory import HostMemoryTracker
    from harness.yolo.inputs import letterboxed

    cell = Cell.from_dict(payload["cell"])
    h, w = payload["height"], payload["width"]
    rounds = int(payload.get("rounds") or 0)
    print(f"[worker] probe run of {payload['artifact']} at {h}x{w} ({rounds} measured rounds)", flush=True)
    backend = backends.get(cell.backend)
    backend.probe(cell.device)  # imports the runtime before the baseline: its libraries are not the cell's
    tracker = HostMemoryTracker() if rounds else None
    if tracker:
        tracker.start()
    runner = backend.load(Path(payload["artifact"]), cell, payload.get("export_info") or {})
    prepared = runner.prepare(letterboxed(h, w, cell.batch))
    for _ in range(max(1, rounds)):
        result = runner.run(prepared)
        runner.synchronize()
    out: dict = {"output_shapes": [list(o.shape) for o in runner.outputs(result)]}
    if tracker:
        tracker.stop(rounds)
        rec: dict = {}
        tracker.fill(rec)
        out["memory"], out["null_reasons"] = rec["memory"], rec.get("null_reasons", {})
    return out


def main(argv: list[str]) -> int:
    from harness.core import allocator
    from harness.core.threads import budget, set_budget

    # The run's thread budget (inherited as YOLO26_BENCH_THREADS): into OMP_NUM_THREADS before torch or ultralytics
    # is imported, and torch's threads if it already is; the backends apply it again after their own imports.
    set_budget(budget())
    allocator.apply()  # the run's heap policy (inherited as YOLO26_BENCH_MALLOC)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    req_path = Path(argv[0])
    result_path = Path(argv[1]) if len(argv) > 1 else req_path.with_name("result.json")
    payload = json.loads(req_path.read_text())
    for mod in payload.pop("imports", []):  # extra backend modules (tests register fault-injecting backends)
        importlib.import_module(mod)
    mode = payload.pop("mode", "export")
    t0 = time.perf_counter()
    try:
        out = _probe(payload) if mode == "probe" else _export(payload)
    except BaseException as e:  # everything raised is data for the diagnosis
        tb = traceback.format_exc()
        print(tb, flush=True)
        result_path.write_text(
            json.dumps(
                {
                    "status": "failed",
                    "seconds": time.perf_counter() - t0,
                    "exception_type": f"{type(e).__module__}.{type(e).__qualname__}",
                    "message": str(e),
                    "traceback": tb,
                },
                default=str,
            )
        )
        return 1
    seconds = time.perf_counter() - t0
    result_path.write_text(json.dumps({"status": "ok", "seconds": seconds, **out}, default=str))
    print(f"[worker] {mode} done in {seconds:.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
