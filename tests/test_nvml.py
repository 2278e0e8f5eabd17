"""NVML: the sampler logic with an injected fake NVML (no driver here), and the real reason path on this machine.

The fake stands in only for what cannot exist on a CPU machine (NVML handles); the Sampler, PeakProbe, the PCI
matching and the energy arithmetic under test are the real code.
"""

from __future__ import annotations

import os
import threading
import time
from types import SimpleNamespace

import pytest

from harness.measure.host_memory import Sampler
from harness.measure.nvml import (
    EnergyMeter,
    NvmlUnavailable,
    gpu_env,
    gpu_snapshot,
    identity_from_properties,
    nvml_handle_for_torch_device,
    nvml_module,
    nvml_probes,
    nvml_reason,
    parse_pci_bus_id,
    process_used_bytes,
)

GiB = 2**30
PID = os.getpid()


class NotSupported(Exception):
    """Like pynvml.NVMLError_NotSupported."""

    def __str__(self) -> str:
        return "Not Supported"


class FakeNvml:
    """The part of pynvml the harness calls, over a list of fake devices.

    `used` may be a list: each memory read returns the next value (the last one repeats), so a test can script what
    the sampler sees without depending on thread timing.
    """

    NVML_CLOCK_GRAPHICS, NVML_CLOCK_SM, NVML_CLOCK_MEM = 0, 1, 2
    NVML_TEMPERATURE_GPU = 0

    def __init__(self, devices: list[dict]) -> None:
        self.devices = devices
        self.lock = threading.Lock()
        self.inits = 0

    def nvmlInit(self):
        self.inits += 1

    def nvmlDeviceGetCount(self):
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, i):
        return self.devices[i]

    def nvmlDeviceGetPciInfo(self, h):
        return SimpleNamespace(busId=h["bus_id"])

    def nvmlDeviceGetUUID(self, h):
        return h["uuid"]

    def nvmlDeviceGetMemoryInfo(self, h):
        with self.lock:
            used = h["used"]
            v = (used.pop(0) if len(used) > 1 else used[0]) if isinstance(used, list) else used
        return SimpleNamespace(used=v, total=80 * GiB, free=80 * GiB - v)

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [SimpleNamespace(pid=pid, usedGpuMemory=mem) for pid, mem in h.get("procs", [])]

    def nvmlDeviceGetGraphicsRunningProcesses(self, h):
        return [SimpleNamespace(pid=pid, usedGpuMemory=mem) for pid, mem in h.get("gfx", [])]

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        e = h["energy"]
        if isinstance(e, Exception):
            raise e
        return e.pop(0) if len(e) > 1 else e[0]

    def nvmlDeviceGetClockInfo(self, h, kind):
        return {0: 1755, 1: 1980, 2: 2619}[kind]

    def nvmlDeviceGetMaxClockInfo(self, h, kind):
        return 1980

    def nvmlDeviceGetTemperature(self, h, sensor):
        return 41

    def nvmlDeviceGetPowerUsage(self, h):
        return 72_500  # mW

    def nvmlDeviceGetPowerManagementLimit(self, h):
        raise NotSupported()

    def nvmlDeviceGetPerformanceState(self, h):
        return 0

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return 0

    def nvmlSystemGetDriverVersion(self):
        return "580.65.06"

    def nvmlSystemGetCudaDriverVersion(self):
        return 13000

    def nvmlDeviceGetName(self, h):
        return h.get("name", "NVIDIA H100 80GB HBM3")

    def nvmlDeviceGetCudaComputeCapability(self, h):
        return (9, 0)


def device(bus_id: str, **kw) -> dict:
    return {
        "bus_id": bus_id,
        "uuid": f"GPU-{bus_id[9:11].lower()}aa0000-0000-0000-0000-000000000000",
        "used": GiB,
        **kw,
    }


def three_gpus() -> FakeNvml:
    # NVML enumerates by PCI order; the torch device of interest is the last one
    return FakeNvml([device("00000000:18:00.0"), device("00000000:2A:00.0"), device("00000000:3B:00.0")])


