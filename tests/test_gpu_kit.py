"""The first GPU run's kit, rehearsed on a CPU (issue 24): benchmarks/gpu_once.sh end to end with the device
swapped for cpu (yolo26n at a tiny shape, torch-eager), its suite command under --collect-only giving every cuda
cell a skip with its reason, gpu_check.py --self-check-only exiting with its no-GPU status, and
scripts/gpu_wheels.sh's pins and size check (never the full download here)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ONCE = REPO / "benchmarks" / "gpu_once.sh"
WHEELS = REPO / "scripts" / "gpu_wheels.sh"


def _no_cuda() -> bool:
    import torch

    return not torch.cuda.is_available()


cpu_machine = pytest.mark.skipif(not _no_cuda(), reason="asserts this CPU machine's no-GPU outcomes")


def _env() -> dict:
    env = dict(os.environ, PYTHON=sys.executable, PYTHONPATH=str(REPO))
    env.pop("PYTEST_ADDOPTS", None)
    return env


def _tiny_wheel(folder: Path) -> Path:
    """A real (minimal) wheel, so that the kit's --no-deps install into its target folder runs."""
    folder.mkdir()
    path = folder / "gpu_once_probe-0.1-py3-none-any.whl"
    files = {
        "gpu_once_probe/__init__.py": "VERSION = '0.1'\n",
        "gpu_once_probe-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: gpu-once-probe\nVersion: 0.1\n",
        "gpu_once_probe-0.1.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in files) + "gpu_once_probe-0.1.dist-info/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
        z.writestr("gpu_once_probe-0.1.dist-info/RECORD", record)
    return path


@cpu_machine
@pytest.mark.slow
@pytest.mark.export
def test_the_kit_runs_end_to_end_on_a_cpu(tmp_path):
    out = tmp_path / "out"
    _tiny_wheel(tmp_path / "wheels")
    args = ["bash", str(ONCE), str(out), "--device-cpu", "--shape", "64", "--backends", "torch-eager"]
    args += ["--scenarios", "none", "--budget-s", "240", "--wheels", str(tmp_path / "wheels")]
    p = subprocess.run(args, env=_env(), capture_output=True, text=True, timeout=400)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    files = sorted(f.name for f in out.iterdir())
    assert len(files) <= 8
    assert {"gpu_once.log", "cells-n.jsonl", "env.json", "executorch_cuda.json", "logs.tar.gz"} <= set(files)
    log = (out / "gpu_once.log").read_text()
    assert "== install: exit 0" in log
    assert (
        "torch " in log and "idle power: not read:" in log and "NVML sees this process: not checked:" in log
    )
    assert "== self-check: exit 3" in log and "no CUDA device visible to torch" in log
    assert "self_check.json" not in files  # it could not run here: nothing pretends it did
    recs = [json.loads(line) for line in (out / "cells-n.jsonl").read_text().splitlines()]
    ran = [r for r in recs if r["cell_id"] == "yolo26n-detect-e2e-torch-eager-cpu-64x64-b1-fp32"]
    assert ran and ran[0]["status"] == "ok" and ran[0]["latency_ms"]["p50"] > 0
    assert "cells-s.jsonl" not in files  # the rehearsal runs yolo26n only
    rows = json.loads((out / "executorch_cuda.json").read_text())["rows"]
    assert [r["status"] for r in rows] == ["skipped", "skipped"]
    assert all("sees none" in r["note"] for r in rows)
    with tarfile.open(out / "logs.tar.gz") as t:
        names = t.getnames()
    assert any("gpu-once-n/logs" in n for n in names)
    assert not any(n.endswith((".pt", ".pt2", ".onnx")) for n in names)


@cpu_machine
@pytest.mark.slow
def test_the_kit_suite_command_collects_every_cuda_cell_as_a_skip_with_its_reason():
    p = subprocess.run(
        ["bash", str(ONCE), "/nonexistent", "--collect-only"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    lines = [line for line in p.stdout.splitlines() if re.match(r"yolo26[ns]-detect-e2e-\S+-cuda-", line)]
    # yolo26n and yolo26s x torch-eager, torch-compile, aoti, torch-eager-cudagraph, at 640, fp32
    assert len(lines) == 8
    assert all(": skip: no CUDA device visible to torch" in line for line in lines), lines
    # the other way: the rehearsal's cpu cells would run here
    p = subprocess.run(
        ["bash", str(ONCE), "/nonexistent", "--collect-only", "--device-cpu", "--backends", "torch-eager"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "yolo26n-detect-e2e-torch-eager-cpu-640x640-b1-fp32: runs here" in p.stdout


@cpu_machine
@pytest.mark.process
def test_gpu_check_self_check_only_exits_with_its_no_gpu_status(tmp_path):
    p = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "gpu_check.py"),
            "--self-check-only",
            "--out",
            str(tmp_path),
        ],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 3
    assert "gpu_check: cannot run: no CUDA device visible to torch" in p.stdout


@pytest.mark.process
def test_bad_kit_arguments_are_one_clear_error_line(tmp_path):
    for args, phrase in (
        ([], "usage: benchmarks/gpu_once.sh OUT"),
        ([str(tmp_path / "a"), "--bogus"], "unknown option: --bogus"),
        ([str(tmp_path / "a"), "--budget-s", "soon"], "take whole numbers"),
    ):
        p = subprocess.run(["bash", str(ONCE), *args], env=_env(), capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and phrase in p.stderr
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "old.txt").write_text("x")
    p = subprocess.run(["bash", str(ONCE), str(busy)], env=_env(), capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "is not empty" in p.stderr


# -- scripts/gpu_wheels.sh -------------------------------------------------------------------------------------------
def _pins() -> dict[str, str]:
    out = {}
    for line in (REPO / "scripts" / "gpu_wheels.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            m = re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+) --hash=sha256:([0-9a-f]{64})", line)
            assert m, f"not pinned with a sha256: {line}"
            out[m[1].lower()] = m[2]
    return out


def test_the_wheel_list_pins_what_the_gpu_machine_lacks_and_nothing_it_has():
    pins = _pins()
    assert {"ultralytics", "ultralytics-thop", "executorch", "torchao", "flatbuffers", "ruamel.yaml"} <= set(
        pins
    )
    assert pins["executorch"] == "1.2.0"  # accepts torch >= 2.11 (1.5 needs 2.13)
    # there already, or not needed where OpenCV is installed (defect 9): none of them travels
    assert not {"torch", "numpy", "opencv-python", "opencv-python-headless", "polars", "torchvision"} & set(
        pins
    )


@pytest.mark.process
def test_gpu_wheels_downloads_pinned_cp312_manylinux_wheels_with_hashes(tmp_path):
    p = subprocess.run(
        ["bash", str(WHEELS), "--dest", str(tmp_path / "w"), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    cmd = p.stdout.splitlines()[0]
    for part in (
        "pip download",
        "--no-deps",
        "--require-hashes",
        "--only-binary=:all:",
        "--python-version 3.12",
    ):
        assert part in cmd
    assert "--abi cp312" in cmd and "manylinux_2_28_x86_64" in cmd and "scripts/gpu_wheels.txt" in cmd
    assert re.search(r"repository [\d.]+ MB \+ wheels 0\.0 MB", p.stdout)


@pytest.mark.process
def test_gpu_wheels_size_check_both_ways(tmp_path):
    dest = tmp_path / "w"
    dest.mkdir()
    (dest / "big-1.0-py3-none-any.whl").write_bytes(b"\0" * 3_000_000)
    ok = subprocess.run(
        ["bash", str(WHEELS), "--dest", str(dest), "--check-only"], capture_output=True, text=True
    )
    assert ok.returncode == 0 and "wheels 3.0 MB" in ok.stdout
    repo_mb = float(re.search(r"repository ([\d.]+) MB", ok.stdout)[1])
    limit = int(repo_mb + 2)  # the repository fits, the repository plus 3 MB of wheels does not
    over = subprocess.run(
        ["bash", str(WHEELS), "--dest", str(dest), "--check-only", "--limit-mb", str(limit)],
        capture_output=True,
        text=True,
    )
    assert over.returncode == 1 and "over the limit" in over.stderr
    bad = subprocess.run(["bash", str(WHEELS), "--limit-mb", "lots"], capture_output=True, text=True)
    assert bad.returncode == 2 and "whole number" in bad.stderr


def test_the_docs_wheel_list_is_the_kit_and_fits():
    """docs/gpu.md named opencv-python-headless and polars for the GPU machine (over 100 MB together, defect 9)."""
    doc = (REPO / "docs" / "gpu.md").read_text()
    assert "scripts/gpu_wheels.sh" in doc and "benchmarks/gpu_once.sh" in doc
    assert "pip download --no-deps -d wheelhouse" not in doc
    assert not re.search(r"pip (download|install)[^\n]*(polars|opencv-python-headless)", doc)
