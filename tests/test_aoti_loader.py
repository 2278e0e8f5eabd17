"""The AOTInductor loader rungs load a real package: plain, with the ISA check skipped, and through the direct
loader, each giving the same outputs (a two-convolution model compiled on the CPU; the real crash they work around
was on an H100, docs/gpu.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from harness.backends.aoti import load_package  # noqa: E402


@pytest.fixture(scope="module")
def toy_package(tmp_path_factory):
    import shutil

    import torch._inductor

    if not (shutil.which("c++") or shutil.which("g++") or shutil.which("gcc")):
        pytest.skip("AOTInductor needs a C++ compiler to build its shared library; none on PATH")
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.SiLU(), torch.nn.Conv2d(8, 4, 1)
    )
    model.eval()
    x = torch.rand(1, 3, 32, 32)
    path = tmp_path_factory.mktemp("aoti") / "toy.pt2"
    with torch.no_grad():
        torch._inductor.aoti_compile_and_package(torch.export.export(model, (x,)), package_path=str(path))
        want = model(x)
    return path, x, want


#: the loader's rungs: the plain load, then each AOTInductor remedy's load options in the ladder's order
RUNGS = [{}, {"aoti_vec_isa_ok": True}, {"aoti_loader": "direct"}]


#: the libstdc++ rung's load option (the native std::regex crash of the H100; it loads the same package)
PRELOAD = {"aoti_preload_libstdcxx": True}


def test_the_rungs_are_the_ladders_load_options():
    """The rungs run below are the ones the remedy ladder climbs for an AOTInductor probe that crashed or hung:
    a remedy added, dropped or given another option (one load_package would not read) fails here first."""
    from harness.execute.remedies import ladder

    climbed = [
        r.change["load_options"]
        for r in ladder()
        if "load_options" in r.change and "aoti" in r.when.get("backend", [])
    ]
    assert climbed[0] == PRELOAD  # the native crash's cheapest rung
    assert [{}, *climbed[1:]] == RUNGS
    probe_crash = {"backend": ["aoti", "aoti-cudagraph"], "class": ["crash", "timeout"], "message": "^probe"}
    assert all(
        r.when == probe_crash
        for r in ladder()
        if "load_options" in r.change and r.change["load_options"] != PRELOAD
    )  # and only after a probe crash or hang


#: the failure message of the H100's crash as the harness words it (harness.diagnosis.native_stack.summary)
H100_CRASH = (
    "probe-640x640 process killed by SIGSEGV in torch.export.pt2_archive._package._load_aoti (torch's own code, "
    "called from harness.backends.aoti.load); natively in the C++ standard library's code called from "
    "torch::aot_inductor::parse_device_str"
)


def _failed(cell, message: str, cls: str = "crash"):
    from harness.core.record import new_record

    rec = new_record("r", cell, "random-init:0")
    rec.status, rec.reason = "crashed", message
    rec.failure = {"class": cls, "stage": "run", "message": message}
    return rec


def test_the_ladder_climbs_the_preload_first_then_the_relink_for_the_native_crash_only():
    from harness.core.axes import Shape
    from harness.core.cell import Cell
    from harness.execute.ladder import climb, next_remedy

    cell = Cell("n", "detect", "e2e", "aoti", "cuda", Shape(640, 640))
    crash = _failed(cell, H100_CRASH)
    tried = []

    def attempt(a):
        tried.append((a.remedy, dict(a.export_options), dict(a.load_options)))
        return [_failed(a.cell, f"{H100_CRASH} (with LD_PRELOAD=/usr/lib/libstdc++.so.6)")], False

    climb(cell, crash, attempt)
    assert [t[0] for t in tried] == [
        "aoti-preload-libstdcxx",
        "aoti-preload-libstdcxx+aoti-shared-libstdcxx",
        "aoti-preload-libstdcxx+aoti-shared-libstdcxx+aoti-skip-isa-check",
    ]
    assert tried[0][1:] == ({}, PRELOAD)  # no new export: the same package, loaded another way
    assert tried[1][1] == {"aoti_link": "shared-libstdcxx"}
    # a crash without the native frames (or another backend's) does not get the libstdc++ rungs
    plain = next_remedy(cell, [], _failed(cell, "probe-640x640 process killed by SIGSEGV"), False)
    assert plain is not None and plain.name == "aoti-skip-isa-check"
    other = Cell("n", "detect", "e2e", "torch-eager", "cuda", Shape(640, 640))
    assert next_remedy(other, [], _failed(other, H100_CRASH), False) is None


def test_the_probe_checks_ld_preload_then_rtld_global_in_two_fresh_processes(monkeypatch, tmp_path):
    """run_probe for the rung: the first worker starts with the system libstdc++ in LD_PRELOAD and runs once, the
    second without it (RTLD_GLOBAL, as the running benchmark process will); each outcome says which one failed."""
    from harness.core.axes import Shape
    from harness.core.cell import Cell
    from harness.diagnosis.outcome import ExportOutcome
    from harness.execute import isolate

    path = isolate.system_libstdcxx()["path"]
    assert path and "libstdc++.so.6" in path
    calls = []
    results = {}

    def fake_child(
        payload,
        work_dir,
        log_path,
        timeout_s,
        memory_limit_gb=None,
        failed_status="",
        name="",
        env_extra=None,
    ):
        calls.append((name, payload["rounds"], env_extra))
        return results.get(name, ExportOutcome("ok", 0.1, info={"output_shapes": [[1]]}))

    monkeypatch.setattr(isolate, "run_child", fake_child)
    cell = Cell("n", "detect", "e2e", "aoti", "cuda", Shape(64, 64))
    info = {"load_options": PRELOAD}
    out = isolate.run_probe(cell, "x.pt2", info, 64, 64, tmp_path, tmp_path / "log", 60, rounds=3)
    (n1, r1, env1), (n2, r2, env2) = calls
    assert n1 == "probe-64x64-ld-preload" and r1 == 0 and env1["LD_PRELOAD"].split(":")[0] == path
    assert n2 == "probe-64x64" and r2 == 3 and env2 is None
    assert out.status == "ok" and out.info["preload"]["ld_preload_probe"] == "ok"
    assert out.info["preload"]["rtld_global_probe"] == "ok" and out.info["preload"]["path"] == path
    crashed = ExportOutcome(
        "crashed", None, message=H100_CRASH.replace("probe-640x640", "probe-64x64-ld-preload")
    )
    calls.clear()
    results["probe-64x64-ld-preload"] = crashed
    out = isolate.run_probe(cell, "x.pt2", info, 64, 64, tmp_path, tmp_path / "log", 60)
    assert len(calls) == 1 and out.status == "crashed" and f"with LD_PRELOAD={path}" in out.message
    assert "natively in the C++ standard library" in out.message  # the relink rung still matches it
    calls.clear()
    results.clear()
    results["probe-64x64"] = ExportOutcome("crashed", None, message=H100_CRASH.replace("640x640", "64x64"))
    out = isolate.run_probe(cell, "x.pt2", info, 64, 64, tmp_path, tmp_path / "log", 60)
    assert len(calls) == 2 and "RTLD_GLOBAL in a running process" in out.message
    assert out.info["preload"] == {
        **out.info["preload"],
        "ld_preload_probe": "ok",
        "rtld_global_probe": "crashed",
    }
    # without the option: one probe, nothing preloaded
    calls.clear()
    isolate.run_probe(cell, "x.pt2", {}, 64, 64, tmp_path, tmp_path / "log", 60)
    assert [c[2] for c in calls] == [None]


def test_the_needed_libraries_reader_agrees_with_readelf_on_real_shared_objects():
    import shutil
    import subprocess

    from harness.backends._shared.libstdcxx import so_facts, system_libstdcxx

    found = system_libstdcxx()
    assert found["found_in"] == "/proc/self/maps"  # torch is imported: the process runs with one
    libstdcxx = so_facts(found["path"])
    assert libstdcxx["soname"] == "libstdc++.so.6" and not libstdcxx["links_libstdcxx"]
    assert set(libstdcxx["defines_libstdcxx"]) == {"_ZNSt6locale", "_ZNKSt7codecvt", "_ZNSt8ios_base4Init"}
    c10 = next(Path(torch.__file__).parent.glob("lib/libc10.so"))
    facts = so_facts(c10)
    assert (
        "libstdc++.so.6" in facts["needed"] and facts["links_libstdcxx"] and facts["defines_libstdcxx"] == []
    )
    if shutil.which("readelf"):
        for so, got in ((found["path"], libstdcxx), (c10, facts)):
            dyn = subprocess.run(
                ["readelf", "-d", str(so)], capture_output=True, text=True, check=True
            ).stdout
            want = [line.split("[", 1)[1].rstrip("]") for line in dyn.splitlines() if "(NEEDED)" in line]
            assert got["needed"] == want


@pytest.mark.slow
@pytest.mark.parametrize(
    "options", [*RUNGS, PRELOAD], ids=["plain", "skip-isa", "direct", "preload-libstdcxx"]
)
def test_every_loader_rung_runs_the_same_package(toy_package, options):
    path, x, want = toy_package
    compiled = load_package(path, False, "cpu", options)
    got = compiled(x)
    got = got[0] if isinstance(got, (list, tuple)) else got
    assert torch.allclose(got, want, atol=1e-5), (got - want).abs().max()


def _needed(so) -> list[str] | None:
    """The shared object's needed libraries (readelf -d), or None without binutils."""
    import shutil
    import subprocess

    readelf = shutil.which("readelf")
    if not readelf:
        return None
    dyn = subprocess.run([readelf, "-d", str(so)], capture_output=True, text=True, check=True).stdout
    return [line.split("[", 1)[1].rstrip("]") for line in dyn.splitlines() if "(NEEDED)" in line]