# -- PCI mapping -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, expected",
    [
        ("00000000:3B:00.0", (0, 0x3B, 0)),
        ("0000:3b:00.0", (0, 0x3B, 0)),
        ("00000001:C1:1F.0", (1, 0xC1, 0x1F)),
        ("3B:00.0", (0, 0x3B, 0)),
        (b"00000000:AF:00.0", (0, 0xAF, 0)),
    ],
)
def test_parse_pci_bus_id_accepts_nvml_and_sysfs_forms(text, expected):
    assert parse_pci_bus_id(text) == expected


def test_parse_pci_bus_id_rejects_garbage():
    with pytest.raises(ValueError, match="not a PCI bus id"):
        parse_pci_bus_id("GPU-1234")


def test_torch_device_maps_to_the_nvml_device_with_the_same_pci_address_not_the_same_index():
    nv = three_gpus()
    # CUDA_VISIBLE_DEVICES=2: torch's cuda:0 is NVML's device 2 (bus 0x3B)
    props = SimpleNamespace(name="H100", pci_domain_id=0, pci_bus_id=0x3B, pci_device_id=0, uuid="x")
    h = nvml_handle_for_torch_device(0, nvml=nv, identity=identity_from_properties(props))
    assert h is nv.devices[2]
    props = SimpleNamespace(name="H100", pci_domain_id=0, pci_bus_id=0x18, pci_device_id=0)
    assert nvml_handle_for_torch_device(1, nvml=nv, identity=identity_from_properties(props)) is nv.devices[0]


def test_uuid_is_the_fallback_when_torch_reports_no_pci_address():
    nv = three_gpus()
    ident = identity_from_properties(
        SimpleNamespace(name="H100", uuid="2aaa0000-0000-0000-0000-000000000000")
    )
    assert "pci" not in ident
    assert nvml_handle_for_torch_device(0, nvml=nv, identity=ident) is nv.devices[1]


def test_no_matching_device_is_a_reason_naming_what_nvml_sees():
    nv = three_gpus()
    with pytest.raises(NvmlUnavailable, match=r"00000000:99:00\.0.*NVML sees 00000000:18:00\.0"):
        nvml_handle_for_torch_device(0, nvml=nv, identity={"pci": (0, 0x99, 0)})


# -- memory probes -------------------------------------------------------------------------------------------------
def test_process_probe_counts_only_this_pid():
    h = device("00000000:3B:00.0", procs=[(PID + 1, 5 * GiB), (PID, 3 * GiB), (PID + 2, 7 * GiB)])
    nv = FakeNvml([h])
    assert process_used_bytes(h, PID, nv) == 3 * GiB
    assert process_used_bytes(h, PID + 2, nv) == 7 * GiB


def test_process_probe_is_zero_without_a_context_and_none_when_the_driver_hides_it():
    nv = FakeNvml([device("00000000:3B:00.0", procs=[(PID + 1, GiB)])])
    assert process_used_bytes(nv.devices[0], PID, nv) == 0.0
    nv.devices[0]["procs"] = [(PID, None)]  # Windows WDDM
    assert process_used_bytes(nv.devices[0], PID, nv) is None


def test_a_process_listed_as_compute_and_graphics_is_not_counted_twice():
    h = device("00000000:3B:00.0", procs=[(PID, 2 * GiB)], gfx=[(PID, 2 * GiB)])
    assert process_used_bytes(h, PID, FakeNvml([h])) == 2 * GiB


def test_sampler_reports_peak_over_baseline_for_device_and_process():
    # device-wide used: baseline 10 GiB (other tenants), a 4 GiB spike, then it settles at 12 GiB
    h = device(
        "00000000:3B:00.0",
        used=[10 * GiB, 11 * GiB, 14 * GiB, 12 * GiB],
        procs=[(PID, GiB), (PID + 9, 8 * GiB)],
    )
    nv = FakeNvml([h])
    probes = nvml_probes(h, PID, nvml=nv)
    assert [p.name for p in probes] == ["device_used", "device_process"]
    s = Sampler(probes, hz=500).start()
    h["procs"] = [(PID, 3 * GiB), (PID + 9, 8 * GiB)]  # this process allocates 2 GiB
    seen, deadline = s.samples, time.monotonic() + 5
    while s.samples < seen + 3 and time.monotonic() < deadline:  # sampled at least twice while allocated
        time.sleep(0.005)
    h["procs"] = [(PID, 2 * GiB), (PID + 9, 8 * GiB)]
    s.stop()
    used, proc = s.get("device_used"), s.get("device_process")
    assert used.error is None and proc.error is None
    assert used.baseline == 10 * GiB and used.peak == 14 * GiB
    assert (used.peak - used.baseline) / GiB == 4
    assert proc.baseline == GiB and proc.peak == 3 * GiB  # the other process's 8 GiB never counts


