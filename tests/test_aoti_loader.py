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
