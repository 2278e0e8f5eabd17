"""benchmarks/gpu_check.py on a CPU (issue 24, defect 6): its energy self-check driven with a fake NVML (the one
thing a CPU lacks) passes only when the tracker is driven as the attempt drives it (start_timed, resume, stop);
its options turn scenarios and accuracy off; its default output is outside results/."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from harness.measure.energy import EnergyTracker
from tests.test_nvml import FakeNvml, NotSupported, device

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def gpu_check(monkeypatch):
    spec = importlib.util.spec_from_file_location("gpu_check", REPO / "benchmarks" / "gpu_check.py")
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "gpu_check", mod)  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def _tracker(energy, diff_s: float = 0.0, **kw) -> EnergyTracker:
    """The difference windows are off unless asked for (they repeat the call after the timed rounds)."""
    h = device("00000000:3B:00.0", energy=energy, **kw)
    return EnergyTracker(batch=1, nvml=FakeNvml([h]), handle=h, min_window_s=0.0, idle_s=0.0, diff_s=diff_s)


def test_energy_self_check_passes_on_a_counter_that_moves(gpu_check):
    calls = []
    row = gpu_check.energy_check(
        _tracker([1_000_000, 1_250_000]), lambda: calls.append(1), lambda: None, seconds=0.2
    )
    assert row.checks == ["ok: energy > 0 over the whole window"] and not row.violated
    assert f"{len(calls)} calls" in row.note


def test_energy_self_check_is_violated_when_the_counter_did_not_move(gpu_check):
    row = gpu_check.energy_check(_tracker([1_000_000, 1_000_000]), lambda: None, lambda: None, seconds=0.1)
    assert row.violated


def test_energy_self_check_on_a_gpu_without_the_counter_is_not_supported(gpu_check):
    row = gpu_check.energy_check(_tracker(NotSupported()), lambda: None, lambda: None, seconds=0.05)
    assert row.status == "not supported" and not row.violated


def test_default_output_is_outside_the_results_folder(gpu_check, monkeypatch):
    monkeypatch.delenv("OUT", raising=False)
    out = gpu_check.default_out().resolve()
    assert not out.is_relative_to(REPO / "results")
    monkeypatch.setenv("OUT", "/tmp/device-out")
    assert gpu_check.default_out() == Path("/tmp/device-out/gpu-check")


def test_scenarios_and_accuracy_can_be_turned_off(gpu_check, tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("asserts this CPU machine's no-GPU status")
    assert (
        gpu_check.main(["--self-check-only", "--scenarios", "none", "--no-accuracy", "--out", str(tmp_path)])
        == 3
    )
    assert "no CUDA device visible to torch" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        gpu_check.main(["--scenarios", "some"])


def test_the_per_cell_memory_check_uses_the_order_on_the_h100_records(gpu_check):
    from tests.test_gpu_memory_order import BREAKS, HOLDS, h100_records

    recs = h100_records()
    for key in BREAKS:
        checks = gpu_check.memory_record_checks(
            recs[key].memory, recs[key].null_reasons, torch_allocator=True
        )
        assert any(c.startswith("VIOLATED: NVML's process peak") for c in checks), key
    for key in HOLDS:
        checks = gpu_check.memory_record_checks(
            recs[key].memory, recs[key].null_reasons, torch_allocator=True
        )
        assert "ok: torch_max_allocated_mib <= torch_max_reserved_mib" in " ".join(checks), key
        # written before the fresh-process figures existed: the context is missing, and the check says so
        assert any(c.startswith("VIOLATED: memory.device_context_mib null") for c in checks)


def test_the_per_cell_memory_check_passes_a_fresh_process_record(gpu_check):
    from harness.core.record import MIB
    from tests.test_gpu_memory_fresh import FakeGpu, measured_fresh

    rec = measured_fresh(FakeGpu(), weights=10 * MIB, activations=130 * MIB)
    checks = gpu_check.memory_record_checks(rec.memory, rec.null_reasons, torch_allocator=True)
    assert checks and all(c.startswith("ok") for c in checks), checks