@pytest.mark.timing
def test_nvml_probes_sample_at_100_hz_or_more():
    h = device("00000000:3B:00.0", procs=[(PID, GiB)])
    s = Sampler(nvml_probes(h, PID, nvml=FakeNvml([h])))
    assert s.hz >= 100
    t0 = time.perf_counter()
    s.start()
    time.sleep(0.5)
    s.stop()
    rate = s.samples / (time.perf_counter() - t0)
    assert rate >= 50, f"sampled at {rate:.0f} Hz"  # loose: this machine's 2 cores are shared


# -- energy, clocks ------------------------------------------------------------------------------------------------
def test_energy_meter_gives_the_counter_delta_and_energy_per_inference():
    h = device("00000000:3B:00.0", energy=[1_000_000, 1_005_000])
    m = EnergyMeter(h, nvml=FakeNvml([h]), min_window_s=0.0).start()
    assert m.stop() == 5000.0  # mJ
    assert m.per_inference_j(100) == pytest.approx(0.05)
    assert m.note is None


def test_energy_meter_flags_a_window_too_short_for_the_counter():
    h = device("00000000:3B:00.0", energy=[10, 12])
    m = EnergyMeter(h, nvml=FakeNvml([h]), min_window_s=60.0).start()
    m.stop()
    assert "shorter than 60.0 s" in m.note


def test_energy_meter_on_a_gpu_without_the_counter_says_so():
    h = device("00000000:3B:00.0", energy=NotSupported())
    with pytest.raises(NvmlUnavailable, match="energy counter not readable on this GPU: Not Supported"):
        EnergyMeter(h, nvml=FakeNvml([h])).start()


def test_snapshot_reads_clocks_and_gives_reasons_for_unsupported_fields():
    h = device("00000000:3B:00.0")
    snap = gpu_snapshot(h, nvml=FakeNvml([h]))
    assert snap["sm_clock_mhz"] == 1980 and snap["mem_clock_mhz"] == 2619 and snap["temperature_c"] == 41
    assert snap["power_w"] == pytest.approx(72.5)
    assert snap["power_limit_w"] is None and snap["null_reasons"]["power_limit_w"] == "Not Supported"


def test_gpu_env_from_nvml_alone():
    nv = three_gpus()
    env = gpu_env(nvml=nv, torch_index=None)
    assert env["available"] is True
    assert env["name"] == "NVIDIA H100 80GB HBM3" and env["compute_capability"] == "9.0"
    assert env["driver"] == "580.65.06" and env["cuda_driver"] == "13.0"
    assert env["pci_bus_id"] == "00000000:18:00.0"
    assert env["clocks_at_start"]["sm_clock_mhz"] == 1980


# -- the trackers over fake handles --------------------------------------------------------------------------------
class FakeAllocator:
    """torch.cuda's allocator statistics, which a CPU machine cannot have: peaks since the last reset."""

    def __init__(self) -> None:
        self.resets = 0
        self.allocated = self.reserved = 0

    def reset_peak_memory_stats(self):
        self.resets += 1

    def max_memory_allocated(self):
        return self.allocated

    def max_memory_reserved(self):
        return self.reserved


def _cuda_cell():
    from harness.core.axes import Shape
    from harness.core.cell import Cell

    return Cell("n", "detect", "e2e", "torch-eager", "cuda", Shape(320, 320), batch=2)


def _blank():
    """The CUDA cell's fresh record, for a tracker to fill."""
    from harness.core.record import new_record

    return new_record("r", _cuda_cell(), "random-init:0")


def _wait_for_samples(sampler, n: int = 3) -> None:
    seen, deadline = sampler.samples, time.monotonic() + 5
    while sampler.samples < seen + n and time.monotonic() < deadline:
        time.sleep(0.005)


