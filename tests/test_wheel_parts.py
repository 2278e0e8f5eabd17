"""A wheel larger than one device command carries, sent in parts (scripts/wheel_parts.py; docs/gpu.md "A wheel in
parts"), rehearsed on this CPU: split here, the parts arriving one command at a time there (a temp folder stands
for the device's copy of the repository), which parts are missing said at each step, joined and checked by sha256
when all are there, installed alone into a folder of its own and imported from there ahead of the copy the
machine has. The onnxruntime-gpu wheel itself (256 MB) is split and joined the same way; installing it needs
Python 3.12 (cp312), so a small real wheel stands in for the install."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "wheel_parts.py"


def _parts():
    spec = importlib.util.spec_from_file_location("wheel_parts", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(*args, cwd=None, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )


def _wheel(folder: Path, name: str = "shadowmod", version: str = "9.9", pad_mb: float = 3.0) -> Path:
    """A real wheel of a module `name` with `pad_mb` MB of incompressible data, so it splits into several parts."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{version}-py3-none-any.whl"
    files = {
        f"{name}/__init__.py": f"__version__ = '{version}'\n\ndef get_available_providers():\n    return ['FakeGPU']\n",
        f"{name}-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{name}-{version}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{name}-{version}.dist-info/top_level.txt": f"{name}\n",
    }
    record = "".join(f"{n},,\n" for n in files) + f"{name}-{version}.dist-info/RECORD,,\n"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as z:
        for n, text in files.items():
            z.writestr(n, text)
        z.writestr(f"{name}/blob.bin", os.urandom(int(pad_mb * 1e6)))
        z.writestr(f"{name}-{version}.dist-info/RECORD", record)
    return path


def test_split_sends_one_part_per_command_and_the_missing_ones_are_named(tmp_path):
    wheel = _wheel(tmp_path / "here")
    p = _run("split", wheel, "--dest", tmp_path / "parts", "--part-mb", "1")
    assert p.returncode == 0, p.stderr
    folder = tmp_path / "parts" / "shadowmod-9.9"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["sha256"] == hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert len(manifest["parts"]) == 4 and all(pt["bytes"] <= 1_000_000 for pt in manifest["parts"])
    # the plan: one command per part, each carrying the manifest and its part
    plan = json.loads(_run("plan", folder, "--json", cwd=REPO).stdout)
    assert [r["carry"][1].rsplit("/", 1)[1] for r in plan] == ["part-000", "part-001", "part-002", "part-003"]
    assert all(r["carry"][0].endswith("manifest.json") and r["sends_mb"] is not None for r in plan)
    # there: the parts arrive one command at a time; each command starts with `receive`
    there = tmp_path / "device" / ".parts" / "shadowmod-9.9"
    there.mkdir(parents=True)
    shutil.copy(folder / "manifest.json", there)
    target = tmp_path / "device" / ".kit" / "site"
    for n, part in enumerate(manifest["parts"]):
        shutil.copy(folder / part["name"], there)
        p = _run("receive", there, "--target", target)
        assert p.returncode == 0, p.stderr
        if n < 3:
            missing = ", ".join(f"part-{k:03d}" for k in range(n + 1, 4))
            assert f"{n + 1} of 4 parts present; missing: {missing}" in p.stdout
            assert not target.exists() or not any(target.iterdir())
    assert "4 of 4 parts present" in p.stdout and "sha256 checked" in p.stdout
    install = json.loads(next(line for line in p.stdout.splitlines() if line.startswith("install: "))[9:])
    assert install["how"] == "installed" and install["module"] == "shadowmod" and install["version"] == "9.9"
    assert Path(install["file"]).is_relative_to(target.resolve()) and install["providers"] == ["FakeGPU"]
    # the next command finds it installed (same sha256) and only checks it again
    again = _run("receive", there, "--target", target)
    assert again.returncode == 0 and "already installed (same sha256)" in again.stdout


def test_a_missing_or_damaged_part_is_named_and_nothing_is_joined(tmp_path):
    wheel = _wheel(tmp_path / "here", pad_mb=2.5)
    parts = _parts()
    m = parts.split(wheel, tmp_path / "parts", 1_000_000)
    folder = tmp_path / "parts" / "shadowmod-9.9"
    (folder / "part-001").unlink()
    p = _run("receive", folder, "--require-all")
    assert p.returncode == 1 and f"2 of {len(m['parts'])} parts present; missing: part-001" in p.stdout
    assert _run("receive", folder).returncode == 0  # without --require-all the command goes on
    with pytest.raises(ValueError, match="missing: part-001"):
        parts.join(folder)
    parts.split(wheel, tmp_path / "parts", 1_000_000)
    data = bytearray((folder / "part-002").read_bytes())
    data[10] ^= 0xFF
    (folder / "part-002").write_bytes(bytes(data))
    p = _run("status", folder)
    assert p.returncode == 1 and "damaged (size or sha256 not the manifest's): part-002" in p.stdout
    assert not (folder / wheel.name).exists()


