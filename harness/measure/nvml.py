"""NVIDIA GPU facts through NVML: the handle of a torch device, memory probes, energy, clocks, env.json fields.

Every function takes the NVML module as an optional `nvml` argument (default: `pynvml` from nvidia-ml-py, initialised
once per process), so tests can pass a fake namespace, and so nothing here imports or initialises CUDA unless it
needs a torch device's identity. Without NVML (no driver, no nvidia-ml-py, no GPU) the functions raise
`NvmlUnavailable` whose message is the reason, ready to be a record's null reason; `nvml_reason()` returns that reason
without raising.

Handles are matched to torch devices by PCI address, never by index: with CUDA_VISIBLE_DEVICES (or a different
enumeration order) torch's cuda:0 need not be NVML's device 0.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any

# NVML itself lives below the backends (their availability probes ask it too); re-exported for this module's users.
from harness.backends._shared.nvml_access import NvmlUnavailable as NvmlUnavailable
from harness.backends._shared.nvml_access import nvml_error_text, nvml_module
from harness.backends._shared.nvml_access import nvml_reason as nvml_reason
from harness.measure.host_memory import PeakProbe

log = logging.getLogger(__name__)


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


# -- torch device -> NVML handle -----------------------------------------------------------------------------------
_BUS_ID = re.compile(r"^(?:([0-9a-fA-F]+):)?([0-9a-fA-F]+):([0-9a-fA-F]+)(?:\.([0-9a-fA-F]+))?$")


def parse_pci_bus_id(bus_id: str) -> tuple[int, int, int]:
    """(domain, bus, device) of a PCI address such as NVML's "00000000:3B:00.0" or sysfs' "0000:3b:00.0"."""
    m = _BUS_ID.match(_text(bus_id).strip())
    if not m:
        raise ValueError(f"not a PCI bus id: {bus_id!r}")
    domain, bus, device, _ = m.groups()
    return int(domain or "0", 16), int(bus, 16), int(device, 16)


def _normalise_uuid(u: Any) -> str:
    s = _text(u).strip().lower()
    s = s.removeprefix("gpu-")
    return re.sub(r"[^0-9a-f]", "", s)


def torch_device_identity(index: int) -> dict:
    """PCI address (and UUID) of torch's cuda:`index` as the CUDA runtime reports it (initialises CUDA)."""
    import torch

    if not torch.cuda.is_available():
        raise NvmlUnavailable(
            f"no CUDA device visible to torch {torch.__version__} (torch.version.cuda={torch.version.cuda})"
        )
    props = torch.cuda.get_device_properties(index)
    return identity_from_properties(props)


def identity_from_properties(props: Any) -> dict:
    """The identity fields of a torch `_CudaDeviceProperties` (or any object with the same attributes)."""
    ident: dict = {"name": getattr(props, "name", None)}
    if all(hasattr(props, a) for a in ("pci_domain_id", "pci_bus_id", "pci_device_id")):
        ident["pci"] = (int(props.pci_domain_id), int(props.pci_bus_id), int(props.pci_device_id))
    uuid = getattr(props, "uuid", None)
    if uuid is not None:
        ident["uuid"] = _normalise_uuid(uuid)
    return ident


