"""The C++ library an AOTInductor package runs against: what its wrapper needs, and the system libstdc++ that the
loader rung `aoti-preload-libstdcxx` preloads (harness/execute/remedies.yaml; docs/gpu.md "Where it crashes").

On the H100 (results/samples/2026-11-26-h100) every CUDA package crashed in std::regex inside its own wrapper.so,
which listed no libstdc++.so.6 among its needed libraries and defined libstdc++'s own symbols: a static copy of the
C++ library beside the process's shared one. Two copies of libstdc++ in one process crash that way elsewhere too;
the reported workaround is to put the shared one first in the global symbol scope, so the wrapper's references to
the C++ library bind to it:

- in a process that starts for the load (the probe): `LD_PRELOAD=<the system libstdc++.so.6>`;
- in a process already running (the benchmark process): LD_PRELOAD cannot act any more; `promote_global` opens the
  same library with RTLD_GLOBAL (dlopen promotes a library already loaded with RTLD_LOCAL), so a wrapper loaded after
  it resolves the C++ library's symbols there first. Not the same mechanism: the probe checks both, in two fresh
  processes, before the benchmark process loads (harness.execute.isolate.run_probe). Neither is verified on a GPU.

`elf_facts` reads an ELF shared object's needed libraries, run paths and whether it defines libstdc++'s own symbols
in pure Python (no binutils needed), and `wrapper_facts` does so for the .so files inside a .pt2 package.
"""

from __future__ import annotations

import ctypes
import os
import re
import struct
import subprocess
import zipfile
from pathlib import Path

#: the load option of the rung (harness/execute/remedies.yaml)
PRELOAD_OPTION = "aoti_preload_libstdcxx"
SONAME = "libstdc++.so.6"
#: symbols only libstdc++ itself defines (not template instantiations any C++ library carries): std::locale's
#: members, std::codecvt's (explicitly instantiated in libstdc++), std::ios_base::Init
LIBSTDCXX_MARKS = ("_ZNSt6locale", "_ZNKSt7codecvt", "_ZNSt8ios_base4Init")

PT_LOAD, PT_DYNAMIC = 1, 2
DT_NEEDED, DT_STRTAB, DT_SONAME, DT_RPATH, DT_RUNPATH = 1, 5, 14, 15, 29
SHT_DYNSYM = 11


class NotElf(ValueError):
    """The bytes are not a 64-bit little-endian ELF file (the only kind the GPU machines run)."""


def _cstr(data: bytes, off: int) -> str:
    end = data.find(b"\0", off)
    return data[off : end if end >= 0 else len(data)].decode("utf-8", "replace")


