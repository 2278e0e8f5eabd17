"""Where an ExecuTorch XNNPACK export spends its time, phase by phase, for two versions of the code, interleaved.

Each sample is one model's ExecuTorch XNNPACK exports as the export phase runs them: fp32, then int8, each in a
fresh process (as harness.execute.isolate runs them), sharing one cache directory that starts empty. The phases are
timed from outside the code under test, by wrapping the functions it calls (so the same timer reads both versions):

  start and imports      the process start, torch, ultralytics, executorch and the partitioner imported
  prepare model          the checkpoint loaded, fused, its head set for export (harness.yolo.models.prepared_model)
  torch.export           torch.export.export of the float network (and, int8, of the converted one)
  exported program read  a cached exported program loaded instead of exported (where the code has one)
  calibration set        the calibration dataset found (generated on first use)
  prepare_pt2e           the quantizer's observers inserted
  calibration            the calibration images letterboxed and run through the observed network
  convert_pt2e           the quantize/dequantize pairs put in
  lowering               executorch.exir.to_edge_transform_and_lower with the XNNPACK partitioner
  counts                 the delegation and dtype counts of the lowered graph (the export info)
  to_executorch          the program made
  serialize              its buffer made and written to the .pte

`other` is the export call's wall less its phases. Runs A B A B ...: each round runs every version once, in turn.

    .venv/bin/python benchmarks/executorch_export_phases.py --rounds 3 --size n --shape 640 \\
        A=/tmp/before B=. -o /tmp/phases.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

T_START = time.perf_counter()

DATASET_FOLDER = "dataset"  # harness.yolo.dataset.DATASET_FOLDER (imported by neither version here)
PHASES = ("start and imports", "prepare model", "torch.export", "exported program read", "calibration set",
          "prepare_pt2e", "calibration", "convert_pt2e", "lowering", "counts", "to_executorch", "serialize",
          "other")  # fmt: skip


def _instrument(events: list) -> None:
    """Wrap the functions an ExecuTorch export calls, recording (phase, seconds) of the outermost calls."""
    import functools
    import importlib

    depth = [0]

    def timed(fn, name):
        @functools.wraps(fn)
        def inner(*a, **k):
            depth[0] += 1
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                depth[0] -= 1
                if depth[0] == 0:
                    events.append((name, time.perf_counter() - t0, t0))

        return inner

    def patch(module: str, attr: str, name: str) -> None:
        try:
            mod = importlib.import_module(module)
        except ImportError:
            return
        if hasattr(mod, attr):
            setattr(mod, attr, timed(getattr(mod, attr), name))

    import torch.export

    patch("torch.export", "export", "torch.export")
    patch("torch.export", "load", "exported program read")
    patch("harness.yolo.models", "prepared_model", "prepare model")
    patch("executorch.exir", "to_edge_transform_and_lower", "lowering")
    patch("harness.backends._shared.executorch_export", "delegation_ops", "counts")
    patch("harness.backends._shared.executorch_export", "lowered_dtypes", "counts")
    patch("harness.backends._shared.calibration", "calibration_set", "calibration set")
    patch("torchao.quantization.pt2e.quantize_pt2e", "prepare_pt2e", "prepare_pt2e")
    patch("torchao.quantization.pt2e.quantize_pt2e", "convert_pt2e", "convert_pt2e")
    from executorch.exir import program as exir_program

    edge = exir_program.EdgeProgramManager
    edge.to_executorch = timed(edge.to_executorch, "to_executorch")
    et = exir_program.ExecutorchProgramManager
    prop = et.buffer
    et.buffer = property(timed(prop.fget, "serialize"))
    import pathlib

    pathlib.Path.write_bytes = timed(pathlib.Path.write_bytes, "serialize")
    torch.export = torch.export  # keep the module imported


def child(args: argparse.Namespace) -> None:
    """One export in this process; prints one JSON line: the phases' seconds and the export's wall."""
    events: list = []
    from harness.core import allocator
    from harness.threads import budget, set_budget

    set_budget(
        budget()
    )  # as the export worker starts (harness.execute.worker): the thread budget, the heap policy
    allocator.apply()
    import torch  # noqa: F401

    from harness import backends
    from harness.backends.base import ExportRequest

    backends.get("executorch-xnnpack")
    import executorch.backends.xnnpack.partition.xnnpack_partitioner
    import executorch.exir  # noqa: F401
    import torchao.quantization.pt2e.quantize_pt2e  # noqa: F401

    _instrument(events)
    imports = time.perf_counter() - T_START
    side = int(args.shape)
    req = ExportRequest(backend="executorch-xnnpack", device="cpu", checkpoint=args.checkpoint, size=args.size,
                        task="detect", head="e2e", height=side, width=side, dynamic=False, batch=1,
                        precision=args.precision, out_dir=args.out_dir)  # fmt: skip
    t0 = time.perf_counter()
    result = backends.get("executorch-xnnpack").export(req)
    wall = time.perf_counter() - t0
    phases = dict.fromkeys(PHASES, 0.0)
    phases["start and imports"] = imports
    marks = {}
    for name, seconds, at in events:
        phases[name] += seconds
        marks.setdefault(name, []).append((at, at + seconds))
    if "prepare_pt2e" in marks and "convert_pt2e" in marks:  # the observed network run over the images
        phases["calibration"] = marks["convert_pt2e"][0][0] - marks["prepare_pt2e"][0][1]
    phases["other"] = wall - sum(v for k, v in phases.items() if k not in ("start and imports", "other"))
    digest = hashlib.sha256(Path(result.artifact).read_bytes()).hexdigest()[:16]
    print(json.dumps({"phases": phases, "export_s": wall, "artifact": result.artifact, "sha256": digest,
                      "info_keys": sorted(result.info)}))  # fmt: skip


def one(repo: Path, precision: str, args, cache: Path, out: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(repo), "YOLO26_BENCH_CACHE_DIR": str(cache)}
    cmd = [sys.executable, str(Path(__file__).resolve()), "child", "--precision", precision, "--size", args.size,
           "--shape", args.shape, "--checkpoint", str(Path(args.checkpoint).resolve()), "--out-dir", str(out)]  # fmt: skip
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=1800)
    process_s = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{repo} {precision}: exit {p.returncode}\n{p.stderr[-3000:]}")
    doc = json.loads(p.stdout.strip().splitlines()[-1])
    doc["process_s"] = process_s
    return doc


def summary(samples: dict) -> dict:
    """Per version, cell and phase: the median and the range of the rounds."""
    out = {}
    for version, cells in samples.items():
        for cell, runs in cells.items():
            rows = {}
            for ph in (*PHASES, "export_s", "process_s"):
                vals = [r["phases"][ph] if ph in PHASES else r[ph] for r in runs]
                rows[ph] = {"median": round(statistics.median(vals), 2), "min": round(min(vals), 2),
                            "max": round(max(vals), 2)}  # fmt: skip
            out.setdefault(version, {})[cell] = rows
    return out


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        ap = argparse.ArgumentParser()
        for name in ("--precision", "--size", "--shape", "--checkpoint", "--out-dir"):
            ap.add_argument(name, required=True)
        child(ap.parse_args(sys.argv[2:]))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("versions", nargs="+", help="LABEL=REPO_DIR, in the order each round runs them")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", default="n")
    ap.add_argument("--shape", default="640")
    ap.add_argument("--checkpoint", default="weights/standin/yolo26n-detect.pt")
    ap.add_argument("-o", "--output", help="write every sample and the summary here (JSON)")
    args = ap.parse_args()
    versions = [v.split("=", 1) for v in args.versions]
    samples: dict = {label: {"fp32": [], "int8": []} for label, _ in versions}
    # the generated dataset, made once for every sample (by the code of this checkout; its content is seeded)
    dataset = Path(tempfile.mkdtemp(prefix="phases-data-")) / "dataset"
    code = f"from harness.yolo import dataset; dataset.generate({str(dataset)!r})"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[1])
    for r in range(args.rounds):
        for label, repo in versions:
            with tempfile.TemporaryDirectory(prefix="phases-") as tmp:
                cache = Path(tmp) / "cache"
                cache.mkdir()
                (cache / DATASET_FOLDER).symlink_to(dataset, target_is_directory=True)
                for precision in ("fp32", "int8"):  # one model's cells, as the export phase runs them
                    doc = one(Path(repo).resolve(), precision, args, cache, Path(tmp) / precision)
                    samples[label][precision].append(doc)
                    print(f"round {r + 1} {label} {precision}: {doc['sha256']} export {doc['export_s']:.1f} s, process "
                          f"{doc['process_s']:.1f} s " + json.dumps({k: round(v, 1) for k, v in
                                                                      doc["phases"].items() if v}), flush=True)  # fmt: skip
    result = {"samples": samples, "summary": summary(samples), "cpu": _cpu()}
    text = json.dumps(result, indent=1)
    if args.output:
        Path(args.output).write_text(text)
    print(json.dumps(result["summary"], indent=1))


def _cpu() -> str:
    from harness.core.envinfo import cpu_model

    return cpu_model()


if __name__ == "__main__":
    main()