def nvml_handle_for_torch_device(index: int = 0, nvml: Any = None, identity: dict | None = None) -> Any:
    """The NVML handle of torch's cuda:`index`, matched by PCI domain/bus/device (UUID when torch lacks PCI ids).

    `identity` (from `identity_from_properties`) replaces the torch lookup, for tests and for a caller that
    already has the device properties. Raises NvmlUnavailable when NVML is unusable or no NVML device matches.
    """
    m = nvml_module(nvml)
    ident = identity if identity is not None else torch_device_identity(index)
    want_pci = ident.get("pci")
    want_uuid = ident.get("uuid")
    if want_pci is None and not want_uuid:
        raise NvmlUnavailable(f"torch reports neither a PCI address nor a UUID for cuda:{index}")
    seen = []
    for i in range(m.nvmlDeviceGetCount()):
        h = m.nvmlDeviceGetHandleByIndex(i)
        if want_pci is not None:
            bus_id = _text(m.nvmlDeviceGetPciInfo(h).busId)
            seen.append(bus_id)
            if parse_pci_bus_id(bus_id) == tuple(want_pci):
                return h
        else:
            uuid = _normalise_uuid(m.nvmlDeviceGetUUID(h))
            seen.append(uuid)
            if uuid == want_uuid:
                return h
    want = "{:08X}:{:02X}:{:02X}.0".format(*want_pci) if want_pci is not None else f"UUID {want_uuid}"
    raise NvmlUnavailable(
        f"no NVML device matches torch cuda:{index} ({want}); NVML sees {', '.join(seen) or 'none'}"
    )


def current_device_handle(nvml: Any = None) -> Any:
    """The NVML handle of torch's current CUDA device (the one a cuda cell runs on); initialises CUDA.

    NVML's own reason comes first (no driver, no nvidia-ml-py), then torch's (no CUDA device visible), so a CPU
    machine's record says what is missing at the lowest level. Raises NvmlUnavailable with that reason.
    """
    m = nvml_module(nvml)
    try:
        import torch
    except ImportError as e:
        raise NvmlUnavailable(f"torch is not installed ({e})") from None
    index = torch.cuda.current_device() if torch.cuda.is_available() else 0
    return nvml_handle_for_torch_device(index, m)


def current_device_handle_or_reason(nvml: Any = None) -> tuple[Any, str | None]:
    """(`current_device_handle()`, None), or (None, the reason): never raises (trackers record the reason)."""
    try:
        return current_device_handle(nvml), None
    except NvmlUnavailable as e:
        return None, str(e)
    except Exception as e:  # an NVML call failing mid-enumeration must not stop the cell
        return None, f"NVML device lookup failed: {type(e).__name__}: {nvml_error_text(e)}"


def nvml_for_tracker(nvml: Any = None, handle: Any = None) -> tuple[Any, Any, str | None]:
    """(module, handle, None) for a tracker, or with None and the reason where NVML or the device is unavailable.

    `nvml` and `handle` are used as given when passed (tests pass fakes); never raises.
    """
    try:
        module = nvml_module(nvml)
    except NvmlUnavailable as e:
        return None, handle, str(e)
    if handle is not None:
        return module, handle, None
    handle, reason = current_device_handle_or_reason(module)
    return module, handle, reason


# -- memory probes -------------------------------------------------------------------------------------------------
def process_used_bytes(handle: Any, pid: int, nvml: Any = None) -> float | None:
    """Device memory NVML attributes to `pid` on `handle` (compute and graphics contexts), in bytes.

    0.0 when the process has no context on the device yet; None when the driver does not report per-process memory
    (Windows WDDM reports usedGpuMemory as unavailable).
    NVML reports host PIDs: inside a container with its own PID namespace, `pid` never matches (see docs/gpu.md).
    """
    m = nvml_module(nvml)
    total = 0.0
    listed = False
    getters = [m.nvmlDeviceGetComputeRunningProcesses]
    if hasattr(m, "nvmlDeviceGetGraphicsRunningProcesses"):
        getters.append(m.nvmlDeviceGetGraphicsRunningProcesses)
    for get in getters:
        for p in get(handle):
            if p.pid != pid:
                continue
            if p.usedGpuMemory is None:
                return None
            listed = True
            # a process with both a compute and a graphics context is listed in both, with the same total
            total = max(total, float(p.usedGpuMemory))
    return total if listed else 0.0


