"""A minimal, self-contained reproducer of AOTInductor's CUDA package crashing in std::regex at load, for upstream.

    python3 aoti_libstdcxx_repro.py [--device cuda|cpu] [--out report.json]

Needs only torch (and a C++ compiler, which AOTInductor needs anyway); no other file of this repository. It:

1. prints the toolchain: torch, CUDA, the compiler AOTInductor uses, its version, and where it finds
   libstdc++.so and libstdc++.a (`-print-file-name`; a bare name back means it finds none);
2. compiles a one-convolution model with torch._inductor.aoti_compile_and_package for --device;
3. reads the package's wrapper .so: its needed libraries (DT_NEEDED, read from the ELF file itself) and whether it
   defines libstdc++'s own symbols (std::locale, std::codecvt, std::ios_base::Init): a static copy of the C++
   library beside the process's shared libstdc++.so.6;
4. loads and runs the package in three fresh processes: plainly; with the process's libstdc++.so.6 in LD_PRELOAD;
   and with that library opened with RTLD_GLOBAL before the load (what a running process can do). Each line says
   whether it ran, or the signal that killed it.

On an H100 (torch 2.11.0+cu130, g++ 13.3, glibc 2.39; 2026-11-26) the plain load died of SIGSEGV inside std::regex,
constructed by torch::aot_inductor::parse_device_str in the package's wrapper.so, which listed no libstdc++.so.6
and defined libstdc++'s symbols. Exit status: 0 every load ran; 1 one did not; 3 --device cuda without a GPU.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import re
import struct
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

MARKS = ("_ZNSt6locale", "_ZNKSt7codecvt", "_ZNSt8ios_base4Init")
LOADS = ("plain", "ld-preload", "rtld-global")


def model_and_input(device: str):
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.SiLU()).to(device).eval()
    return model, torch.rand(1, 3, 64, 64, device=device)


def toolchain() -> dict:
    import torch

    facts: dict = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
    }
    facts["glibc"] = platform.libc_ver()[1]
    try:
        from torch._inductor import cpp_builder

        cxx = cpp_builder.get_cpp_compiler()
    except Exception as e:
        return {**facts, "compiler": None, "reason": f"{type(e).__name__}: {e}"}
    facts["compiler"] = cxx

    def run(*args: str) -> str:
        return subprocess.run([cxx, *args], capture_output=True, text=True).stdout.strip()

    facts["version"] = (run("--version").splitlines() or [""])[0]
    for lib in ("libstdc++.so", "libstdc++.a"):
        found = run(f"-print-file-name={lib}")
        facts[lib] = found if os.path.isabs(found) and os.path.exists(found) else None
    return facts


def elf_needed_and_marks(data: bytes) -> dict:
    """DT_NEEDED and which libstdc++-only symbols the ELF64 LE shared object defines (its .dynsym)."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return {"reason": "not a 64-bit little-endian ELF file"}
    phoff, shoff = struct.unpack_from("<QQ", data, 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", data, 0x36)
    loads, dyn = [], None
    for i in range(phnum):
        p_type, _, off, vaddr, _, filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
        if p_type == 1:
            loads.append((vaddr, off, filesz))
        elif p_type == 2:
            dyn = (off, filesz)
    entries = []
    if dyn:
        for pos in range(dyn[0], dyn[0] + dyn[1], 16):
            tag, val = struct.unpack_from("<qQ", data, pos)
            if tag == 0:
                break
            entries.append((tag, val))
    strtab = next((v for t, v in entries if t == 5), None)
    if strtab is not None:
        strtab = next((strtab - v + o for v, o, n in loads if v <= strtab < v + n), strtab)

    def cstr(off: int) -> str:
        return data[off : data.index(b"\0", off)].decode(errors="replace")

    needed = [cstr(strtab + v) for t, v in entries if t == 1] if strtab is not None else []
    marks = set()
    for i in range(shnum):
        base = shoff + i * shentsize
        if struct.unpack_from("<I", data, base + 4)[0] != 11:  # SHT_DYNSYM
            continue
        off, size, link = struct.unpack_from("<QQI", data, base + 0x18)
        ent = struct.unpack_from("<Q", data, base + 0x38)[0] or 24
        names_off = struct.unpack_from("<Q", data, shoff + link * shentsize + 0x18)[0]
        for pos in range(off, off + size, ent):
            name_i, _, _, shndx = struct.unpack_from("<IBBH", data, pos)
            if shndx and name_i:
                name = cstr(names_off + name_i)
                marks.update(m for m in MARKS if name.startswith(m))
    return {"needed": needed, "defines_libstdcxx_symbols": sorted(marks)}


def wrapper(package: str) -> dict:
    with zipfile.ZipFile(package) as z:
        sos = [i for i in z.infolist() if i.filename.endswith(".so")]
        if not sos:
            return {"wrapper": None}
        pick = next((i for i in sos if "wrapper" in i.filename), max(sos, key=lambda i: i.file_size))
        return {"wrapper": pick.filename, **elf_needed_and_marks(z.read(pick))}


def process_libstdcxx() -> str | None:
    """The libstdc++.so.6 this process (with torch imported) runs with."""
    for line in Path("/proc/self/maps").read_text().splitlines():
        m = re.search(r"(/\S*/libstdc\+\+\.so\.6[\d.]*)$", line)
        if m:
            return os.path.realpath(m[1])
    return None


def child_load(device: str, package: str, mode: str, lib: str) -> None:
    """One load and run, in this fresh process; prints one JSON line."""
    import torch

    if mode == "rtld-global":
        ctypes.CDLL(lib, mode=os.RTLD_GLOBAL)
    model, x = model_and_input(device)
    if device == "cuda":
        torch.zeros(1, device="cuda")  # a CUDA context before the load
    compiled = torch._inductor.aoti_load_package(package)
    y = compiled(x)
    y = y[0] if isinstance(y, (list, tuple)) else y
    with torch.no_grad():
        diff = float((y - model(x)).abs().max())
    print(json.dumps({"ran": True, "max_abs_diff": diff}), flush=True)


def main() -> int:
    if sys.argv[1:2] == ["--child"]:
        child_load(*sys.argv[2:6])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--out", type=Path, default=None, help="write the report as JSON here too")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds for each load (default 180)")
    args = ap.parse_args()
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print(f"no CUDA device here (torch {torch.__version__})")
        return 3
    report: dict = {"device": args.device, "toolchain": toolchain()}
    print("toolchain:", json.dumps(report["toolchain"]), flush=True)
    work = Path(tempfile.mkdtemp(prefix="aoti_repro."))
    package = str(work / f"conv-{args.device}.pt2")
    model, x = model_and_input(args.device)
    with torch.no_grad():
        torch._inductor.aoti_compile_and_package(torch.export.export(model, (x,)), package_path=package)
    report["wrapper"] = wrapper(package)
    print("wrapper:", json.dumps(report["wrapper"]), flush=True)
    lib = process_libstdcxx() or "libstdc++.so.6"
    report["libstdcxx"] = lib
    report["loads"] = {}
    ok = True
    for mode in LOADS:
        env = dict(os.environ)
        if mode == "ld-preload":
            env["LD_PRELOAD"] = lib + (f":{env['LD_PRELOAD']}" if env.get("LD_PRELOAD") else "")
        cmd = [sys.executable, __file__, "--child", args.device, package, mode, lib]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout)
            rc, out = p.returncode, p.stdout + p.stderr
        except subprocess.TimeoutExpired:
            rc, out = "timeout", ""
        lines = [ln for ln in out.splitlines() if ln.startswith("{")]
        if rc == 0 and lines:
            got = json.loads(lines[-1])
        else:
            ok = False
            why = f"killed by signal {-rc}" if isinstance(rc, int) and rc < 0 else f"exit {rc}"
            got = {"ran": False, "why": why, "tail": out[-1500:]}
        report["loads"][mode] = got
        print(f"load {mode}: {json.dumps({k: v for k, v in got.items() if k != 'tail'})}", flush=True)
    if args.out:
        args.out.write_text(json.dumps(report, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
