"""Send a file larger than one device command carries (a 256 MB onnxruntime-gpu wheel against 64 MiB a command) in
parts, one part per command, and put it back together there (docs/gpu.md, "A wheel in parts").

Here (the repository's root; `.parts/` is git-ignored, so a part travels only when a command carries it):

    python3 scripts/wheel_parts.py split FILE [--dest .parts] [--part-mb N|auto] [--name NAME]
    python3 scripts/wheel_parts.py plan .parts/NAME [--json]     # which part travels with which command

There (each command carries its part and the manifest, and starts with):

    python3 scripts/wheel_parts.py receive .parts/NAME [--target DIR] [--require-all]

`split` writes DIR/manifest.json (the whole file's name, size and sha256; each part's name, size and sha256) and
DIR/part-000, part-001, ... of at most --part-mb MB (`auto`: what one command carries beside the working tree that
travels with it, see `part_budget`). `receive` says which parts are present, missing or damaged; once all are
there it joins them, checks the whole file's sha256 and, for a wheel with --target, installs it there with
`pip install --no-deps --no-index --target` (a folder of its own, first on PYTHONPATH: the CPU onnxruntime the
machine has in its site-packages is shadowed, never overwritten, so the two are never installed in one site), and
checks that the module imports from the target. A second `receive` after the install only checks it again.
`join` and `status` are receive's steps alone.

Exit status: 0 done (receive: every part present and, with --target, installed; without --require-all also while
parts are still missing: the command goes on); 1 a part or the whole file is damaged, the install or its check
failed, or (--require-all) a part is missing; 2 bad arguments. Only the standard library: it runs before anything
is installed.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

MiB = 2**20
#: what one device command carries: the working tree (tracked and untracked-not-ignored files) and the carried paths
CARRY_LIMIT = 64 * MiB
#: kept free in each command beside the tree and the part (the manifest, files the tree gains meanwhile)
MARGIN = 2 * MiB
MANIFEST = "manifest.json"
#: written into --target after an install: the sha256 of the wheel installed there
INSTALLED = ".wheel_parts-installed.json"


def sha256_file(path: Path, chunk: int = 4 * MiB) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def tree_bytes(repo: Path) -> int | None:
    """The bytes of the working tree a device command carries (tracked and untracked-not-ignored files), from git;
    None outside a git checkout."""
    try:
        names = subprocess.run(
            ["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True,
            check=True,
        ).stdout.split(b"\0")
    except (OSError, subprocess.CalledProcessError):
        return None
    total = 0
    for name in filter(None, names):
        # listed but deleted in the work tree: it does not travel
        with contextlib.suppress(OSError):
            total += (repo / os.fsdecode(name)).stat().st_size
    return total


def part_budget(tree: int, limit: int = CARRY_LIMIT, margin: int = MARGIN) -> int:
    """The largest part one command can carry beside the working tree (`tree` bytes) and the margin."""
    return limit - tree - margin


def default_name(path: Path) -> str:
    """The parts folder's name: a wheel's distribution and version (onnxruntime_gpu-1.31.1), else the file name."""
    if path.suffix == ".whl":
        return "-".join(path.name.split("-")[:2])
    return path.name


def split(path: Path, dest: Path, part_bytes: int, name: str | None = None) -> dict:
    """Write the parts and the manifest into dest/NAME; return the manifest."""
    if part_bytes <= 0:
        raise ValueError(f"a part must hold at least one byte (got {part_bytes})")
    folder = dest / (name or default_name(path))
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("part-*"):  # parts of an earlier split would join into another file
        old.unlink()
    whole = hashlib.sha256()
    parts = []
    with open(path, "rb") as f:
        n = 0
        while block := f.read(part_bytes):
            whole.update(block)
            pname = f"part-{n:03d}"
            (folder / pname).write_bytes(block)
            parts.append({"name": pname, "bytes": len(block), "sha256": hashlib.sha256(block).hexdigest()})
            n += 1
    manifest = {
        "file": path.name,
        "bytes": path.stat().st_size,
        "sha256": whole.hexdigest(),
        "part_bytes": part_bytes,
        "parts": parts,
    }
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def read_manifest(folder: Path) -> dict:
    path = folder / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(f"no {MANIFEST} in {folder}: carry it with every part")
    return json.loads(path.read_text())


def status(folder: Path) -> dict:
    """Which parts are present (and whole), missing or damaged (wrong size or sha256)."""
    manifest = read_manifest(folder)
    present, missing, damaged = [], [], []
    for part in manifest["parts"]:
        p = folder / part["name"]
        if not p.is_file():
            missing.append(part["name"])
        elif p.stat().st_size != part["bytes"] or sha256_file(p) != part["sha256"]:
            damaged.append(part["name"])
        else:
            present.append(part["name"])
    return {"file": manifest["file"], "present": present, "missing": missing, "damaged": damaged}


def join(folder: Path, out: Path | None = None) -> Path:
    """Join the parts into the whole file (default: beside them) and check its sha256; raise ValueError naming
    what is missing or damaged."""
    st = status(folder)
    if st["missing"] or st["damaged"]:
        raise ValueError(f"cannot join {st['file']}: " + describe(st))
    manifest = read_manifest(folder)
    out = out or folder / manifest["file"]
    h = hashlib.sha256()
    tmp = out.with_name(out.name + ".partial")
    with open(tmp, "wb") as f:
        for part in manifest["parts"]:
            data = (folder / part["name"]).read_bytes()
            h.update(data)
            f.write(data)
    if h.hexdigest() != manifest["sha256"]:
        tmp.unlink()
        raise ValueError(
            f"{manifest['file']}: joined sha256 {h.hexdigest()} is not the manifest's {manifest['sha256']}"
        )
    tmp.replace(out)
    return out


def describe(st: dict) -> str:
    n = len(st["present"]) + len(st["missing"]) + len(st["damaged"])
    text = f"{len(st['present'])} of {n} parts present"
    if st["missing"]:
        text += f"; missing: {', '.join(st['missing'])}"
    if st["damaged"]:
        text += f"; damaged (size or sha256 not the manifest's): {', '.join(st['damaged'])}"
    return text


def wheel_module(wheel: Path) -> str | None:
    """The top-level module a wheel provides (its top_level.txt, else its first package folder)."""
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        top = [n for n in names if n.endswith(".dist-info/top_level.txt")]
        if top:
            first = z.read(top[0]).decode().split()
            if first:
                return first[0]
    pkgs = sorted(
        {n.split("/", 1)[0] for n in names if "/" in n and ".dist-info/" not in n and ".data/" not in n}
    )
    return pkgs[0] if pkgs else None


def install(wheel: Path, target: Path, python: str = sys.executable) -> dict:
    """Install the wheel alone into `target` (no dependencies, no index) and check that its module imports from
    there with `target` first on PYTHONPATH; skipped when the same wheel (sha256) is installed there already."""
    digest = sha256_file(wheel)
    marker = target / INSTALLED
    done = json.loads(marker.read_text()) if marker.is_file() else {}
    if done.get("sha256") != digest:
        cmd = [python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--no-compile"]
        cmd += ["--no-cache-dir", "--upgrade", "--target", str(target), str(wheel)]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(
                f"pip install into {target} failed ({p.returncode}): {(p.stderr or p.stdout)[-800:]}"
            )
        marker.write_text(json.dumps({"wheel": wheel.name, "sha256": digest}) + "\n")
        how = "installed"
    else:
        how = "already installed (same sha256)"
    module = wheel_module(wheel)
    facts: dict = {"wheel": wheel.name, "target": str(target), "how": how, "module": module}
    if module:
        probe = (
            "import importlib, json, sys\n"
            f"m = importlib.import_module({module!r})\n"
            "d = {'file': getattr(m, '__file__', None), 'version': getattr(m, '__version__', None)}\n"
            "get = getattr(m, 'get_available_providers', None)\n"
            "d['providers'] = get() if get else None\n"
            "print(json.dumps(d))\n"
        )
        env = dict(
            os.environ, PYTHONPATH=os.pathsep.join(filter(None, (str(target), os.environ.get("PYTHONPATH"))))
        )
        p = subprocess.run([python, "-c", probe], capture_output=True, text=True, env=env)
        if p.returncode != 0:
            raise RuntimeError(f"{module} does not import from {target}: {(p.stderr or p.stdout)[-800:]}")
        got = json.loads(p.stdout.strip().splitlines()[-1])
        facts.update(got)
        where = Path(got["file"] or "").resolve()
        if not str(where).startswith(str(target.resolve())):
            raise RuntimeError(f"{module} imports from {where}, not from {target}: another copy comes first")
    return facts


def plan(folder: Path, tree: int | None, limit: int = CARRY_LIMIT) -> list[dict]:
    """One device command per part: the paths it carries (the manifest and its part) and the MB it sends with the
    working tree; the last part's command can carry more beside it where the limit leaves room."""
    manifest = read_manifest(folder)
    rows = []
    for i, part in enumerate(manifest["parts"]):
        carried = part["bytes"] + (folder / MANIFEST).stat().st_size
        row = {
            "command": i + 1,
            "carry": [str(folder / MANIFEST), str(folder / part["name"])],
            "part_mb": round(part["bytes"] / 1e6, 1),
            "sends_mb": round(((tree or 0) + carried) / 1e6, 1) if tree is not None else None,
            "room_left_mb": round((limit - (tree or 0) - carried) / 1e6, 1) if tree is not None else None,
        }
        rows.append(row)
    return rows


