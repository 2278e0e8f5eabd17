"""A long export says how far it got: its phases are printed to its log and a timeout's message names the last."""

from __future__ import annotations

import os

import pytest

from harness.backends._shared.phases import last_phase, phase
from tests.test_isolation import REPO, export

pytestmark = pytest.mark.process  # starts worker processes


@pytest.fixture(autouse=True)
def _importable_tests(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH")))))


def test_phases_are_timed_and_read_back(capsys):
    seconds: dict[str, float] = {}
    with phase("torch.export", seconds):
        pass
    with phase("to_executorch", seconds):
        pass
    out = capsys.readouterr().out
    assert list(seconds) == ["torch.export", "to_executorch"] and all(v >= 0 for v in seconds.values())
    assert last_phase(out).startswith("last phase: to_executorch done in")
    assert "finished before it: torch.export done in" in last_phase(out)
    assert last_phase("[worker] exporting\nno phases here\n") is None


@pytest.mark.timing
def test_a_timeout_names_the_phase_it_was_in(tmp_path):
    outcome = export("test-phased-hang", tmp_path, timeout_s=4)
    assert outcome.status == "timeout"
    assert "last phase: compile started, not finished" in outcome.message
    assert "torch.export done in" in outcome.message


def test_autotune_setting_reads_the_backends_own_options_or_says_why_not():
    from harness.backends.executorch_cuda import autotune_setting

    class Tunes:
        @staticmethod
        def get_aoti_compile_options(specs):
            return {"max_autotune": True, "max_autotune_gemm_backends": "TRITON"}

    class Broken:
        @staticmethod
        def get_aoti_compile_options(specs):
            raise TypeError("takes 2 arguments")

    assert autotune_setting(Tunes, [])["max_autotune"] is True
    broken = autotune_setting(Broken, [])
    assert broken["max_autotune"] is None and "TypeError" in broken["max_autotune_source"]


def test_the_installed_executorch_cuda_backend_autotunes_by_default():
    pytest.importorskip("executorch.backends.cuda.cuda_backend")  # needs triton (GPU machines)
    from executorch.backends.cuda.cuda_backend import CudaBackend

    from harness.backends.executorch_cuda import autotune_setting

    got = autotune_setting(CudaBackend, [CudaBackend.generate_method_name_compile_spec("forward")])
    assert got["max_autotune"] is True