def test_the_module_installed_from_parts_shadows_the_copy_already_installed(tmp_path):
    """The machine's own copy (another site, as the CPU onnxruntime is in site-packages) stays installed and
    untouched; with the target first on PYTHONPATH the installed-from-parts one imports."""
    old_site = tmp_path / "site-packages"
    old = old_site / "shadowmod"
    old.mkdir(parents=True)
    (old / "__init__.py").write_text("__version__ = '1.0'\n")
    wheel = _wheel(tmp_path / "here", pad_mb=0.1)
    parts = _parts()
    parts.split(wheel, tmp_path / "parts", 50_000)
    target = tmp_path / "target"
    env = dict(os.environ, PYTHONPATH=str(old_site))
    p = _run("receive", tmp_path / "parts" / "shadowmod-9.9", "--target", target, "--require-all", env=env)
    assert p.returncode == 0, p.stderr + p.stdout
    assert (old / "__init__.py").read_text() == "__version__ = '1.0'\n"  # never overwritten
    assert not (target / "shadowmod" / "__init__.py").read_text().startswith("__version__ = '1.0'")
    shadowed = subprocess.run(
        [sys.executable, "-c", "import shadowmod; print(shadowmod.__version__)"],
        env=dict(os.environ, PYTHONPATH=f"{target}:{old_site}"),
        capture_output=True,
        text=True,
    )
    assert shadowed.stdout.strip() == "9.9"


def test_the_onnxruntime_version_is_the_distribution_that_imports(tmp_path, monkeypatch):
    """onnxruntime and onnxruntime-gpu both provide `onnxruntime`: with the GPU one first on the path (the kit's
    install from parts), the records' library version is its version, not the CPU build's still installed."""
    from harness.core.version import library_version

    def site(name: str, dist: str, version: str) -> Path:
        s = tmp_path / name
        (s / "onnxruntime").mkdir(parents=True)
        (s / "onnxruntime" / "__init__.py").write_text("")
        info = s / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        return s

    # an onnxruntime already imported in this process (the venv's, by an earlier test) is the one that runs, so
    # library_version reads that one's distribution: the test's two sites decide only with no copy imported
    for name in [m for m in sys.modules if m == "onnxruntime" or m.startswith("onnxruntime.")]:
        monkeypatch.delitem(sys.modules, name)
    cpu, gpu = site("cpu", "onnxruntime", "1.30.0"), site("gpu", "onnxruntime-gpu", "1.31.1")
    monkeypatch.syspath_prepend(str(cpu))
    monkeypatch.syspath_prepend(str(gpu))
    importlib.invalidate_caches()
    assert library_version("onnxruntime") == "1.31.1"
    monkeypatch.syspath_prepend(str(cpu))  # now the CPU build comes first
    importlib.invalidate_caches()
    assert library_version("onnxruntime") == "1.30.0"


def test_an_imported_onnxruntime_is_the_one_whose_version_is_recorded(tmp_path, monkeypatch):
    """Once `onnxruntime` is imported, the copy in sys.modules is what runs: its distribution's version, whatever
    a site put first on the path afterwards."""
    onnxruntime = pytest.importorskip("onnxruntime")
    from importlib import metadata

    from harness.core.version import library_version

    here = Path(onnxruntime.__file__).resolve().parent.parent
    (dist,) = [
        d
        for d in metadata.distributions(path=[str(here)])
        if d.metadata["Name"] in ("onnxruntime", "onnxruntime-gpu")
    ]
    late = tmp_path / "late"
    (late / "onnxruntime").mkdir(parents=True)
    (late / "onnxruntime" / "__init__.py").write_text("")
    info = late / "onnxruntime_gpu-0.0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: onnxruntime-gpu\nVersion: 0.0.1\n")
    monkeypatch.syspath_prepend(str(late))
    importlib.invalidate_caches()
    assert library_version("onnxruntime") == dist.version != "0.0.1"


def test_auto_parts_fit_one_command_beside_the_tree():
    parts = _parts()
    tree = parts.tree_bytes(REPO)
    assert tree is not None and tree > 1_000_000
    budget = parts.part_budget(tree)
    assert budget + tree + parts.MARGIN == parts.CARRY_LIMIT
    assert parts.default_name(Path("onnxruntime_gpu-1.31.1-cp312-cp312-manylinux_2_28_x86_64.whl")) == (
        "onnxruntime_gpu-1.31.1"
    )
