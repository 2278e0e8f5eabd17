"""The isolated process: `python -m harness.worker REQUEST.json`.

Two modes. `export` (default) runs one backend export. `probe` loads a fresh artifact and runs it once at one
shape, so that a runtime that aborts or segfaults on an artifact takes down this process, not the run. Either
writes RESULT.json beside the request. A crash, hang or out-of-memory kill of this process is observed by the
parent (harness.isolate) and recorded.
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
    from harness import backends
    from harness.cell import Cell
    from harness.inputs import letterboxed

    cell = Cell.from_dict(payload["cell"])
    h, w = payload["height"], payload["width"]
    print(f"[worker] probe run of {payload['artifact']} at {h}x{w}", flush=True)
    runner = backends.get(cell.backend).load(
        Path(payload["artifact"]), cell, payload.get("export_info") or {}
    )
    result = runner.run(runner.prepare(letterboxed(h, w, cell.batch)))
    runner.synchronize()
    shapes = [list(o.shape) for o in runner.outputs(result)]
    return {"output_shapes": shapes}


def main(argv: list[str]) -> int:
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
