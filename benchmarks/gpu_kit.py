"""The GPU kit's helpers (benchmarks/gpu_once.sh calls them; docs/gpu.md "The GPU kit").

    python benchmarks/gpu_kit.py imports scripts/gpu_wheels.txt        # every kit wheel's module imports
    python benchmarks/gpu_kit.py table CELLS.jsonl [...]                # the end-of-call table
    python benchmarks/gpu_kit.py pack-logs WORK OUT/logs.tar.gz [--records CELLS.jsonl ...] [--limit-mib 15]
    python benchmarks/gpu_kit.py sizes OUT                              # each returned file's size, and the limits
    python benchmarks/gpu_kit.py plan [ort|torch|aoti|executorch|all] [--json]   # the device commands of each plan

What comes back from the device machine is at most 8 files of at most 16 MiB each (the first GPU run's log archive
was over that and never came back). `pack-logs` keeps the log of every cell that did not end ok whole and trims the
others to their head and tail, then trims harder until the archive fits. Exit status: 0 fine; 1 a check failed
(a module did not import, a file over the limit); 2 bad arguments.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import importlib.util
import io
import json
import re
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

MiB = 2**20
#: what the device tool returns at most
MAX_FILES, MAX_FILE_BYTES = 8, 16 * MiB
#: statuses whose cell log is kept whole
OK_STATUSES = ("ok", "exported", "skipped")
_IMPORT = re.compile(r"#.*\bimport\s+([A-Za-z_][\w.]*)\s*$")


def wheel_modules(wheels_txt: Path) -> list[tuple[str, str]]:
    """(requirement, module) for each pinned wheel of scripts/gpu_wheels.txt (the module its comment names)."""
    out = []
    for line in wheels_txt.read_text().splitlines():
        req = line.split("#", 1)[0].strip()
        if not req:
            continue
        m = _IMPORT.search(line)
        if not m:
            raise ValueError(f"{wheels_txt}: no 'import MODULE' in the comment of: {req.split()[0]}")
        out.append((req.split()[0], m[1]))
    return out


def check_imports(wheels_txt: Path) -> int:
    """Import every kit wheel's module; one line each; 1 when any fails."""
    failed = 0
    for req, module in wheel_modules(wheels_txt):
        try:
            mod = importlib.import_module(module)
        except Exception as e:  # any failure to import is the finding
            failed += 1
            print(f"import {module} ({req}): FAILED: {type(e).__name__}: {e}")
            continue
        name, _, pinned = req.partition("==")
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            installed = "no distribution metadata"
        same = "" if installed == pinned else f"; installed {installed}, not the pinned {pinned}"
        print(
            f"import {module} ({req}): ok ({getattr(mod, '__file__', None) or 'a namespace package'}{same})"
        )
    return 1 if failed else 0


# -- the table -----------------------------------------------------------------------------------------------------
def _num(v, fmt: str = "{:.2f}") -> str:
    return "-" if v is None else fmt.format(v)


def table_rows(records: list[dict]) -> list[list[str]]:
    """cell, status, p50 ms, e2e p99 ms, GPU memory, energy, why not ok: one row per record."""
    rows = []
    for r in records:
        lat, e2e = r.get("latency_ms") or {}, r.get("latency_e2e_ms") or {}
        mem, energy = r.get("memory") or {}, r.get("energy") or {}
        nulls = r.get("null_reasons") or {}
        peak, reserved = mem.get("device_peak_process_mib"), mem.get("torch_max_reserved_mib")
        memory = (
            "-" if peak is None and reserved is None else f"{_num(peak, '{:.0f}')}/{_num(reserved, '{:.0f}')}"
        )
        e2e_p99 = _num(e2e.get("p99"))
        if e2e and e2e.get("p99") is None and nulls.get("latency_e2e_ms.p99"):
            e2e_p99 = "null"
        why = r.get("reason") if r.get("status") != "ok" else None
        f = r.get("failure") or {}
        if f.get("where"):
            why = f"{why or ''} [in {f['where']}]".strip()
        rows.append(
            [
                r.get("cell_id", "?"),
                r.get("status", "?"),
                _num(lat.get("p50")),
                e2e_p99,
                memory,
                _num(energy.get("per_inference_j"), "{:.3f}"),
                (why or "")[:140],
            ]
        )
    return rows


def print_table(records: list[dict], out=sys.stdout) -> None:
    head = ["cell", "status", "p50 ms", "e2e p99", "GPU MiB peak/reserved", "J/inf", "why not ok"]
    rows = table_rows(records)
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=False)]
    for row in [head, *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip(), file=out)


