"""The AOTInductor loader rungs load a real package: plain, with the ISA check skipped, and through the direct
loader, each giving the same outputs (a two-convolution model compiled on the CPU; the real crash they work around
was on an H100, docs/gpu.md)."""

from __future__ import annotations

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


def test_the_rungs_are_the_ladders_load_options():
    """The rungs run below are the ones the remedy ladder climbs for an AOTInductor probe that crashed or hung:
    a remedy added, dropped or given another option (one load_package would not read) fails here first."""
    from harness.execute.remedies import ladder

    climbed = [
        r.change["load_options"]
        for r in ladder()
        if "load_options" in r.change and "aoti" in r.when.get("backend", [])
    ]
    assert [{}, *climbed] == RUNGS
    probe_crash = {"backend": ["aoti", "aoti-cudagraph"], "class": ["crash", "timeout"], "message": "^probe"}
    assert all(
        r.when == probe_crash for r in ladder() if "load_options" in r.change
    )  # and only after a probe crash or hang


@pytest.mark.slow
@pytest.mark.parametrize("options", RUNGS, ids=["plain", "skip-isa", "direct"])
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