def elf_facts(data: bytes) -> dict:
    """{needed, runpath, rpath, soname, defines_libstdcxx (which of LIBSTDCXX_MARKS it defines), links_libstdcxx}
    of an ELF64 little-endian shared object; NotElf otherwise."""
    if data[:4] != b"\x7fELF":
        raise NotElf("no ELF magic")
    if data[4] != 2 or data[5] != 1:
        raise NotElf(f"ELF class {data[4]}, data {data[5]}: only 64-bit little-endian is read")
    phoff, shoff = struct.unpack_from("<QQ", data, 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", data, 0x36)
    loads, dynamic = [], None
    for i in range(phnum):
        p_type, _flags, p_offset, p_vaddr, _paddr, p_filesz = struct.unpack_from(
            "<IIQQQQ", data, phoff + i * phentsize
        )
        if p_type == PT_LOAD:
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == PT_DYNAMIC:
            dynamic = (p_offset, p_filesz)

    def file_offset(vaddr: int) -> int:
        for v, o, size in loads:
            if v <= vaddr < v + size:
                return vaddr - v + o
        return vaddr  # an unmapped address: take it as a file offset (prelinked at 0)

    entries: list[tuple[int, int]] = []
    if dynamic is not None:
        off, size = dynamic
        for pos in range(off, off + size, 16):
            tag, val = struct.unpack_from("<qQ", data, pos)
            if tag == 0:
                break
            entries.append((tag, val))
    strtab = next((file_offset(v) for t, v in entries if t == DT_STRTAB), None)

    def names(tag: int) -> list[str]:
        return [_cstr(data, strtab + v) for t, v in entries if t == tag] if strtab is not None else []

    facts: dict = {
        "needed": names(DT_NEEDED),
        "runpath": names(DT_RUNPATH),
        "rpath": names(DT_RPATH),
        "soname": next(iter(names(DT_SONAME)), None),
    }
    defined: set[str] = set()
    for i in range(shnum):
        base = shoff + i * shentsize
        sh_type = struct.unpack_from("<I", data, base + 4)[0]
        if sh_type != SHT_DYNSYM:
            continue
        sh_offset, sh_size, sh_link = struct.unpack_from("<QQI", data, base + 0x18)
        sh_entsize = struct.unpack_from("<Q", data, base + 0x38)[0] or 24
        str_base = shoff + sh_link * shentsize
        str_off = struct.unpack_from("<Q", data, str_base + 0x18)[0]
        for pos in range(sh_offset, sh_offset + sh_size, sh_entsize):
            st_name, _info, _other, st_shndx = struct.unpack_from("<IBBH", data, pos)
            if st_shndx == 0 or st_name == 0:
                continue  # undefined: it needs the symbol from elsewhere
            name = _cstr(data, str_off + st_name)
            for mark in LIBSTDCXX_MARKS:
                if name.startswith(mark):
                    defined.add(mark)
    facts["defines_libstdcxx"] = sorted(defined)
    facts["links_libstdcxx"] = any(n.startswith("libstdc++") for n in facts["needed"])
    return facts


def so_facts(path: Path | str) -> dict:
    """`elf_facts` of a file, with its name and size."""
    p = Path(path)
    return {"so": p.name, "bytes": p.stat().st_size, **elf_facts(p.read_bytes())}


def wrapper_facts(package: Path | str) -> dict:
    """`elf_facts` of the wrapper .so inside an AOTInductor .pt2 package (the member whose name has "wrapper", else
    the largest .so), with every .so member's name; `{"so": None, "reason": ...}` when it holds none or is not a
    zip."""
    try:
        with zipfile.ZipFile(package) as z:
            sos = [i for i in z.infolist() if i.filename.endswith(".so")]
            if not sos:
                return {"so": None, "reason": f"no .so in {Path(package).name}"}
            pick = next((i for i in sos if "wrapper" in Path(i.filename).name), None) or max(
                sos, key=lambda i: i.file_size
            )
            data = z.read(pick)
    except (OSError, zipfile.BadZipFile) as e:
        return {"so": None, "reason": f"{Path(package).name} is not readable as a package: {e}"}
    try:
        facts = elf_facts(data)
    except (NotElf, struct.error) as e:
        return {"so": pick.filename, "reason": f"not readable as ELF: {e}"}
    return {"so": pick.filename, "bytes": len(data), "members": sorted(i.filename for i in sos), **facts}


def from_maps(maps: str) -> str | None:
    """The libstdc++.so.6 a process has mapped, from its /proc/PID/maps text."""
    for line in maps.splitlines():
        path = line.split(None, 5)[5].strip() if len(line.split(None, 5)) == 6 else ""
        if re.search(r"/libstdc\+\+\.so\.6(\.[\d.]+)?$", path):
            return path
    return None


def from_ldconfig(text: str, machine: str = "x86-64") -> str | None:
    """The libstdc++.so.6 the dynamic linker's cache names for this machine, from `ldconfig -p`."""
    found = [
        m
        for line in text.splitlines()
        if (m := re.match(r"\s*libstdc\+\+\.so\.6 \(([^)]*)\) => (\S+)", line))
    ]
    for m in found:
        if machine in m[1]:
            return m[2]
    return found[0][2] if found else None


def system_libstdcxx(maps_path: str = "/proc/self/maps", ldconfig: str = "ldconfig") -> dict:
    """{path, found_in} of the libstdc++.so.6 to preload: the one this process runs with (its maps: torch loads it,
    and a process must not be given a second, different one), else the dynamic linker's cache (`ldconfig -p`);
    {path: None, reason} when neither names one."""
    try:
        found = from_maps(Path(maps_path).read_text())
    except OSError:
        found = None
    if found and os.path.exists(found):
        return {"path": os.path.realpath(found), "found_in": maps_path}
    for exe in (ldconfig, "/sbin/ldconfig", "/usr/sbin/ldconfig"):
        try:
            text = subprocess.run([exe, "-p"], capture_output=True, text=True, timeout=20).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        found = from_ldconfig(text)
        if found and os.path.exists(found):
            return {"path": os.path.realpath(found), "found_in": f"{exe} -p"}
    return {
        "path": None,
        "reason": f"no {SONAME} in {maps_path} nor in the dynamic linker's cache (ldconfig -p)",
    }


def preloaded(path: str, env: dict | None = None) -> bool:
    """Whether `path` is in this process's LD_PRELOAD."""
    env = os.environ if env is None else env
    real = os.path.realpath(path)
    return any(os.path.realpath(p) == real for p in re.split(r"[:\s]+", env.get("LD_PRELOAD", "")) if p)


def with_preload(env: dict, path: str) -> dict:
    """`env` with `path` first in LD_PRELOAD."""
    rest = env.get("LD_PRELOAD", "")
    return {**env, "LD_PRELOAD": path + (f":{rest}" if rest else "")}


def promote_global(path: str) -> dict:
    """Open the system libstdc++ with RTLD_GLOBAL in this running process (a library already loaded locally is
    promoted to the global scope), so a wrapper loaded after this resolves the C++ library there; say how."""
    ctypes.CDLL(path, mode=os.RTLD_GLOBAL)
    how = (
        "LD_PRELOAD when this process started (and RTLD_GLOBAL)"
        if preloaded(path)
        else "RTLD_GLOBAL in the running process (LD_PRELOAD cannot act after a process starts)"
    )
    return {"path": path, "how": how}