def test_gpu_memory_tracker_fills_peaks_over_the_baseline_before_load():
    from harness.core.record import Memory
    from harness.measure.gpu_memory import GpuMemoryTracker

    # device-wide: 10 GiB before load (other tenants), a 4 GiB spike, then 12 GiB; this process: 1 -> 3 -> 2 GiB
    h = device(
        "00000000:3B:00.0",
        used=[10 * GiB, 11 * GiB, 14 * GiB, 12 * GiB],
        procs=[(PID, GiB), (PID + 9, 8 * GiB)],
    )
    alloc = FakeAllocator()
    t = GpuMemoryTracker(nvml=FakeNvml([h]), handle=h, cuda=alloc, hz=500)
    t.start()
    assert alloc.resets == 1 and t.sampler.get("device_process").baseline == GiB
    h["procs"] = [(PID, 3 * GiB), (PID + 9, 8 * GiB)]
    alloc.allocated, alloc.reserved = 1.5 * GiB, 2 * GiB
    _wait_for_samples(t.sampler)
    h["procs"] = [(PID, 2 * GiB), (PID + 9, 8 * GiB)]
    t.stop(10)
    alloc.allocated = alloc.reserved = 50 * GiB  # after stop (parity, the next cell): not this cell's figures
    rec = _blank()
    rec.memory = Memory(host_peak_rss_mib=900.0, source="kernel peak-RSS high-water mark")
    t.fill(rec)
    mem = rec.memory
    assert mem.device_peak_used_mib == 4096 and mem.device_peak_process_mib == 2048
    assert mem.torch_max_allocated_mib == 1536 and mem.torch_max_reserved_mib == 2048
    assert mem.host_peak_rss_mib == 900.0, "the host tracker's figures are kept"
    assert mem.source.startswith("kernel peak-RSS high-water mark; NVML device-wide and this process's")
    assert "peaks over the baseline before load" in mem.source
    assert "to the end of 10 timed rounds" in mem.source
    # the figures only a fresh process gives are null with the reason
    in_probe_only = {"memory.device_context_mib", "memory.device_outside_torch_mib"}
    assert {k for k in rec.null_reasons if k.startswith("memory.")} == in_probe_only
    assert rec.gpu_snapshot["sm_clock_mhz"] == 1980 and "gpu_snapshot" not in rec.null_reasons
    assert not t.sampler._thread.is_alive()


def test_gpu_memory_tracker_says_why_a_process_figure_is_missing():
    from harness.measure.gpu_memory import GpuMemoryTracker

    # a container with its own PID namespace: NVML lists the host pid, never ours
    h = device("00000000:3B:00.0", used=[GiB, 2 * GiB], procs=[(PID + 7, GiB)])
    t = GpuMemoryTracker(nvml=FakeNvml([h]), handle=h, cuda=FakeAllocator(), hz=500)
    t.start()
    t.stop(3)
    rec = _blank()
    t.fill(rec)
    assert rec.memory.device_peak_used_mib == 1024
    assert rec.memory.device_peak_process_mib is None
    assert "NVML reports host PIDs" in rec.null_reasons["memory.device_peak_process_mib"]

    h["procs"] = [(PID, None)]  # Windows WDDM
    t = GpuMemoryTracker(nvml=FakeNvml([h]), handle=h, cuda=FakeAllocator(), hz=500)
    t.start()
    t.stop(3)
    rec = _blank()
    t.fill(rec)
    assert "does not report per-process memory" in rec.null_reasons["memory.device_peak_process_mib"]


def test_gpu_memory_tracker_stops_its_thread_when_the_attempt_fails_before_stop():
    from harness.measure.gpu_memory import GpuMemoryTracker

    h = device("00000000:3B:00.0", procs=[(PID, GiB)])
    t = GpuMemoryTracker(nvml=FakeNvml([h]), handle=h, cuda=FakeAllocator(), hz=500)
    t.start()
    rec = _blank()
    t.fill(rec)  # a load failure: fill without stop
    assert not t.sampler._thread.is_alive()
    assert rec.memory.device_peak_used_mib == 0.0  # what was seen until the failure


def test_gpu_memory_tracker_without_an_nvml_match_gives_the_lookup_reason():
    from harness.measure.gpu_memory import GpuMemoryTracker

    nv = three_gpus()
    t = GpuMemoryTracker(nvml=nv, cuda=FakeAllocator())  # the real lookup: torch has no CUDA device here
    t.start()
    t.stop(1)
    rec = _blank()
    t.fill(rec)
    assert t.reason and rec.null_reasons["memory.device_peak_used_mib"] == t.reason
    assert rec.null_reasons["gpu_snapshot"] == t.reason
    assert rec.memory.torch_max_reserved_mib == 0.0  # the allocator is still read


