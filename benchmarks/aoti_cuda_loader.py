"""Why AOTInductor packages crash when they load on the GPU machine, and whether linking libstdc++ dynamically helps.

    PYTHONPATH=$PWD python3 benchmarks/aoti_cuda_loader.py [--device cuda] [--out DIR] [--variants default,dynamic]

On the H100 (2026-11-26, torch 2.11.0+cu130, g++ 13.3) every CUDA package died of SIGSEGV while torch's loader
built the model: natively inside std::regex, called from torch::aot_inductor::parse_device_str in the package's
wrapper.so (results/samples/2026-11-26-h100). That wrapper.so listed no libstdc++.so.6 among its needed
libraries and defined libstdc++'s own symbols (std::codecvt<char16_t>): a static copy of the C++ library beside the
process's shared one, whose locale state the copy does not share. This script checks that reading and one remedy:

1. facts: $CXX, the compiler AOTInductor uses and its version, where it finds libstdc++.so and libstdc++.a
   (`-print-file-name`: a bare name back means it has none);
2. per variant, in a fresh process: a one-convolution model exported and compiled with AOTInductor for --device;
   the wrapper.so's needed libraries (`readelf -d`) and whether it defines libstdc++'s symbols (`nm -D`);
   - default: as torch builds it;
   - dynamic: `torch._inductor.config.aot_inductor.custom_op_libs = [":libstdc++.so.6"]`, which puts
     `-l:libstdc++.so.6` on the link line ahead of the compiler's own libstdc++ (shared or static);
3. per variant, in another fresh process: `aoti_load_package`, one call, the largest difference from eager; a
   crash prints its native frames (harness/diagnosis/native_backtrace.c, the harness's own handler) and Python's.

Prints a line per step and writes DIR/aoti_cuda_loader.json (default $OUT, else the system's temporary folder).
Exit 0 when every variant loaded and ran, 1 when one did not, 3 when --device cuda has no CUDA device.
The --device cpu rehearsal runs everything on the CPU (where the default already links libstdc++ dynamically).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

VARIANTS = {"default": None, "dynamic": [":libstdc++.so.6"]}


def toy(device: str):
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.SiLU()).to(device).eval()
    return model, torch.rand(1, 3, 64, 64, device=device)


def compile_package(device: str, variant: str, path: str) -> dict:
    import torch
    import torch._inductor

    libs = VARIANTS[variant]
    if libs:
        torch._inductor.config.aot_inductor.custom_op_libs = libs  # type: ignore[attr-defined]
    model, x = toy(device)
    t0 = time.perf_counter()
    with torch.no_grad():
        ep = torch.export.export(model, (x,))
    torch._inductor.aoti_compile_and_package(ep, package_path=path)
    return {"compile_s": round(time.perf_counter() - t0, 1), "custom_op_libs": libs}


def load_package(device: str, path: str) -> dict:
    import torch
    import torch._inductor

    model, x = toy(device)
    if device == "cuda":
        torch.zeros(1, device="cuda")  # the CUDA context exists before the load, as in the harness's probe
    t0 = time.perf_counter()
    compiled = torch._inductor.aoti_load_package(path)
    load_s = time.perf_counter() - t0
    y = compiled(x)
    with torch.no_grad():
        ref = model(x)
    return {"load_s": round(load_s, 2), "max_abs_diff": float((y - ref).abs().max())}


def wrapper_facts(package: str, work: Path) -> dict:
    """The wrapper.so's needed libraries and whether it carries libstdc++'s own code."""
    out = work / "unzipped"
    zipfile.ZipFile(package).extractall(out)
    sos = sorted(out.rglob("*wrapper.so")) or sorted(out.rglob("*.so"))
    if not sos:
        return {"wrapper_so": None, "reason": "no .so in the package"}
    so = sos[0]
    facts: dict = {"wrapper_so": so.name, "size_bytes": so.stat().st_size}
    readelf, nm = shutil.which("readelf"), shutil.which("nm")
    if readelf:
        dyn = subprocess.run([readelf, "-d", str(so)], capture_output=True, text=True).stdout
        facts["needed"] = [
            line.split("[", 1)[1].rstrip("]") for line in dyn.splitlines() if "(NEEDED)" in line
        ]
    else:
        facts["needed"] = None
        facts["needed_reason"] = "no readelf (binutils) here"
    if nm:
        syms = subprocess.run([nm, "-D", "--defined-only", str(so)], capture_output=True, text=True).stdout
        marks = ("_ZNSt6locale", "_ZNKSt7codecvt", "_ZNSt8ios_base4Init")
        facts["defines_libstdcxx_symbols"] = sorted({m for m in marks if m in syms})
    facts["links_libstdcxx_shared"] = (
        any(n.startswith("libstdc++") for n in facts["needed"]) if facts.get("needed") is not None else None
    )
    return facts


def toolchain() -> dict:
    import torch
    from torch._inductor import cpp_builder

    facts: dict = {"CXX": os.environ.get("CXX"), "torch": torch.__version__}
    try:
        cxx = cpp_builder.get_cpp_compiler()
    except Exception as e:
        return {**facts, "compiler": None, "reason": f"{type(e).__name__}: {e}"}
    facts["compiler"] = cxx
    run = lambda *a: subprocess.run([cxx, *a], capture_output=True, text=True).stdout.strip()  # noqa: E731
    facts["version"] = (run("--version").splitlines() or [""])[0]
    for lib in ("libstdc++.so", "libstdc++.a"):
        found = run(f"-print-file-name={lib}")
        facts[lib] = found if os.path.isabs(found) and os.path.exists(found) else None
    return facts


def child(args: list[str], timeout_s: float) -> tuple[int | str, str]:
    """Run this script's step in a fresh process; (exit status or 'timeout', output)."""
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))
    )
    from harness.diagnosis import native_stack

    env = native_stack.worker_env(env)
    try:
        r = subprocess.run(
            [sys.executable, __file__, *args],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout_s,
            env=env,
        )
        return r.returncode, r.stdout + r.stderr
    except subprocess.TimeoutExpired as e:
        out = "".join(
            v.decode(errors="replace") if isinstance(v, bytes) else (v or "") for v in (e.stdout, e.stderr)
        )
        return "timeout", out