@pytest.mark.slow
def test_the_shared_libstdcxx_link_builds_a_package_that_runs_the_same(toy_package, tmp_path):
    """The aoti-shared-libstdcxx rung's link (a candidate for the H100's static-libstdc++ crash, not yet run on a
    GPU): the same model compiled under it needs the shared libstdc++.so.6 and gives the same outputs."""
    import zipfile

    import torch._inductor

    from harness.backends.aoti import link_patch

    _, x, want = toy_package
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.SiLU(), torch.nn.Conv2d(8, 4, 1)
    ).eval()
    path = tmp_path / "shared.pt2"
    with torch.no_grad(), link_patch("shared-libstdcxx"):
        assert torch._inductor.config.aot_inductor.custom_op_libs == [":libstdc++.so.6"]
        torch._inductor.aoti_compile_and_package(torch.export.export(model, (x,)), package_path=str(path))
    assert not torch._inductor.config.aot_inductor.custom_op_libs  # put back after the compile
    zipfile.ZipFile(path).extractall(tmp_path / "x")
    (so,) = (tmp_path / "x").rglob("*wrapper.so")
    needed = _needed(so)
    if needed is not None:
        assert "libstdc++.so.6" in needed, needed
    got = load_package(path, False, "cpu", {})(x)
    got = got[0] if isinstance(got, (list, tuple)) else got
    assert torch.allclose(got, want, atol=1e-5), (got - want).abs().max()