def nvml_probes(handle: Any, pid: int, nvml: Any = None) -> list[PeakProbe]:
    """Probes for harness.measure.host_memory.Sampler: device-wide used memory and the memory of process `pid`, in bytes.

    Names: "device_used" (nvmlDeviceGetMemoryInfo.used, every process on the GPU) and "device_process" (this
    process's entries of nvmlDeviceGetComputeRunningProcesses/GraphicsRunningProcesses). Sample them at >= 100 Hz
    (Sampler's default is 200 Hz): a short-lived allocation peak between two samples is missed otherwise.
    """
    m = nvml_module(nvml)
    return [
        PeakProbe("device_used", lambda: float(m.nvmlDeviceGetMemoryInfo(handle).used)),
        PeakProbe("device_process", lambda: process_used_bytes(handle, pid, m)),
    ]


# -- energy --------------------------------------------------------------------------------------------------------
def idle_power_w(handle: Any, nvml: Any = None, seconds: float = 2.0, hz: float = 10.0) -> float:
    """The GPU's power draw (W) as the median of NVML power readings over `seconds` (one reading when 0).

    Read before a workload loads, with nothing of this process running on the GPU: what the device draws idling
    (other processes on it count too). Raises NvmlUnavailable when the power reading is not supported.
    """
    m = nvml_module(nvml)
    readings: list[float] = []
    t_end = time.perf_counter() + seconds
    while True:
        try:
            readings.append(float(m.nvmlDeviceGetPowerUsage(handle)) / 1000.0)  # mW
        except Exception as e:
            raise NvmlUnavailable(f"power reading not available on this GPU: {nvml_error_text(e)}") from None
        if time.perf_counter() >= t_end:
            break
        time.sleep(1.0 / hz)
    readings.sort()
    n = len(readings)
    return readings[n // 2] if n % 2 else (readings[n // 2 - 1] + readings[n // 2]) / 2


#: the idle baseline's settling: power and SM clock read at SETTLE_HZ, their medians compared window by window
SETTLE_STEP_S = 1.0
SETTLE_HZ = 10.0
#: settled when a window's median power is no more than this below the window before (W), and its SM clock no lower
SETTLE_TOL_W = 1.0
#: the bound: the baseline is taken after at most this many seconds, settled or not (it then says it was not)
SETTLE_MAX_S = 30.0


def settled_idle(
    handle: Any,
    nvml: Any = None,
    *,
    step_s: float = SETTLE_STEP_S,
    hz: float = SETTLE_HZ,
    tol_w: float = SETTLE_TOL_W,
    max_s: float = SETTLE_MAX_S,
    clock: Any = time.perf_counter,
    sleep: Any = time.sleep,
) -> dict:
    """The GPU's idle power once it has settled: the run's one idle baseline (env.json `gpu_env.idle_baseline`).

    Power (nvmlDeviceGetPowerUsage) and SM clock (nvmlDeviceGetClockInfo) are read `hz` times a second in windows
    of `step_s`; the GPU has settled when a window's median power is no more than `tol_w` below the window before
    and its median SM clock is no lower (a GPU still clocked up from earlier work draws more and falls window by
    window). The baseline is the settled window's median power. After `max_s` it is the last window's median,
    with `settled: false` (the figure is then an upper bound of the idle power). Returns the baseline's fields,
    how it was read included; raises NvmlUnavailable when the power reading is not supported. `clock` and `sleep`
    replace the real ones in tests.
    """
    m = nvml_module(nvml)

    def power() -> float:
        try:
            return float(m.nvmlDeviceGetPowerUsage(handle)) / 1000.0  # mW
        except Exception as e:
            raise NvmlUnavailable(f"power reading not available on this GPU: {nvml_error_text(e)}") from None

    def sm_clock() -> float | None:
        try:
            return float(m.nvmlDeviceGetClockInfo(handle, m.NVML_CLOCK_SM))
        except Exception:
            return None

    def median(xs: list[float]) -> float:
        xs = sorted(xs)
        n = len(xs)
        return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2

    t0 = clock()
    windows: list[dict] = []
    settled = False
    while True:
        p_read: list[float] = []
        c_read: list[float] = []
        t_end = clock() + step_s
        while True:
            p_read.append(power())
            c = sm_clock()
            if c is not None:
                c_read.append(c)
            if clock() >= t_end:
                break
            sleep(1.0 / hz)
        win = {"power_w": round(median(p_read), 3), "sm_clock_mhz": median(c_read) if c_read else None}
        windows.append(win)
        if len(windows) >= 2:
            prev = windows[-2]
            power_held = win["power_w"] >= prev["power_w"] - tol_w
            clock_held = win["sm_clock_mhz"] is None or prev["sm_clock_mhz"] is None
            clock_held = clock_held or win["sm_clock_mhz"] >= prev["sm_clock_mhz"]
            if power_held and clock_held:
                settled = True
                break
        if clock() - t0 >= max_s:
            break
    last = windows[-1]
    return {
        "power_w": last["power_w"],
        "sm_clock_mhz": last["sm_clock_mhz"],
        "settled": settled,
        "waited_s": round(clock() - t0, 3),
        "windows": windows,
        "method": (
            f"NVML power and SM clock read at {hz:g} Hz in {step_s:g} s windows until a window's median power "
            f"fell by no more than {tol_w:g} W and its SM clock did not fall (at most {max_s:g} s); the baseline "
            "is that window's median power, read once per run before the first cell"
        ),
    }


@dataclass
class EnergyMeter:
    """Energy drawn by the whole GPU between start() and stop(), from nvmlDeviceGetTotalEnergyConsumption (mJ).

    The counter is device-wide (Volta and newer) and advances in steps of tens of milliseconds, so a window shorter
    than `min_window_s` is reported with a note; energy per inference = delta / inferences.
    """

    handle: Any
    nvml: Any = None
    min_window_s: float = 1.0
    start_mj: int | None = None
    stop_mj: int | None = None
    window_s: float | None = None
    clock: Any = field(default=time.perf_counter, repr=False)  # a fake clock in tests
    _t0: float = field(default=0.0, repr=False)

    def _read(self) -> int:
        m = nvml_module(self.nvml)
        try:
            return int(m.nvmlDeviceGetTotalEnergyConsumption(self.handle))
        except Exception as e:  # NVMLError_NotSupported on pre-Volta GPUs
            raise NvmlUnavailable(f"energy counter not readable on this GPU: {nvml_error_text(e)}") from None

    def start(self) -> EnergyMeter:
        self.start_mj = self._read()
        self.stop_mj = None
        self._t0 = self.clock()
        return self

    def stop(self) -> float:
        """Energy in millijoules since start()."""
        if self.start_mj is None:
            raise RuntimeError("EnergyMeter.stop() before start()")
        self.stop_mj = self._read()
        self.window_s = self.clock() - self._t0
        return self.delta_mj

    @property
    def delta_mj(self) -> float:
        if self.start_mj is None or self.stop_mj is None:
            raise RuntimeError("EnergyMeter has no completed window")
        return float(self.stop_mj - self.start_mj)

    def per_inference_j(self, inferences: int) -> float:
        """Joules per inference over the window (device-wide: other processes on the GPU count too)."""
        if inferences <= 0:
            raise ValueError("inferences must be positive")
        return self.delta_mj / 1000.0 / inferences

    @property
    def note(self) -> str | None:
        if self.window_s is not None and self.window_s < self.min_window_s:
            return (
                f"energy window {self.window_s:.2f} s is shorter than {self.min_window_s:.1f} s: the NVML counter "
                "advances in coarse steps, so the figure is imprecise"
            )
        return None


# -- clocks, temperature, power ------------------------------------------------------------------------------------
def gpu_snapshot(handle: Any, nvml: Any = None) -> dict:
    """Clocks (MHz), temperature (C), power (W), performance state and clock-event reasons, read now.

    A field the GPU does not report is None, with its reason under "null_reasons".
    """
    m = nvml_module(nvml)
    out: dict = {}
    reasons: dict = {}

    def read(key: str, fn, *args, scale: float | None = None) -> None:
        try:
            v = fn(handle, *args)
            out[key] = v * scale if scale is not None else v
        except Exception as e:
            out[key] = None
            reasons[key] = nvml_error_text(e)

    read("sm_clock_mhz", m.nvmlDeviceGetClockInfo, m.NVML_CLOCK_SM)
    read("mem_clock_mhz", m.nvmlDeviceGetClockInfo, m.NVML_CLOCK_MEM)
    read("graphics_clock_mhz", m.nvmlDeviceGetClockInfo, m.NVML_CLOCK_GRAPHICS)
    read("max_sm_clock_mhz", m.nvmlDeviceGetMaxClockInfo, m.NVML_CLOCK_SM)
    read("temperature_c", m.nvmlDeviceGetTemperature, m.NVML_TEMPERATURE_GPU)
    read("power_w", m.nvmlDeviceGetPowerUsage, scale=1e-3)
    read("power_limit_w", m.nvmlDeviceGetPowerManagementLimit, scale=1e-3)
    read("pstate", m.nvmlDeviceGetPerformanceState)
    events = getattr(m, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
        m, "nvmlDeviceGetCurrentClocksThrottleReasons", None
    )
    if events is not None:
        read("clock_event_reasons", events)
    if reasons:
        out["null_reasons"] = reasons
    return out


# -- env.json ------------------------------------------------------------------------------------------------------
def _cuda_driver_version(m: Any) -> str | None:
    try:
        v = int(m.nvmlSystemGetCudaDriverVersion())
    except Exception:
        return None
    return f"{v // 1000}.{(v % 1000) // 10}"


def gpu_env(nvml: Any = None, torch_index: int | None = 0) -> dict:
    """GPU fields for env.json: name, compute capability, driver, CUDA (driver and torch runtime), cuDNN, TensorRT,
    and clocks/temperature/power at start. Never raises: without a GPU it says why under "reason".

    `torch_index` selects the torch device whose NVML handle is described (None: NVML device 0, without torch).
    """
    from harness.core.version import library_version

    env: dict = {
        "available": False,
        "reason": None,
        "name": None,
        "compute_capability": None,
        "pci_bus_id": None,
        "memory_total_mb": None,
        "driver": None,
        "cuda_driver": None,
        "cuda_runtime_torch": None,
        "cudnn": None,
        "tensorrt": library_version("tensorrt"),
        "clocks_at_start": None,
    }
    torch_reason = None
    try:
        import torch

        env["cuda_runtime_torch"] = torch.version.cuda
        if torch.cuda.is_available():
            env["cudnn"] = torch.backends.cudnn.version()
        else:
            torch_reason = f"no CUDA device visible to torch {torch.__version__}"
    except ImportError:
        torch_reason = "torch is not installed"
    try:
        m = nvml_module(nvml)
        if torch_index is not None and torch_reason is None:
            h = nvml_handle_for_torch_device(torch_index, m)
        else:
            if m.nvmlDeviceGetCount() == 0:
                raise NvmlUnavailable("NVML reports no GPU")
            h = m.nvmlDeviceGetHandleByIndex(0)
        env["driver"] = _text(m.nvmlSystemGetDriverVersion())
        env["cuda_driver"] = _cuda_driver_version(m)
        env["name"] = _text(m.nvmlDeviceGetName(h))
        cc = m.nvmlDeviceGetCudaComputeCapability(h)
        env["compute_capability"] = f"{cc[0]}.{cc[1]}"
        env["pci_bus_id"] = _text(m.nvmlDeviceGetPciInfo(h).busId)
        env["memory_total_mb"] = m.nvmlDeviceGetMemoryInfo(h).total / 2**20
        env["clocks_at_start"] = gpu_snapshot(h, m)
        env["available"] = True
        if torch_reason:
            env["reason"] = f"NVML sees the GPU but {torch_reason}"
    except NvmlUnavailable as e:
        env["reason"] = str(e)
    except Exception as e:  # env.json must be written whatever NVML does
        env["reason"] = f"NVML query failed: {type(e).__name__}: {nvml_error_text(e)}"
    return env