def test_energy_tracker_counts_the_timed_rounds_only():
    from harness.measure.energy import EnergyTracker

    h = device("00000000:3B:00.0", energy=[100])
    base = {
        "power_w": 0.0,
        "settled": True,
    }  # the run's idle baseline (its reading: tests/test_energy_baseline.py)
    t = EnergyTracker(batch=2, nvml=FakeNvml([h]), handle=h, min_window_s=0.0, baseline=base, diff_s=0)
    t.start()
    h["energy"] = [1000]  # load and warm-up drew 900 mJ that must not count
    t.start_timed()
    t.resume()
    h["energy"] = [2200]  # 1200 mJ over this runner's first block of timed rounds
    t.pause()
    h["energy"] = [5000]  # another runner's block of the workload (interleaved): not counted
    t.resume()
    h["energy"] = [5800]  # 800 mJ over its second block
    t.pause()
    t.stop(4)
    h["energy"] = [99_999]  # parity and the next cell: not counted either
    rec = _blank()
    t.fill(rec)
    e = rec.energy
    assert e.per_inference_j == pytest.approx(2.0 / 8) and e.inferences == 8
    assert e.window_s is not None and e.window_s >= 0
    assert e.source.startswith("NVML total-energy counter") and "over the timed rounds" in e.source
    # the difference windows (tests/test_energy_difference.py) were off here, and the record says so
    assert rec.null_reasons == {
        "energy.diff_per_inference_j": "the difference method is off: switched off for this tracker (diff_s=0)"
    }


def test_energy_tracker_null_reasons():
    from harness.measure.energy import EnergyTracker

    h = device("00000000:3B:00.0", energy=NotSupported())
    t = EnergyTracker(nvml=FakeNvml([h]), handle=h)
    t.start()
    t.start_timed()
    t.resume()
    t.pause()
    t.stop(5)
    rec = _blank()
    t.fill(rec)
    assert rec.energy.per_inference_j is None
    assert rec.null_reasons["energy.per_inference_j"] == (
        "energy counter not readable on this GPU: Not Supported"
    )

    h["energy"] = [10, 20]
    t = EnergyTracker(nvml=FakeNvml([h]), handle=h, min_window_s=60.0)
    t.start()
    rec = _blank()
    t.stop(0)  # load failed: no timed rounds
    t.fill(rec)
    assert rec.null_reasons["energy.per_inference_j"] == "no timed rounds ran"
    t.start_timed()
    t.stop(0)  # the first timed round failed
    t.fill(rec := _blank())
    assert rec.null_reasons["energy.per_inference_j"] == "no timed round completed"
    t.start_timed()
    t.stop(2)  # rounds reported, but no block of them was metered
    t.fill(rec := _blank())
    assert rec.null_reasons["energy.per_inference_j"] == "no block of timed rounds was metered"
    h["energy"] = [10, 20]
    t.start_timed()
    t.resume()
    t.pause()
    t.stop(2)
    t.fill(rec := _blank())
    assert "shorter than 60.0 s" in rec.energy.source


# -- the real NVML of this machine (nvidia-ml-py installed, no driver) -------------------------------------------
def _real_nvml_reason() -> str | None:
    return nvml_reason()


needs_no_gpu = pytest.mark.skipif(_real_nvml_reason() is None, reason="this machine has a working NVML")


@needs_no_gpu
def test_real_nvml_unavailable_is_a_reason_not_a_crash():
    reason = nvml_reason()
    assert reason.startswith("NVML unavailable") or reason.startswith("nvidia-ml-py is not installed")
    with pytest.raises(NvmlUnavailable) as e:
        nvml_module()
    assert str(e.value) == reason
    with pytest.raises(NvmlUnavailable):
        nvml_probes(None, PID)
    with pytest.raises(NvmlUnavailable):
        nvml_handle_for_torch_device(0)
    with pytest.raises(NvmlUnavailable):
        EnergyMeter(None).start()


@needs_no_gpu
def test_real_gpu_env_says_why_there_is_no_gpu():
    env = gpu_env()
    assert env["available"] is False
    assert env["reason"] == nvml_reason()
    assert env["name"] is None and env["clocks_at_start"] is None
    assert set(env) >= {
        "driver",
        "cuda_driver",
        "cuda_runtime_torch",
        "cudnn",
        "tensorrt",
        "compute_capability",
    }


