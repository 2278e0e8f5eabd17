"""Where a native crash happened: the Python stack that `faulthandler` prints when a process dies of a signal.

Every isolated worker enables `faulthandler` (harness.execute.worker), so a segmentation fault inside a runtime's
native code leaves the Python frames that called it in the worker's log. `parse_fault` reads them back; the
failure record gets the innermost frame (`where`), the frames (`stack`), the library whose code was running
(`in_library`) and the harness step that called it (`step`: export, load or run).
"""

from __future__ import annotations

import re
import sysconfig
from dataclasses import dataclass
from pathlib import Path

#: "Fatal Python error: Segmentation fault" (the line faulthandler prints first)
_FATAL = re.compile(r"^Fatal Python error: (?P<error>.+)$", re.MULTILINE)
#: the crashing thread's header; other threads are printed as "Thread 0x..." and are not where it crashed
_CURRENT = re.compile(r"^Current thread 0x[0-9a-f]+.*\(most recent call first\):$", re.MULTILINE)
_FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)$')
#: the harness's functions that call into a runtime, and the step each one is
_STEPS = {"export": "export", "load": "load", "prepare": "load", "run": "run", "synchronize": "run"}
_REPO = Path(__file__).resolve().parents[2]
_STDLIB = Path(sysconfig.get_paths()["stdlib"]).resolve()
MAX_FRAMES = 30
#: the project's own packages (a crash whose innermost frame is here is not a runtime's)
OWN_PACKAGES = ("harness", "tests")


@dataclass(frozen=True)
class Frame:
    module: str  # dotted module name, as far as the path tells it
    func: str
    file: str
    line: int

    @property
    def where(self) -> str:
        return f"{self.module}.{self.func}"

    @property
    def package(self) -> str:
        return self.module.split(".", 1)[0]

    def to_dict(self) -> dict:
        return {"where": self.where, "file": self.file, "line": self.line}


@dataclass(frozen=True)
class NativeFault:
    """What faulthandler printed: the fatal error and the crashing thread's frames, innermost first."""

    error: str
    frames: tuple[Frame, ...]

    @property
    def _innermost(self) -> Frame | None:
        """The innermost frame outside the standard library (whose wrappers, ctypes say, only pass the call on)."""
        return next(
            (f for f in self.frames if f.package != "<stdlib>"), self.frames[0] if self.frames else None
        )

    @property
    def where(self) -> str | None:
        """'torch.export.pt2_archive._package._load_aoti': the innermost frame outside the standard library."""
        f = self._innermost
        return f.where if f else None

    @property
    def in_library(self) -> str | None:
        """The top-level package whose code was running: 'torch' for a crash in torch's loader; 'harness' (or
        'tests') when the project's own code was."""
        f = self._innermost
        return f.package if f else None

    @property
    def step(self) -> str | None:
        """The step that called the crashing code: export, load or run (the innermost frame of the project's own
        code named like a backend's or a runner's method)."""
        for f in self.frames:
            if f.package in OWN_PACKAGES and f.func in _STEPS:
                return _STEPS[f.func]
        return None

    def summary(self) -> str:
        """One clause for the failure message: where it crashed and whose code that was."""
        if not self.frames:
            return f"({self.error}; faulthandler printed no Python frame)"
        lib = self.in_library
        called = next(
            (f.where for f in self.frames if f.package in OWN_PACKAGES and f.where != self.where), None
        )
        whose = f"{lib}'s own code" if lib not in OWN_PACKAGES else "the project's own code"
        return f"in {self.where} ({whose}{f', called from {called}' if called else ''})"

    def to_dict(self) -> dict:
        return {
            "where": self.where,
            "in_library": self.in_library,
            "step": self.step,
            "error": self.error,
            "stack": [f.to_dict() for f in self.frames[:MAX_FRAMES]],
        }


def module_of(path: str) -> str:
    """The dotted module name of a source file: after site-packages, under this repository (or a copy of it),
    or the standard library's (as '<stdlib>.name'); else the file's stem."""
    p = Path(path)
    parts = p.parts
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            rest = parts[len(parts) - parts[::-1].index(marker) :]
            return _dotted(rest)
    try:
        return _dotted(p.resolve().relative_to(_REPO).parts)
    except (ValueError, OSError):
        pass
    own = [i for i, part in enumerate(parts[:-1]) if part in OWN_PACKAGES]
    if own:  # a copy of this repository elsewhere (a log read on another machine)
        return _dotted(parts[own[-1] :])
    try:
        return "<stdlib>." + _dotted(p.resolve().relative_to(_STDLIB).parts)
    except (ValueError, OSError):
        return p.stem


def _dotted(parts: tuple[str, ...]) -> str:
    names = [*parts[:-1], Path(parts[-1]).stem] if parts else []
    if names and names[-1] == "__init__":
        names = names[:-1]
    return ".".join(names) or "?"


#: what a stack printed on request (faulthandler.register, no fatal error) is recorded as
DUMPED = (
    "stack printed on request before the process was killed (faulthandler on SIGUSR1): it was still running"
)


def parse_fault(text: str) -> NativeFault | None:
    """The last fault faulthandler printed in `text` (a worker's log), or the last stack it printed on request (a
    worker killed after its timeout: where it hung); None when it printed neither."""
    fatal = list(_FATAL.finditer(text))
    if fatal:
        error, tail = fatal[-1]["error"].strip(), text[fatal[-1].end() :]
    else:
        dumps = list(_CURRENT.finditer(text))
        if not dumps:
            return None
        error, tail = DUMPED, text[dumps[-1].start() :]
    cur = _CURRENT.search(tail)
    frames: list[Frame] = []
    if cur:
        for line in tail[cur.end() :].splitlines()[1:]:
            fm = _FRAME.match(line)
            if not fm:
                if frames or line.strip():
                    break
                continue
            frames.append(Frame(module_of(fm["file"]), fm["func"], fm["file"], int(fm["line"])))
    return NativeFault(error, tuple(frames))