def test_the_aoti_export_compiles_under_the_requested_link_and_only_then(tmp_path, monkeypatch):
    """Aoti.export applies `aoti_link` around AOTInductor's compile and records it; without the option the config
    is left alone; an unknown value is refused (torch.export of yolo26n is replaced by the toy's: the compile is
    what the option changes)."""
    import torch._inductor

    from harness.backends import aoti
    from harness.backends.base import ExportRequest

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 1)).eval()
    ep = torch.export.export(model, (torch.rand(1, 3, 8, 8),))
    monkeypatch.setattr(aoti, "export_program", lambda req, device, dtype: (ep, None))
    seen = []

    def compile_and_package(_ep, package_path):
        seen.append(list(torch._inductor.config.aot_inductor.custom_op_libs or []))
        open(package_path, "wb").close()
        return package_path

    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package", compile_and_package)

    def req(options):
        return ExportRequest(
            "aoti", "cpu", "x.pt", "n", "detect", "e2e", 8, 8, False, 1, "fp32", str(tmp_path), options
        )

    linked = aoti.Aoti().export(req({"aoti_link": "shared-libstdcxx"}))
    plain = aoti.Aoti().export(req({}))
    assert seen == [[":libstdc++.so.6"], []]
    assert linked.info["aoti_link"] == "shared-libstdcxx" and "aoti_link" not in plain.info
    with pytest.raises(ValueError, match="aoti_link: unknown 'static'"):
        aoti.Aoti().export(req({"aoti_link": "static"}))


@pytest.mark.slow
def test_the_wrapper_facts_of_a_real_package_and_the_preload_rung_through_two_probe_processes(
    toy_package, tmp_path
):
    """The toy package (compiled on this CPU): its wrapper's needed libraries read from the package, and the rung's
    two probe processes for real (LD_PRELOAD in the first, RTLD_GLOBAL in the second), each saying so in the log."""
    from harness.backends._shared.libstdcxx import wrapper_facts
    from harness.core.axes import Shape
    from harness.core.cell import Cell
    from harness.execute.isolate import run_probe

    path, _, _ = toy_package
    facts = wrapper_facts(path)
    assert facts["so"].endswith(".so") and facts["needed"] and "reason" not in facts
    assert (
        facts["links_libstdcxx"] is True and facts["defines_libstdcxx"] == []
    )  # this CPU's g++ links it shared
    cell = Cell("n", "detect", "e2e", "aoti", "cpu", Shape(32, 32))
    log = tmp_path / "probe.log"
    out = run_probe(cell, str(path), {"load_options": PRELOAD}, 32, 32, tmp_path / "w", log, 240)
    assert out.status == "ok", out.message
    assert out.info["preload"]["ld_preload_probe"] == out.info["preload"]["rtld_global_probe"] == "ok"
    text = log.read_text()
    assert (
        "probe-32x32-ld-preload in an isolated process" in text
        and "LD_PRELOAD when this process started" in text
    )
    assert "RTLD_GLOBAL in the running process" in text


