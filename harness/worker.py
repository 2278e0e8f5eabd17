"""The isolated export process: `python -m harness.worker REQUEST.json`.

Runs one backend export and writes RESULT.json beside the request. A crash, hang or out-of-memory kill of this
process is observed by the parent (harness.isolate) and recorded; it never takes the run down.
"""

from __future__ import annotations

import importlib
import json
import logging
import sys
import time
import traceback
from pathlib import Path


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    req_path = Path(argv[0])
    result_path = req_path.with_name("result.json")
    payload = json.loads(req_path.read_text())
    for mod in payload.pop("imports", []):  # extra backend modules (tests register fault-injecting backends)
        importlib.import_module(mod)
    from harness import backends
    from harness.backends.base import ExportRequest

    req = ExportRequest.from_dict(payload)
    print(f"[worker] exporting {req.backend} {req.size}/{req.task}/{req.head} {req.height}x{req.width}", flush=True)
    t0 = time.perf_counter()
    try:
        result = backends.get(req.backend).export(req)
    except BaseException as e:  # everything the export raises is data for the diagnosis
        tb = traceback.format_exc()
        print(tb, flush=True)
        result_path.write_text(
            json.dumps(
                {
                    "status": "export_failed",
                    "export_s": time.perf_counter() - t0,
                    "exception_type": f"{type(e).__module__}.{type(e).__qualname__}",
                    "message": str(e),
                    "traceback": tb,
                },
                default=str,
            )
        )
        return 1
    export_s = time.perf_counter() - t0
    result_path.write_text(
        json.dumps(
            {"status": "ok", "export_s": export_s, "artifact": result.artifact, "info": result.info}, default=str
        )
    )
    print(f"[worker] done in {export_s:.1f}s -> {result.artifact}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