def _repo_root(start: Path) -> Path:
    p = subprocess.run(
        ["git", "-C", str(start), "rev-parse", "--show-toplevel"], capture_output=True, text=True
    )
    return Path(p.stdout.strip()) if p.returncode == 0 and p.stdout.strip() else start


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/wheel_parts.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("split", help="split FILE into parts with a manifest")
    s.add_argument("file", type=Path)
    s.add_argument("--dest", type=Path, default=Path(".parts"))
    s.add_argument("--part-mb", default="auto", help="MB (10^6 bytes) per part, or auto (default)")
    s.add_argument("--name", default=None)
    p = sub.add_parser("plan", help="which part travels with which command")
    p.add_argument("folder", type=Path)
    p.add_argument("--json", action="store_true")
    for name in ("status", "join", "receive"):
        r = sub.add_parser(name)
        r.add_argument("folder", type=Path)
        if name == "join":
            r.add_argument("--out", type=Path, default=None)
        if name == "receive":
            r.add_argument(
                "--target", type=Path, default=None, help="install the joined wheel into this folder"
            )
            r.add_argument("--require-all", action="store_true", help="exit 1 while a part is missing")
            r.add_argument("--python", default=sys.executable)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "split":
            if not args.file.is_file():
                print(f"wheel_parts.py: no file {args.file}", file=sys.stderr)
                return 2
            if args.part_mb == "auto":
                tree = tree_bytes(_repo_root(Path.cwd()))
                if tree is None:
                    print(
                        "wheel_parts.py: --part-mb auto needs a git checkout (the tree's size)",
                        file=sys.stderr,
                    )
                    return 2
                part = part_budget(tree)
                print(f"working tree {tree / 1e6:.1f} MB: parts of {part / 1e6:.1f} MB fit one command")
            else:
                try:
                    part = int(float(args.part_mb) * 1e6)
                except ValueError:
                    print(
                        f"wheel_parts.py: --part-mb takes a number or auto, not {args.part_mb}",
                        file=sys.stderr,
                    )
                    return 2
            m = split(args.file, args.dest, part, args.name)
            folder = args.dest / (args.name or default_name(args.file))
            print(
                f"{m['file']}: {m['bytes'] / 1e6:.1f} MB, sha256 {m['sha256']}, {len(m['parts'])} parts in {folder}"
            )
            return 0
        if args.cmd == "plan":
            rows = plan(args.folder, tree_bytes(_repo_root(Path.cwd())))
            if args.json:
                print(json.dumps(rows, indent=1))
            else:
                for r in rows:
                    print(
                        f"command {r['command']}: carry {json.dumps(r['carry'])} ({r['part_mb']} MB; with the tree "
                        f"{r['sends_mb']} MB, {r['room_left_mb']} MB left)"
                    )
            return 0
        st = status(args.folder)
        if args.cmd == "status":
            print(f"{st['file']}: {describe(st)}")
            return 1 if st["damaged"] else 0
        if args.cmd == "join":
            out = join(args.folder, args.out)
            print(f"joined {out} (sha256 checked)")
            return 0
        # receive
        print(f"{st['file']}: {describe(st)}", flush=True)
        if st["damaged"]:
            return 1
        if st["missing"]:
            return 1 if args.require_all else 0
        whole = args.folder / st["file"]
        manifest = read_manifest(args.folder)
        if not (
            whole.is_file()
            and whole.stat().st_size == manifest["bytes"]
            and sha256_file(whole) == manifest["sha256"]
        ):
            join(args.folder)
        print(f"joined {whole} ({manifest['bytes'] / 1e6:.1f} MB, sha256 checked)", flush=True)
        if args.target is not None:
            args.target.mkdir(parents=True, exist_ok=True)
            facts = install(whole, args.target, args.python)
            print("install: " + json.dumps(facts), flush=True)
            print(
                f"PYTHONPATH={args.target.resolve()}"
                + (f":{os.environ['PYTHONPATH']}" if os.environ.get("PYTHONPATH") else "")
            )
        return 0
    except (FileNotFoundError, ValueError, RuntimeError) as e:
        print(f"wheel_parts.py: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