@pytest.mark.slow
def test_the_upstream_reproducer_runs_on_this_cpu_and_says_so_without_a_gpu(tmp_path):
    """benchmarks/aoti_libstdcxx_repro.py, the self-contained script for upstream, rehearsed with --device cpu
    (about a minute: one toy compile): the toolchain, the wrapper's needed libraries read from the package, and
    the three loads (plain, LD_PRELOAD, RTLD_GLOBAL) each in a fresh process; --device cuda exits 3 here."""
    import json
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "aoti_libstdcxx_repro.py"
    out = tmp_path / "repro.json"
    p = subprocess.run(
        [sys.executable, str(script), "--device", "cpu", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,  # it needs no file of this repository
    )
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    got = json.loads(out.read_text())
    assert got["toolchain"]["compiler"] and "libstdc++.so" in got["toolchain"]
    # this CPU's g++ links the wrapper against the shared C++ library (the H100's carried a static copy)
    assert "libstdc++.so.6" in got["wrapper"]["needed"] and got["wrapper"]["defines_libstdcxx_symbols"] == []
    assert set(got["loads"]) == {"plain", "ld-preload", "rtld-global"}
    assert all(v["ran"] and v["max_abs_diff"] < 1e-4 for v in got["loads"].values()), got["loads"]
    if not torch.cuda.is_available():
        cuda = subprocess.run(
            [sys.executable, str(script), "--device", "cuda", "--out", str(tmp_path / "c.json")],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert cuda.returncode == 3 and "no CUDA device here" in cuda.stdout


@pytest.mark.slow
@pytest.mark.export
def test_a_cell_whose_probe_crashed_the_h100_way_climbs_to_the_preload_rung_and_its_record_says_so(tmp_path):
    """The ladder end to end on this CPU: yolo26n's AOTInductor package (a real export at 64x64); its first probe
    is made to end as the H100's did (the crash message with its native frames: the one thing a CPU cannot do),
    every other step is real. The next attempt is the rung aoti-preload-libstdcxx: the same package, no new export,
    two real probe processes (LD_PRELOAD, then RTLD_GLOBAL) and the load in this process. Its record names the rung
    and carries `loader`: the load option, how the library was preloaded, and the wrapper's needed libraries."""

    from harness.core.axes import Shape
    from harness.core.cell import Cell
    from harness.diagnosis.outcome import ExportOutcome
    from harness.execute import loading
    from harness.execute.runner import CellRunner, RunConfig
    from tests.conftest import LEAN_RUN

    real_probe = loading.run_probe
    probes = []

    def probe(cell, artifact, export_info, height, width, work_dir, log_path, *a, **kw):
        preload = bool((export_info.get("load_options") or {}).get("aoti_preload_libstdcxx"))
        probes.append(preload)
        if not preload:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            log_path.write_text("Fatal Python error: Segmentation fault (stand-in for the H100's)\n")
            message = H100_CRASH.replace("640x640", f"{height}x{width}")
            return ExportOutcome(
                "crashed", None, message=message, signal="SIGSEGV", wall_s=1.0, log=str(log_path)
            )
        return real_probe(cell, artifact, export_info, height, width, work_dir, log_path, *a, **kw)

    cfg = RunConfig(
        run_id="preload-rung",
        results_dir=tmp_path / "results",
        cache_dir=tmp_path / "cache",
        max_time_s=0.2,
        block_s=0.02,
        warmup=1,
        **LEAN_RUN,
    )
    runner = CellRunner(cfg, progress=lambda m: None)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(loading, "run_probe", probe)
        recs = runner.run_cell_all(Cell("n", "detect", "e2e", "aoti", "cpu", Shape(64, 64)))
    recs = recs if isinstance(recs, list) else [recs]
    assert [(r.status, r.remedy) for r in recs] == [("crashed", None), ("ok", "aoti-preload-libstdcxx")]
    assert probes == [False, True]
    first, rung = recs
    assert (
        first.failure["class"] == "crash"
        and "natively in the C++ standard library" in first.failure["message"]
    )
    assert rung.remedy_of == first.cell_id and rung.cell_id == f"{first.cell_id}+aoti-preload-libstdcxx"
    loader = rung.loader
    assert loader["load_options"] == PRELOAD
    lib = loader["libstdcxx"]
    assert lib["path"].startswith("/") and "libstdc++.so.6" in lib["path"]
    assert lib["ld_preload_probe"] == lib["rtld_global_probe"] == "ok"
    assert "RTLD_GLOBAL in the running process" in lib["in_this_process"]
    assert "libstdc++.so.6" in loader["wrapper"]["needed"] and loader["wrapper"]["so"].endswith(".so")
    assert rung.cache_hit is True  # the same package: nothing exported again
