"""The native frames of a crash in an isolated worker: a handler built here, its output read back.

faulthandler (harness.diagnosis.native_fault) names the Python function that called into native code; on the H100
that was `_load_aoti` for every AOTInductor package, while the crash itself was in the package's own C++ (a
`std::regex` built by `torch::aot_inductor::parse_device_str` in `AOTInductorModel`'s constructor). The handler
in `native_backtrace.c` prints the faulting instruction and the native backtrace before faulthandler prints the
Python frames; this module builds it once with the machine's C compiler, tells each worker where it is
(`$YOLO26_BENCH_NATIVE_BACKTRACE`), installs it inside the worker, and parses what it printed.

Without a C compiler, on a platform other than Linux, or with `YOLO26_BENCH_NATIVE_BACKTRACE=0`, nothing is
built: a crash record then carries `native: null` and `native_reason` says why.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

#: set by the parent for its workers: the handler library's path ("0" in the user's environment turns it off)
ENV = "YOLO26_BENCH_NATIVE_BACKTRACE"
SOURCE = Path(__file__).with_name("native_backtrace.c")
INSTALL = "yolo26_bench_install_native_backtrace"
MAX_FRAMES = 40
BUILD_TIMEOUT_S = 60

_HEADER = re.compile(
    r"^=== native fault: signal (?P<sig>-?\d+)(?: \(code (?P<code>-?\d+)\))? at address (?P<addr>\S+)"
)
_FRAME = re.compile(r"^(?:pc:|#\d+) (?P<lib>.+?) \+(?P<off>0x[0-9a-f]+) (?P<sym>\S+?)\+0x[0-9a-f]+$")
#: an Itanium-mangled name in namespace std or __gnu_cxx (std::regex's internals, say): not where the code was
_STD = re.compile(r"^_ZN?[KVrL]*(?:St|9__gnu_cxx)")
_lock = threading.Lock()
_built: tuple[Path | None, str | None] | None = None


@dataclass(frozen=True)
class NativeFrame:
    library: str  # the shared object's path as the dynamic linker named it
    offset: int  # the address less the object's load address
    symbol: (
        str | None
    )  # the nearest exported symbol at or before the address (mangled); None when there is none

    @property
    def in_std(self) -> bool:
        return bool(self.symbol and _STD.match(self.symbol))

    def to_dict(self, names: dict[str, str]) -> dict:
        return {
            "library": self.library,
            "offset": hex(self.offset),
            "symbol": names.get(self.symbol, self.symbol) if self.symbol else None,
        }


@dataclass(frozen=True)
class NativeStack:
    """What the handler printed: the signal, the faulting address and the frames from the faulting one outward."""

    signal: int
    code: int | None
    address: str
    frames: tuple[NativeFrame, ...]

    @property
    def innermost(self) -> NativeFrame | None:
        return self.frames[0] if self.frames else None

    @property
    def where_frame(self) -> NativeFrame | None:
        """The innermost frame outside the C++ standard library's own code (std::regex's compiler, say: its symbols
        say only which template ran, and a hidden function is named after the exported one before it), else the
        innermost. A frame without a symbol counts: it is named by its library and offset."""
        return next((f for f in self.frames if not f.in_std), self.innermost)

    def to_dict(self) -> dict:
        names = demangle([f.symbol for f in self.frames[:MAX_FRAMES] if f.symbol])
        where = self.where_frame
        inner = self.innermost
        return {
            "signal": self.signal,
            "code": self.code,
            "address": self.address,
            "where": _name(where, names) if where else None,
            "library": where.library if where else None,
            "innermost": _name(inner, names) if inner else None,
            "innermost_in_std": bool(inner and inner.in_std),
            "frames": [f.to_dict(names) for f in self.frames[:MAX_FRAMES]],
        }


def _name(frame: NativeFrame, names: dict[str, str]) -> str:
    sym = names.get(frame.symbol, frame.symbol) if frame.symbol else f"+{hex(frame.offset)}"
    return f"{sym} in {Path(frame.library).name}"


def summary(native: dict) -> str:
    """One clause for the failure message from `NativeStack.to_dict()`."""
    if not native.get("where"):
        return "no native frame"
    inside = "the C++ standard library's code called from " if native.get("innermost_in_std") else ""
    return f"natively in {inside}{_short(native['where'])}"


def _short(text: str) -> str:
    """A demangled C++ name without its argument list: 'torch::aot_inductor::parse_device_str in x.so'."""
    name, _, lib = text.rpartition(" in ")
    depth, cut = 0, len(name)
    for i, ch in enumerate(name):  # the first '(' at template depth 0 starts the argument list
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            cut = i
            break
    return f"{name[:cut]} in {lib}" if lib else text


def parse(text: str) -> NativeStack | None:
    """The last native fault the handler printed in `text` (a worker's log), or None."""
    lines = text.splitlines()
    heads = [(i, m) for i, m in enumerate(map(_HEADER.match, lines)) if m]
    if not heads:
        return None
    start, head = heads[-1]
    pc: NativeFrame | None = None
    frames: list[NativeFrame] = []
    for line in lines[start + 1 :]:
        if line.startswith("=== end of native fault"):
            break
        m = _FRAME.match(line.strip())
        if not m:
            if frames:
                break
            continue
        frame = NativeFrame(m["lib"], int(m["off"], 16), None if m["sym"] == "?" else m["sym"])
        if line.startswith("pc:"):
            pc = frame
        else:
            frames.append(frame)
    return NativeStack(
        int(head["sig"]),
        int(head["code"]) if head["code"] else None,
        head["addr"],
        tuple(_from_fault(frames, pc)),
    )


def _from_fault(frames: list[NativeFrame], pc: NativeFrame | None) -> list[NativeFrame]:
    """The frames from the faulting one outward: the handler's own frames and the signal trampoline dropped."""
    if pc is not None:
        for i, f in enumerate(frames):
            if (f.library, f.offset) == (pc.library, pc.offset):
                return frames[i:]
        return [pc, *frames[2:]]  # the unwinder did not report the faulting frame as such
    # no pc line: the handler's frame, then the C library's signal trampoline, then the faulting frame
    for i, f in enumerate(frames[:4]):
        if "libc" in Path(f.library).name:
            return frames[i + 1 :]
    return frames


def demangle(symbols: list[str]) -> dict[str, str]:
    """Mangled -> demangled C++ names through `c++filt` (binutils) where it exists; {} without it."""
    todo = sorted({s for s in symbols if s.startswith("_Z")})
    tool = shutil.which("c++filt")
    if not todo or not tool:
        return {}
    try:
        out = subprocess.run(
            [tool], input="\n".join(todo), capture_output=True, text=True, timeout=20, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    got = out.stdout.splitlines()
    return dict(zip(todo, got, strict=False)) if len(got) == len(todo) else {}


def handler_library() -> tuple[Path | None, str | None]:
    """(path of the built handler, None), or (None, why there is none). Built once per machine and source; a
    build that failed is tried again on the next call (the compiler may be on PATH by then)."""
    global _built
    with _lock:
        if _built is None or (_built[0] is not None and not _built[0].is_file()):
            got = _build()
            if got[0] is None:
                return got
            _built = got
        return _built


def _build() -> tuple[Path | None, str | None]:
    if os.environ.get(ENV) == "0":
        return None, f"native backtraces turned off (${ENV}=0)"
    if not sys.platform.startswith("linux"):
        return None, f"native backtraces are built on Linux only (this is {sys.platform})"
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        return None, "no C compiler (cc, gcc or clang) to build the native backtrace handler"
    source = SOURCE.read_bytes()
    digest = hashlib.sha256(source + cc.encode()).hexdigest()[:12]
    out_dir = Path(tempfile.gettempdir()) / f"yolo26-bench-{os.getuid()}"
    lib = out_dir / f"native_backtrace-{digest}.so"
    try:
        out_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        # every worker loads what is here: a folder another user owns or may write to is not used
        st = out_dir.stat()
        if st.st_uid != os.getuid() or st.st_mode & 0o022:
            return (
                None,
                f"{out_dir} is not this user's alone: the native backtrace handler is not built there",
            )
        if lib.is_file():
            return lib, None
        tmp = out_dir / f".{lib.name}.{os.getpid()}"
        r = subprocess.run(
            [cc, "-shared", "-fPIC", "-O1", "-o", str(tmp), str(SOURCE), "-ldl"],
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
        )
        if r.returncode != 0:
            tmp.unlink(missing_ok=True)
            last = (r.stderr.strip().splitlines() or ["no output"])[-1]
            return None, f"the native backtrace handler did not build with {cc}: {last}"
        os.replace(tmp, lib)  # atomic: a worker never loads half a file
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"the native backtrace handler could not be built with {cc}: {e}"
    return lib, None


def worker_env(env: dict) -> dict:
    """`env` with the handler's path for a worker (unchanged when there is none; the parent keeps the reason)."""
    lib, _ = handler_library()
    return {**env, ENV: str(lib)} if lib else env


def install_in_worker() -> str | None:
    """Inside a worker, after faulthandler is enabled: install the handler named by the parent. Returns why it was
    not installed, or None."""
    path = os.environ.get(ENV)
    if not path or path == "0":
        return "no handler was named for this process"
    try:
        rc = getattr(ctypes.CDLL(path), INSTALL)()
    except (OSError, AttributeError) as e:
        return f"the native backtrace handler did not load: {e}"
    return None if rc == 0 else "sigaction refused the native backtrace handler"