def test_a_failing_nvml_init_is_a_reason():
    class Broken(FakeNvml):
        def nvmlInit(self):
            raise RuntimeError("Driver Not Loaded")

    with pytest.raises(
        NvmlUnavailable, match=r"Driver Not Loaded \(the NVIDIA kernel driver is not loaded\)"
    ):
        nvml_module(Broken([]))
    assert nvml_reason(FakeNvml([])) == "NVML reports no GPU"


def test_gpu_memory_tracker_stopped_before_the_timed_rounds_says_so():
    """In a workload the tracker stops after warm-up (solo_only): its record says the timed rounds are not in it."""
    from harness.execute.workload import _stop_solo
    from harness.measure.gpu_memory import GpuMemoryTracker

    h = device("00000000:3B:00.0", used=[10 * GiB], procs=[(PID, GiB)])
    t = GpuMemoryTracker(nvml=FakeNvml([h]), handle=h, cuda=FakeAllocator(), hz=500)
    assert t.solo_only
    t.start()
    s = SimpleNamespace(trackers=[t], rec=_blank())
    _stop_solo(s)  # what a workload does before the next runner loads
    src = s.rec.memory.source
    assert "to the end of warm-up" in src and "the timed rounds are not in it" in src
    assert "timed rounds are not" in src.split(";")[-1]  # the allocator figures' window too
    assert s.trackers == []


# -- idle power and net energy (issue 24, defect 8) ------------------------------------------------------------------
class PowerNvml(FakeNvml):
    """Power readings scripted per call (mW); an exception instance raises."""

    def __init__(self, devices, power) -> None:
        super().__init__(devices)
        self.power = power

    def nvmlDeviceGetPowerUsage(self, h):
        if isinstance(self.power, Exception):
            raise self.power
        return self.power.pop(0) if len(self.power) > 1 else self.power[0]


def test_idle_power_is_the_median_of_the_readings_over_the_window():
    from harness.measure.nvml import idle_power_w

    h = device("00000000:3B:00.0")
    # a spike and a dip among steady readings: the median ignores both
    nvml = PowerNvml([h], [70_000, 71_000, 400_000, 69_000, 70_500, 5_000, 70_000])
    assert idle_power_w(h, nvml, seconds=0.3, hz=20) == pytest.approx(70.0)
    with pytest.raises(NvmlUnavailable, match="power reading not available"):
        idle_power_w(h, PowerNvml([h], NotSupported()), seconds=0)


def test_energy_tracker_records_gross_and_net_energy_per_inference():
    from harness.measure.energy import EnergyTracker

    h = device("00000000:3B:00.0", energy=[0])
    base = {"power_w": 60.0, "settled": True}  # the run's one idle baseline
    t = EnergyTracker(batch=1, nvml=PowerNvml([h], [90_000]), handle=h, min_window_s=0.0, baseline=base)
    t.start()  # no idle power is read per cell any more: the 90 W the GPU draws now are not used
    t.start_timed()
    h["energy"] = [1000]
    t.resume()
    time.sleep(0.05)
    h["energy"] = [11_000]  # 10 J over the block
    t.pause()
    t.stop(10)
    t.fill(rec := _blank())
    e = rec.energy
    assert e.per_inference_j == pytest.approx(1.0) and e.idle_power_w == pytest.approx(60.0)
    assert e.net_per_inference_j == pytest.approx((10.0 - 60.0 * e.window_s) / 10)
    assert e.net_per_inference_j < e.per_inference_j and "the run's idle baseline (60.0 W" in e.source
    # the other way: no baseline in the run: the gross figure stays, the net one is null with the reason
    h["energy"] = [0]
    why = "power reading not available on this GPU: Not Supported"
    t = EnergyTracker(
        batch=1, nvml=PowerNvml([h], NotSupported()), handle=h, baseline={"power_w": None, "reason": why}
    )
    t.start()
    t.start_timed()
    t.resume()
    h["energy"] = [5000]
    t.stop(5)
    t.fill(rec := _blank())
    assert rec.energy.per_inference_j == pytest.approx(1.0)
    assert rec.energy.net_per_inference_j is None
    assert rec.null_reasons["energy.net_per_inference_j"] == f"the run's idle baseline was not read: {why}"