def step_main(argv: list[str]) -> int:
    """`--step compile|load DEVICE VARIANT PACKAGE RESULT`: one step in this fresh process."""
    import faulthandler

    faulthandler.enable()
    from harness.diagnosis import native_stack

    native_stack.install_in_worker()
    step, device, variant, package, result = argv
    out = compile_package(device, variant, package) if step == "compile" else load_package(device, package)
    Path(result).write_text(json.dumps(out))
    return 0


def main() -> int:
    if sys.argv[1:2] == ["--step"]:
        return step_main(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--variants", default="default,dynamic")
    ap.add_argument("--out", default=os.environ.get("OUT") or tempfile.gettempdir())
    ap.add_argument("--compile-timeout", type=float, default=240)
    ap.add_argument("--load-timeout", type=float, default=90)
    args = ap.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        print(f"unknown variant(s) {unknown}; valid: {', '.join(VARIANTS)}", file=sys.stderr)
        return 2
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print(f"no CUDA device here (torch {torch.__version__}): nothing to load", file=sys.stderr)
        return 3
    from harness.diagnosis import native_stack

    report: dict = {"device": args.device, "toolchain": toolchain(), "variants": {}}
    print("toolchain:", json.dumps(report["toolchain"]), flush=True)
    lib, why = native_stack.handler_library()
    report["native_backtrace"] = str(lib) if lib else why
    work = Path(tempfile.mkdtemp(prefix="aoti_cuda_loader."))
    ok = True
    for variant in variants:
        vdir = work / variant
        vdir.mkdir()
        pkg, res = str(vdir / f"toy-{args.device}.pt2"), vdir / "result.json"
        entry: dict = {}
        rc, out = child(["--step", "compile", args.device, variant, pkg, str(res)], args.compile_timeout)
        entry["compile"] = json.loads(res.read_text()) if rc == 0 else {"status": rc, "tail": out[-1500:]}
        print(f"[{variant}] compile: {entry['compile']}", flush=True)
        if rc != 0:
            ok = False
            report["variants"][variant] = entry
            continue
        entry["wrapper"] = wrapper_facts(pkg, vdir)
        print(f"[{variant}] wrapper: {json.dumps(entry['wrapper'])}", flush=True)
        res.unlink()
        rc, out = child(["--step", "load", args.device, variant, pkg, str(res)], args.load_timeout)
        if rc == 0:
            entry["load"] = json.loads(res.read_text())
        else:
            ok = False
            stack = native_stack.parse(out)
            native = stack.to_dict() if stack else None  # demangles through c++filt: once
            entry["load"] = {
                "status": rc,
                "native": native,
                "native_summary": native_stack.summary(native) if native else None,
                "tail": out[-3000:],
            }
        shown = {k: v for k, v in entry["load"].items() if k != "tail"}
        if shown.get("native"):
            shown["native"] = {"where": shown["native"]["where"], "innermost": shown["native"]["innermost"]}
        print(f"[{variant}] load: {json.dumps(shown)}", flush=True)
        report["variants"][variant] = entry
    out_path = Path(args.out) / "aoti_cuda_loader.json"
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(report, indent=1))
    print(f"wrote {out_path}; {'every variant loaded and ran' if ok else 'a variant did not load or run'}")
    shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