def read_records(paths: list[Path]) -> list[dict]:
    recs = []
    for p in paths:
        if p.is_file():
            recs += [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
    return recs


# -- the log archive -----------------------------------------------------------------------------------------------
def trimmed(data: bytes, keep_lines: int) -> bytes:
    """The first and last `keep_lines` lines, with a line saying how many were left out."""
    lines = data.splitlines(keepends=True)
    if len(lines) <= 2 * keep_lines:
        return data
    cut = len(lines) - 2 * keep_lines
    note = (
        f"\n[... {cut} lines left out by benchmarks/gpu_kit.py pack-logs: this cell ended ok ...]\n".encode()
    )
    return b"".join(lines[:keep_lines]) + note + b"".join(lines[-keep_lines:])


def failed_logs(records: list[dict]) -> set[str]:
    """The log paths (relative to the run directory) of the cells that did not end ok."""
    out = set()
    for r in records:
        if r.get("status") not in OK_STATUSES and r.get("log"):
            out.add(Path(r["log"]).name)
    return out


def pack_logs(work: Path, dest: Path, records: list[dict], limit: int = 15 * MiB) -> dict:
    """A tar.gz of the text logs under `work` (no artifacts, no caches): failed cells' logs whole, the others'
    head and tail, trimmed harder until the archive is under `limit`. Returns what it kept."""
    keep_whole = failed_logs(records)
    files = sorted(
        p
        for p in work.rglob("*")
        if p.is_file()
        and p.suffix in (".log", ".txt", ".json", ".jsonl")
        and "cache" not in p.relative_to(work).parts
    )
    for keep_lines in (400, 100, 20, 0):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            for p in files:
                data = p.read_bytes()
                whole = p.name in keep_whole or p.suffix in (".json", ".jsonl")
                if not whole:
                    data = trimmed(data, keep_lines) if keep_lines else data[:2000]
                info = tarfile.TarInfo(str(p.relative_to(work)))
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        if buf.tell() < limit or keep_lines == 0:
            break
    data = buf.getvalue()
    if len(data) >= limit:  # even the failed cells' logs are too big: keep their tails only
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            for p in files:
                tail = p.read_bytes()[-200_000:]
                info = tarfile.TarInfo(str(p.relative_to(work)))
                info.size = len(tail)
                tar.addfile(info, io.BytesIO(tail))
        data = buf.getvalue()
    dest.write_bytes(data)
    return {"files": len(files), "whole": sorted(keep_whole), "bytes": len(data)}


def check_sizes(out: Path) -> int:
    """Print each file under `out` with its size; 1 when a file is over 16 MiB or there are more than 8."""
    files = sorted(p for p in out.rglob("*") if p.is_file())
    bad = 0
    for p in files:
        size = p.stat().st_size
        over = size > MAX_FILE_BYTES
        bad += over
        print(
            f"  {p.relative_to(out)}  {size / MiB:.2f} MiB{'  OVER the 16 MiB a returned file may be' if over else ''}"
        )
    if len(files) > MAX_FILES:
        print(f"  {len(files)} files: more than the {MAX_FILES} that come back")
        bad += 1
    return 1 if bad else 0


# -- the plans: which device commands a 15-minute session runs -------------------------------------------------------
#: a session's device time, a cold start, and one command's limit (/work/.library/device/README.md)
SESSION_MIN, COLD_START_MIN, COMMAND_MIN = 15.0, 1.5, 10.0
#: what one command carries at most: the working tree that travels and the carried paths
CARRY_LIMIT = 64 * MiB
#: a command that only receives a part: the transfer (the tree and a part, about 64 MiB) and the check; an
#: estimate until the first GPU session measures it (the reply's wall_s against the lease's held_s)
PART_MIN = 0.5
ORT_PARTS = ".parts/onnxruntime_gpu-1.31.1"
RECEIVE = f"python3 scripts/wheel_parts.py receive {ORT_PARTS}"
KIT = [".whl", "KIT_COMMIT"]
ONCE = "benchmarks/gpu_once.sh $OUT --wheels .whl --inductor-cache .kit/inductor-cache"
#: what each plan covers, in the order sessions should take them: the seed claims (the project's subject) first
PLANS = {
    "executorch": "the ExecuTorch CUDA exports, full and backbone-only, with the compile options (call 4): the "
    "seed claims' verdicts (index_put, topk, the full model, the backbone-only remedy)",
    "aoti": "AOTInductor on CUDA past the loader's crash (call 2 without ExecuTorch: the rungs "
    "aoti-preload-libstdcxx, then aoti-shared-libstdcxx; aoti-cudagraph; the dynamic-shape probe, whose guard is "
    "the seeds' dynamic-shape claim), then the upstream reproducer (benchmarks/aoti_libstdcxx_repro.py)",
    "ort": "ONNX Runtime's CUDA provider (call 3: yolo26n/s at 640, fp32/fp16, batch 1/16, scenarios and the "
    "camera search on yolo26n); onnxruntime-gpu travels in parts, one per command, the kit with the last "
    "where both fit beside the working tree, else in a command of its own",
    "torch": "the torch backends (call 1: yolo26n and yolo26s at 640, fp32/fp16, batch 1/16: eager, CUDA graph, "
    "torch.compile, max-autotune; scenarios and the camera search on yolo26n, both mechanisms), then the energy "
    "order check by three methods (benchmarks/gpu_order_host_bound.py)",
}


def _wheel_parts():
    spec = importlib.util.spec_from_file_location("wheel_parts", REPO / "scripts" / "wheel_parts.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


def pinned_bytes(wheels_txt: Path) -> int:
    """The bytes of the wheels a list pins (each line's comment starts with its size)."""
    total = 0
    for line in wheels_txt.read_text().splitlines():
        m = re.search(r"#\s*(\d+)\s+import\b", line)
        if m and line.split("#", 1)[0].strip():
            total += int(m[1])
    return total


def ort_parts(repo: Path = REPO) -> list[dict]:
    """onnxruntime-gpu's parts: from the manifest split here (scripts/gpu_wheels.sh --parts), else as `split
    --part-mb auto` would cut the pinned wheel beside this working tree."""
    wp = _wheel_parts()
    manifest = repo / ORT_PARTS / wp.MANIFEST
    if manifest.is_file():
        return json.loads(manifest.read_text())["parts"]
    size = pinned_bytes(repo / "scripts" / "gpu_parts_wheels.txt")
    part = wp.part_budget(wp.tree_bytes(repo) or 0)
    return [{"name": f"part-{n:03d}", "bytes": min(part, size - n * part)} for n in range(-(-size // part))]


def plan_commands(name: str, repo: Path = REPO) -> list[dict]:
    """The device commands of one plan, in order: what each carries, runs, is for, and its minutes (estimates
    where no GPU session has measured them yet; the call's own --budget-s bounds it)."""

    def cmd(carry: list[str], command: str, minutes: float, what: str) -> dict:
        return {"carry": carry, "command": command, "minutes": minutes, "what": what}

    if name == "ort":
        parts = ort_parts(repo)
        run = f"{ONCE} --call 3 --budget-s 390"
        # the last part travels with the kit when both fit beside the tree, else the kit goes in a command of its own
        tree = _wheel_parts().tree_bytes(repo) or 0
        last = [f"{ORT_PARTS}/manifest.json", f"{ORT_PARTS}/{parts[-1]['name']}", *KIT]
        with_kit = tree + carried_bytes(last, repo, parts) <= CARRY_LIMIT
        out = []
        for n, part in enumerate(parts):
            carry = [f"{ORT_PARTS}/manifest.json", f"{ORT_PARTS}/{part['name']}"]
            if n == len(parts) - 1 and with_kit:
                out.append(
                    cmd([*carry, *KIT], run, 7.0, f"part {n + 1}, the kit; onnxruntime on cuda (call 3)")
                )
            elif n == 0:
                out.append(cmd(carry, f"{RECEIVE} && nvidia-smi", PART_MIN, "part 1; how long a part takes"))
            else:
                out.append(cmd(carry, RECEIVE, PART_MIN, f"part {n + 1}"))
        if not with_kit:
            out.append(
                cmd([f"{ORT_PARTS}/manifest.json", *KIT], run, 7.0, "the kit; onnxruntime on cuda (call 3)")
            )
        return out
    if name == "aoti":
        return [
            cmd(
                KIT,
                f"{ONCE} --call 2 --no-executorch --budget-s 450",
                8.0,
                "AOTInductor and its loader rungs",
            ),
            cmd(
                [],
                "python3 benchmarks/aoti_libstdcxx_repro.py --device cuda --out $OUT/aoti_repro.json",
                3.5,
                "the upstream reproducer: toolchain, wrapper's libraries, plain / LD_PRELOAD / RTLD_GLOBAL loads",
            ),
        ]
    if name == "executorch":
        return [cmd(KIT, f"{ONCE} --call 4 --budget-s 560", 10.0, "ExecuTorch CUDA full and backbone-only")]
    if name == "torch":
        return [
            cmd(KIT, f"{ONCE} --call 1 --budget-s 480", 8.5, "the torch backends, scenarios, camera search"),
            cmd(
                [],
                "PYTHONPATH=$PWD python3 benchmarks/gpu_order_host_bound.py --out $OUT",
                3.0,
                "the energy order check: the difference of two windows, 10 s windows, the 2 s net figure",
            ),
        ]
    raise ValueError(f"no plan {name!r}; plans: {', '.join(PLANS)}")


def carried_bytes(carry: list[str], repo: Path = REPO, parts: list[dict] | None = None) -> int:
    """The bytes of the carried paths: files and folders here, else (parts not split yet) the parts' sizes and
    the pinned kit wheels."""
    total = 0
    sizes = {f"{ORT_PARTS}/{p['name']}": p["bytes"] for p in parts or []}
    for c in carry:
        path = repo / c
        if path.is_dir():
            total += sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
        elif path.is_file():
            total += path.stat().st_size
        elif c in sizes:
            total += sizes[c]
        elif c == ".whl":
            total += pinned_bytes(repo / "scripts" / "gpu_wheels.txt")
    return total


def plan(name: str, repo: Path = REPO) -> dict:
    """One plan with its commands' sizes and the session's minutes: a cold start and every command."""
    commands = plan_commands(name, repo)
    tree = _wheel_parts().tree_bytes(repo) or 0
    parts = ort_parts(repo) if name == "ort" else None
    for c in commands:
        c["sends_mb"] = round((tree + carried_bytes(c["carry"], repo, parts)) / 1e6, 1)
        c["fits"] = (
            tree + carried_bytes(c["carry"], repo, parts) <= CARRY_LIMIT and c["minutes"] <= COMMAND_MIN
        )
    minutes = COLD_START_MIN + sum(c["minutes"] for c in commands)
    return {
        "plan": name,
        "covers": PLANS[name],
        "commands": commands,
        "minutes": round(minutes, 1),
        "fits": minutes <= SESSION_MIN and all(c["fits"] for c in commands),
    }


def print_plan(p: dict, out=sys.stdout) -> None:
    print(
        f"plan {p['plan']} ({p['minutes']} of {SESSION_MIN:.0f} device minutes with a {COLD_START_MIN} min cold "
        f"start{'' if p['fits'] else '; DOES NOT FIT'}): {p['covers']}",
        file=out,
    )
    for n, c in enumerate(p["commands"], 1):
        print(
            f"  {n}. [{c['minutes']} min, sends {c['sends_mb']} MB{'' if c['fits'] else ', OVER'}] carry "
            f"{json.dumps(c['carry'])}: {c['command']}  # {c['what']}",
            file=out,
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="benchmarks/gpu_kit.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("imports").add_argument("wheels_txt", type=Path)
    t = sub.add_parser("table")
    t.add_argument("records", type=Path, nargs="+")
    p = sub.add_parser("pack-logs")
    p.add_argument("work", type=Path)
    p.add_argument("dest", type=Path)
    p.add_argument("--records", type=Path, nargs="*", default=[])
    p.add_argument("--limit-mib", type=float, default=15.0)
    s = sub.add_parser("sizes")
    s.add_argument("out", type=Path)
    pl = sub.add_parser("plan")
    pl.add_argument("name", nargs="?", default="all", choices=[*PLANS, "all"])
    pl.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.cmd == "plan":
        plans = [plan(n) for n in (PLANS if args.name == "all" else [args.name])]
        if args.json:
            print(json.dumps(plans, indent=1))
        else:
            for p in plans:
                print_plan(p)
        return 0 if all(p["fits"] for p in plans) else 1
    if args.cmd == "imports":
        return check_imports(args.wheels_txt)
    if args.cmd == "table":
        print_table(read_records(args.records))
        return 0
    if args.cmd == "pack-logs":
        if not args.work.is_dir():
            print(f"gpu_kit.py pack-logs: {args.work} is not a folder", file=sys.stderr)
            return 2
        kept = pack_logs(args.work, args.dest, read_records(args.records), int(args.limit_mib * MiB))
        print(
            f"logs: {kept['files']} files, {len(kept['whole'])} failed cells' logs whole, {kept['bytes'] / MiB:.2f} MiB"
        )
        return 0
    return check_sizes(args.out)


if __name__ == "__main__":
    sys.exit(main())
