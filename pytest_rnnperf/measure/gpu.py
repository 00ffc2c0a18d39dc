"""NVML device fingerprint (static and volatile fields) and a telemetry window read at its start and stop.

Every NVML call goes through one object, ``nvml`` (default: the ``pynvml`` module of ``nvidia-ml-py``,
imported lazily), so tests pass a fake with the same function names. Every reported field is a value or
``"unavailable: <reason>"``; nothing here raises to the caller, because telemetry must never fail a test.
"""

from __future__ import annotations

import importlib
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from pytest_rnnperf.model.flags import (
    BENIGN_REASONS, WindowFlag, is_unavailable, unavailable, window_flags,
)

# NVML ABI constants (nvml.h). They are part of the C ABI and never change, so we keep them here rather
# than read them from the binding: a fake needs only the functions, and an old binding cannot lack them.
NVML_ERROR_NOT_FOUND = 6
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_TEMPERATURE_GPU = 0
NVML_GPU_UTILIZATION_SAMPLES = 1
NVML_PROCESSOR_CLK_SAMPLES = 5
NVML_GPM_METRIC_SM_UTIL = 2
NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5
NVML_GPM_METRICS_GET_VERSION = 1
# nvmlPerfPolicyType_t, reported by nvmlDeviceGetViolationStatus as cumulative nanoseconds.
PERF_POLICIES: tuple[tuple[str, int], ...] = (
    ("power", 0), ("thermal", 1), ("sync_boost", 2), ("board_limit", 3), ("low_utilization", 4),
    ("reliability", 5),
)
# nvmlClocksEventReason* bits (formerly nvmlClocksThrottleReason*).
CLOCK_EVENT_REASONS: tuple[tuple[int, str], ...] = (
    (0x1, "gpu idle"), (0x2, "applications clocks setting"), (0x4, "sw power cap"), (0x8, "hw slowdown"),
    (0x10, "sync boost"), (0x20, "sw thermal slowdown"), (0x40, "hw thermal slowdown"),
    (0x80, "hw power brake"), (0x100, "display clock setting"),
)

# nvmlReturn_t codes worth a readable name; others print as "NVMLError <code>".
_NVML_ERRORS: dict[int, str] = {
    1: "Uninitialized", 2: "InvalidArgument", 3: "NotSupported", 4: "NoPermission", 6: "NotFound",
    9: "NVIDIA driver not loaded", 12: "NVML library not found", 13: "FunctionNotFound (driver too old)",
    15: "GpuIsLost", 18: "NVML/driver version mismatch", 21: "NoData", 25: "ArgumentVersionMismatch",
    26: "Deprecated", 28: "GpuNotFound", 999: "Unknown",
}


def _reason(exc: BaseException) -> str:
    """Short reason for a failed call: the NVML error name, else the exception type and first line."""
    code = getattr(exc, "value", None)
    if type(exc).__name__.startswith("NVMLError") and isinstance(code, int):
        return _NVML_ERRORS.get(code, f"NVMLError {code}")
    text = str(exc).strip().splitlines()[0][:80] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _try(fn: Callable[..., Any], *args: Any) -> tuple[Any, str | None]:
    """Call ``fn``; return ``(value, None)`` or ``(None, reason)``, never raise."""
    try:
        return fn(*args), None
    except Exception as exc:  # NVMLError, ctypes errors, a broken binding: all the same to telemetry
        return None, _reason(exc)


def _call(nvml: Any, name: str, *args: Any) -> tuple[Any, str | None]:
    """Call ``nvml.<name>`` like ``_try``; an older binding that lacks the function is a reason too."""
    fn = getattr(nvml, name, None)
    if fn is None:
        return None, f"{name} not in this nvidia-ml-py"
    return _try(fn, *args)


def _read(nvml: Any, name: str, *args: Any, fmt: Callable[[Any], str] = str) -> str:
    """One reported string field: the formatted value or ``unavailable: <reason>``."""
    value, why = _call(nvml, name, *args)
    if why is None:
        value, why = _try(fmt, value)  # a surprising value from a binding must not raise either
    return unavailable(why) if why is not None else value


# NVML is initialised once per process and binding object; the entry keeps the object alive, so its id
# cannot be reused by another (fake) object while cached. Shutdown is not needed: NVML is refcounted and
# torch uses the same module.
_INIT_LOCK = threading.Lock()
_INIT_CACHE: dict[int, tuple[Any, str | None]] = {}


def _load_nvml(nvml: Any = None) -> tuple[Any | None, str | None]:
    """Return the initialised binding (``pynvml`` unless given) or ``(None, reason)``."""
    if nvml is None:
        try:
            nvml = importlib.import_module("pynvml")
        except ImportError:
            return None, "nvidia-ml-py not installed"
        except Exception as exc:
            return None, f"pynvml import failed ({_reason(exc)})"
    with _INIT_LOCK:
        cached = _INIT_CACHE.get(id(nvml))
        if cached is None:
            cached = (nvml, _call(nvml, "nvmlInit")[1])
            _INIT_CACHE[id(nvml)] = cached
    return (nvml, None) if cached[1] is None else (None, cached[1])


def _open(index: int, nvml: Any) -> tuple[Any, Any, str | None]:
    """``(binding, device handle, None)`` or ``(None, None, reason)``."""
    mod, why = _load_nvml(nvml)
    if mod is None:
        return None, None, why
    handle, why = _call(mod, "nvmlDeviceGetHandleByIndex", index)
    if why is not None:
        return None, None, f"no GPU at NVML index {index} ({why})"
    return mod, handle, None


def nvml_index(cuda_index: int = 0, nvml: Any = None, environ: dict[str, str] | None = None) -> int:
    """NVML index of CUDA device ``cuda_index``: NVML ignores CUDA_VISIBLE_DEVICES, CUDA does not."""
    visible = (os.environ if environ is None else environ).get("CUDA_VISIBLE_DEVICES", "").strip()
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    if not entries or cuda_index >= len(entries):
        return cuda_index
    index = entry_index(entries[cuda_index], nvml)
    return cuda_index if index is None else index  # MIG- entries and unknown forms: the best guess is the plain index


def entry_index(entry: str, nvml: Any = None) -> int | None:
    """NVML index of one CUDA_VISIBLE_DEVICES entry (an index or a ``GPU-`` UUID), None when not found; never raises."""
    if entry.isdigit():
        return int(entry)
    mod, _ = _load_nvml(nvml)
    if mod is not None and entry.startswith("GPU-"):  # a UUID (maybe a prefix, as CUDA allows)
        count, why = _call(mod, "nvmlDeviceGetCount")
        for i in range(count if why is None else 0):
            handle, why = _call(mod, "nvmlDeviceGetHandleByIndex", i)
            uuid = _read(mod, "nvmlDeviceGetUUID", handle, fmt=_text) if why is None else ""
            if uuid.startswith(entry):
                return i
    return None


def gpu_count(nvml: Any = None) -> tuple[int | None, str]:
    """``(number of NVML devices, "")``, or ``(None, reason)`` when NVML cannot say; never raises."""
    mod, why = _load_nvml(nvml)
    if mod is None:
        return None, str(why)
    count, why = _call(mod, "nvmlDeviceGetCount")
    if why is None:
        count, why = _try(int, count)
    return (None, str(why)) if why is not None else (count, "")


def gpu_uuid(index: int, nvml: Any = None) -> str | None:
    """The UUID (``GPU-...``) of NVML device ``index``, or None when it cannot be read; never raises."""
    mod, handle, why = _open(index, nvml)
    if why is not None:
        return None
    uuid = _read(mod, "nvmlDeviceGetUUID", handle, fmt=_text)
    return None if is_unavailable(uuid) else uuid


def _text(value: Any) -> str:
    """Decode the bytes older bindings return."""
    return value.decode() if isinstance(value, bytes) else str(value)


def _gib(n_bytes: int) -> str:
    return f"{n_bytes / 2**30:.1f} GiB"


def _on_off(value: Any) -> str:
    return "on" if value else "off"


def _watts(milliwatts: Any) -> str:
    return f"{milliwatts / 1000:g}"


def _mode_pair(words: tuple[str, str]) -> Callable[[Any], str]:
    """Format NVML's ``[current, pending]`` mode pair, naming the pending mode only when it differs."""
    def fmt(pair: Any) -> str:
        current, pending = words[bool(pair[0])], words[bool(pair[1])]
        return current if current == pending else f"{current} (pending {pending})"
    return fmt


def reason_names(mask: int) -> tuple[str, ...]:
    """Names of the clock event (throttle) reason bits set in ``mask``."""
    names = tuple(name for bit, name in CLOCK_EVENT_REASONS if mask & bit)
    known = sum(bit for bit, _ in CLOCK_EVENT_REASONS)
    return names + ((f"reason {mask & ~known:#x}",) if mask & ~known else ())


def _clock_reasons(nvml: Any, handle: Any) -> tuple[tuple[str, ...] | None, str | None]:
    """Current clock event reasons; the older ThrottleReasons call serves bindings and drivers before it."""
    mask, why = _call(nvml, "nvmlDeviceGetCurrentClocksEventReasons", handle)
    if why is not None:
        mask, why = _call(nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", handle)
    return (None, why) if why is not None else (reason_names(int(mask)), None)


Process = tuple[int, "int | None"]  # (pid, GPU memory used in bytes, None where the driver won't say)


def _processes(nvml: Any, handle: Any) -> tuple[tuple[Process, ...] | None, str | None]:
    """Compute processes on the device as ``(pid, used bytes)``."""
    procs, why = _call(nvml, "nvmlDeviceGetComputeRunningProcesses", handle)
    if why is not None:
        return None, why
    return _try(lambda: tuple((int(p.pid), getattr(p, "usedGpuMemory", None)) for p in procs))


def _format_process(proc: Process) -> str:
    pid, used = proc
    return f"pid {pid} ({_gib(used) if isinstance(used, int) else 'memory n/a'})"


def _format_processes(procs: tuple[Process, ...]) -> str:
    """``none`` or ``2: pid 123 (1.2 GiB), pid 456 (memory n/a)``."""
    return f"{len(procs)}: " + ", ".join(map(_format_process, procs)) if procs else "none"


@dataclass(frozen=True)
class GpuInfo:
    """The GPU fingerprint: every field a string value or ``unavailable: <reason>``."""

    name: str
    uuid: str
    compute_capability: str
    memory_total: str
    driver_version: str
    cuda_driver_version: str
    power_limit_enforced_w: str
    power_limit_default_w: str
    sm_clock_max_mhz: str
    mem_clock_max_mhz: str
    sm_clock_mhz: str
    mem_clock_mhz: str
    persistence_mode: str
    ecc_mode: str
    mig_mode: str
    pcie_link: str
    compute_processes: str
    temperature_c: str
    throttle_reasons: str
    # Not reported as such; kept structured so noise checks need not parse strings.
    available: bool = False
    reason: str = ""
    processes: tuple[Process, ...] = ()

    def as_dict(self) -> dict[str, str]:
        """All reported fields, in declaration order."""
        return {name: getattr(self, name) for name in GPU_FIELDS}

    def static_dict(self) -> dict[str, str]:
        """Reported fields that do not change from one minute to the next (for baselines and diffs)."""
        return {k: v for k, v in self.as_dict().items() if k not in VOLATILE_FIELDS}

    def to_dict(self) -> dict[str, Any]:
        """Every field, the structured ones included, as plain JSON (a pytest-xdist worker hands it over)."""
        return {**self.as_dict(), "available": self.available, "reason": self.reason,
                "processes": [list(p) for p in self.processes]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GpuInfo:
        """The inverse of ``to_dict``; a field it lacks reads as unavailable."""
        values = {name: str(data.get(name, unavailable("not reported"))) for name in GPU_FIELDS}
        procs = tuple((int(p[0]), None if p[1] is None else int(p[1])) for p in data.get("processes", ()))
        return cls(**values, available=bool(data.get("available", False)), reason=str(data.get("reason", "")),
                   processes=procs)

    @property
    def gpu_slug(self) -> str:
        """Filesystem-safe model name, e.g. ``NVIDIA_H200``; ``no-gpu`` without a readable device."""
        if not self.available or is_unavailable(self.name):
            return "no-gpu"
        slug = re.sub(r"[^A-Za-z0-9.-]+", "_", self.name).strip("_")
        return slug if slug.strip(".") else "unknown-gpu"  # "." or ".." would name a folder outside the GPU's own


_NOT_REPORTED = {"available", "reason", "processes"}
GPU_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(GpuInfo) if f.name not in _NOT_REPORTED)
VOLATILE_FIELDS = frozenset({"sm_clock_mhz", "mem_clock_mhz", "temperature_c", "compute_processes",
                             "throttle_reasons"})


def _unavailable_info(reason: str) -> GpuInfo:
    values: dict[str, Any] = {name: unavailable(reason) for name in GPU_FIELDS}
    return GpuInfo(**values, available=False, reason=reason)


def read_gpu_info(index: int = 0, nvml: Any = None) -> GpuInfo:
    """Read the fingerprint of NVML device ``index``; never raises."""
    try:
        return _read_gpu_info(index, nvml)
    except Exception as exc:  # a bug or a binding surprise here must not break a test session
        return _unavailable_info(f"device read failed ({_reason(exc)})")


def _read_gpu_info(index: int, nvml: Any) -> GpuInfo:
    mod, h, why = _open(index, nvml)
    if why is not None:
        return _unavailable_info(why)
    cuda_fn = ("nvmlSystemGetCudaDriverVersion_v2" if hasattr(mod, "nvmlSystemGetCudaDriverVersion_v2")
               else "nvmlSystemGetCudaDriverVersion")
    # Max link generation/width "possible with this device and system": the current generation drops
    # at idle to save power, so it would make a static field flap.
    gen = _read(mod, "nvmlDeviceGetMaxPcieLinkGeneration", h)
    width = _read(mod, "nvmlDeviceGetMaxPcieLinkWidth", h)
    pcie = next((v for v in (gen, width) if is_unavailable(v)), f"gen{gen} x{width}")
    procs, procs_why = _processes(mod, h)
    reasons, reasons_why = _clock_reasons(mod, h)
    name = _read(mod, "nvmlDeviceGetName", h, fmt=_text)
    return GpuInfo(
        name=name,
        uuid=_read(mod, "nvmlDeviceGetUUID", h, fmt=_text),
        compute_capability=_read(mod, "nvmlDeviceGetCudaComputeCapability", h, fmt=lambda c: f"{c[0]}.{c[1]}"),
        memory_total=_read(mod, "nvmlDeviceGetMemoryInfo", h, fmt=lambda m: _gib(m.total)),
        driver_version=_read(mod, "nvmlSystemGetDriverVersion", fmt=_text),
        cuda_driver_version=_read(mod, cuda_fn, fmt=lambda v: f"{v // 1000}.{v % 1000 // 10}"),
        power_limit_enforced_w=_read(mod, "nvmlDeviceGetEnforcedPowerLimit", h, fmt=_watts),
        power_limit_default_w=_read(mod, "nvmlDeviceGetPowerManagementDefaultLimit", h, fmt=_watts),
        sm_clock_max_mhz=_read(mod, "nvmlDeviceGetMaxClockInfo", h, NVML_CLOCK_SM),
        mem_clock_max_mhz=_read(mod, "nvmlDeviceGetMaxClockInfo", h, NVML_CLOCK_MEM),
        sm_clock_mhz=_read(mod, "nvmlDeviceGetClockInfo", h, NVML_CLOCK_SM),
        mem_clock_mhz=_read(mod, "nvmlDeviceGetClockInfo", h, NVML_CLOCK_MEM),
        persistence_mode=_read(mod, "nvmlDeviceGetPersistenceMode", h, fmt=_on_off),
        ecc_mode=_read(mod, "nvmlDeviceGetEccMode", h, fmt=_mode_pair(("off", "on"))),
        mig_mode=_read(mod, "nvmlDeviceGetMigMode", h, fmt=_mode_pair(("disabled", "enabled"))),
        pcie_link=pcie,
        compute_processes=unavailable(str(procs_why)) if procs is None else _format_processes(procs),
        temperature_c=_read(mod, "nvmlDeviceGetTemperature", h, NVML_TEMPERATURE_GPU),
        throttle_reasons=unavailable(str(reasons_why)) if reasons is None else ", ".join(reasons) or "none",
        available=not is_unavailable(name),
        reason=name[len("unavailable: "):] if is_unavailable(name) else "",
        processes=procs or (),
    )


def noise_warnings(info: GpuInfo, own_pid: int | None = None) -> list[str]:
    """One-line warnings about a noisy machine (other processes, persistence off, throttled clocks)."""
    if not info.available:
        return []
    own = os.getpid() if own_pid is None else own_pid
    out: list[str] = []
    # NVML reports host pids: inside a container our own process may show up as "other" (harmless).
    others = [p for p in info.processes if p[0] != own]
    if others:
        out.append(f"{len(others)} other process(es) on the GPU, timings may be noisy: "
                   + ", ".join(map(_format_process, others)))
    if info.persistence_mode == "off":
        out.append("persistence mode is off: the driver may re-initialise the GPU between runs "
                   "(enable with `nvidia-smi -pm 1`)")
    if not is_unavailable(info.throttle_reasons):
        active = [r for r in info.throttle_reasons.split(", ") if r not in BENIGN_REASONS | {"none"}]
        if active:
            out.append(f"GPU clocks are throttled now ({', '.join(active)}): timings may be slow")
    return out


@dataclass(frozen=True)
class TelemetrySummary:
    """NVML counters over one window; an unreadable field is None or absent, with its reason in ``unavailable``."""

    duration_s: float
    energy_j: float | None = None
    energy_note: str = ""
    mean_power_w: float | None = None
    throttle_s: dict[str, float] = field(default_factory=dict)
    throttle_reasons: tuple[str, ...] = ()
    mean_sm_clock_mhz: float | None = None
    sm_clock_note: str = ""
    utilization: dict[str, float | int] = field(default_factory=dict)
    peak_memory_used_bytes: int | None = None
    foreign_processes: tuple[str, ...] = ()
    gpm: dict[str, str] = field(default_factory=dict)
    # Keys are a field name ("energy_j") or a field and its sub-key ("throttle_s.thermal").
    unavailable: dict[str, str] = field(default_factory=dict)

    def flags(self) -> tuple[WindowFlag, ...]:
        """Why this window is not trusted: clocks throttled during it or at its end, processes that appeared."""
        return window_flags(self.duration_s, self.throttle_s, self.throttle_reasons, self.foreign_processes)

    def warnings(self) -> list[str]:
        """The flags as one-line warnings."""
        return [f.message for f in self.flags()]

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe dict; an unreadable field (or sub-key) holds its ``unavailable: <reason>`` string."""
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name == "unavailable":
                continue
            value = getattr(self, f.name)
            if f.name in self.unavailable:
                value = unavailable(self.unavailable[f.name])
            elif isinstance(value, dict):
                value = dict(value)
                prefix = f.name + "."
                value.update({k[len(prefix):]: unavailable(r) for k, r in self.unavailable.items()
                              if k.startswith(prefix)})
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out


_SUMMARY_FIELDS = ("energy_j", "mean_power_w", "throttle_s", "throttle_reasons", "mean_sm_clock_mhz",
                   "utilization", "peak_memory_used_bytes", "foreign_processes", "gpm")


def _empty_summary(duration_s: float, reason: str) -> TelemetrySummary:
    return TelemetrySummary(duration_s=duration_s, unavailable={k: reason for k in _SUMMARY_FIELDS})


def _sample_values(
    nvml: Any, handle: Any, kind: int, since_us: int
) -> tuple[list[tuple[int, float]] | None, str | None]:
    """``(timestamp_us, value)`` of the driver's samples newer than ``since_us``; none found is an empty list."""
    fn = getattr(nvml, "nvmlDeviceGetSamples", None)
    if fn is None:
        return None, "nvmlDeviceGetSamples not in this nvidia-ml-py"
    try:
        value_type, samples = fn(handle, kind, since_us)
        # nvmlValue_t is a union; nvmlValueType_t says which member holds the value.
        member = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")[value_type]
        return [(int(s.timeStamp), float(getattr(s.sampleValue, member))) for s in samples
                if int(s.timeStamp) > since_us], None
    except Exception as exc:
        if getattr(exc, "value", None) == NVML_ERROR_NOT_FOUND:  # NVML's way of saying "no newer samples"
            return [], None
        return None, _reason(exc)


class TelemetryWindow:
    """NVML counters read at a window's start and stop (no polling thread); also a context manager."""

    def __init__(self, index: int = 0, nvml: Any = None, clock: Callable[[], float] = time.monotonic,
                 own_pid: int | None = None) -> None:
        self.index = index
        self.summary: TelemetrySummary | None = None
        self._nvml_arg = nvml
        self._clock = clock
        self._own_pid = os.getpid() if own_pid is None else own_pid
        self._mod: Any = None
        self._handle: Any = None
        self._no_nvml: str | None = "window never started"
        self._t0: float | None = None
        self._at_start: dict[str, Any] = {}  # counter name -> value read at start
        self._why: dict[str, str] = {}  # counter name -> why it could not be read at start

    def __enter__(self) -> TelemetryWindow:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> TelemetryWindow:
        """Read the counters and the clock that open the window; never raises."""
        self.summary = None
        self._at_start, self._why = {}, {}
        try:
            self._mod, self._handle, self._no_nvml = _open(self.index, self._nvml_arg)
            if self._no_nvml is None:
                self._read_start()
        except Exception as exc:
            self._no_nvml = f"telemetry start failed ({_reason(exc)})"
        self._t0 = self._safe_clock()
        return self

    def stop(self) -> TelemetrySummary:
        """Read the closing counters and return (and keep in ``summary``) the window's summary; never raises."""
        if self.summary is not None:
            return self.summary
        t1 = self._safe_clock()
        duration = max(0.0, t1 - self._t0) if self._t0 is not None else 0.0
        if self._no_nvml is not None:
            self.summary = _empty_summary(duration, self._no_nvml)
        else:
            try:
                self.summary = self._read_stop(duration)
            except Exception as exc:
                self.summary = _empty_summary(duration, f"telemetry stop failed ({_reason(exc)})")
        return self.summary

    def _safe_clock(self) -> float:
        try:
            return float(self._clock())
        except Exception:
            return float("nan")

    def _remember(self, key: str, value: Any, why: str | None) -> None:
        if why is None:
            self._at_start[key] = value
        else:
            self._why[key] = why

    def _read_start(self) -> None:
        mod, h = self._mod, self._handle
        # Slow reads first, the energy counter last, so the window hugs the work it measures.
        self._remember("processes", *_processes(mod, h))
        self._remember("memory_used", *_call(mod, "nvmlDeviceGetMemoryInfo", h))
        for key, kind in (("util", NVML_GPU_UTILIZATION_SAMPLES), ("clk", NVML_PROCESSOR_CLK_SAMPLES)):
            # Start from the newest sample already in the driver's buffer: the window gets only later ones.
            samples, why = _sample_values(mod, h, kind, 0)
            self._remember(key, max((t for t, _ in samples), default=0) if samples is not None else None, why)
        self._remember("gpm", *self._gpm_start())
        for name, policy in PERF_POLICIES:
            v, why = _call(mod, "nvmlDeviceGetViolationStatus", h, policy)
            self._remember(f"viol.{name}", None if v is None else int(v.violationTime), why)
        self._remember("energy", *_call(mod, "nvmlDeviceGetTotalEnergyConsumption", h))

    def _gpm_start(self) -> tuple[Any, str | None]:
        """Take the opening GPM sample (Hopper and newer)."""
        mod, h = self._mod, self._handle
        cc, why = _call(mod, "nvmlDeviceGetCudaComputeCapability", h)
        if why is not None:
            return None, f"compute capability unknown ({why})"
        if tuple(cc) < (9, 0):
            return None, f"GPM needs compute capability 9.0 or newer, this GPU is {cc[0]}.{cc[1]}"
        if not hasattr(mod, "nvmlGpmMetricsGet"):
            return None, "nvidia-ml-py has no GPM support"
        support, why = _call(mod, "nvmlGpmQueryDeviceSupport", h)
        if why is None and not getattr(support, "isSupportedDevice", 0):
            why = "GPM not supported on this device"
        if why is not None:
            return None, why
        sample, why = _call(mod, "nvmlGpmSampleAlloc")
        if why is None:
            _, why = _call(mod, "nvmlGpmSampleGet", h, sample)
            if why is not None:
                _call(mod, "nvmlGpmSampleFree", sample)
        return (None, why) if why is not None else (sample, None)

    def _gpm_stop(self) -> dict[str, str]:
        """SM and tensor-pipe activity between the opening sample and one taken now."""
        mod, h = self._mod, self._handle
        metrics = (("sm_activity_pct", NVML_GPM_METRIC_SM_UTIL),
                   ("tensor_activity_pct", NVML_GPM_METRIC_ANY_TENSOR_UTIL))
        first = self._at_start.get("gpm")
        if first is None:
            return {k: unavailable(self._why.get("gpm", "no opening sample")) for k, _ in metrics}
        second, why = _call(mod, "nvmlGpmSampleAlloc")
        try:
            if why is None:
                _, why = _call(mod, "nvmlGpmSampleGet", h, second)
            if why is None:
                def get() -> Any:
                    req = mod.c_nvmlGpmMetricsGet_t()
                    req.version = NVML_GPM_METRICS_GET_VERSION
                    req.numMetrics = len(metrics)
                    req.sample1, req.sample2 = first, second
                    for i, (_, metric_id) in enumerate(metrics):
                        req.metrics[i].metricId = metric_id
                    return mod.nvmlGpmMetricsGet(req)
                req, why = _try(get)
            if why is not None:
                return {k: unavailable(why) for k, _ in metrics}
            out: dict[str, str] = {}
            for i, (key, _) in enumerate(metrics):
                m = req.metrics[i]
                ret = int(m.nvmlReturn)
                out[key] = f"{m.value:.1f}" if ret == 0 else unavailable(_NVML_ERRORS.get(ret, f"NVMLError {ret}"))
            return out
        finally:
            _call(mod, "nvmlGpmSampleFree", first)
            if second is not None:
                _call(mod, "nvmlGpmSampleFree", second)

    def _read_stop(self, duration: float) -> TelemetrySummary:
        mod, h, start, why0 = self._mod, self._handle, self._at_start, self._why
        why: dict[str, str] = {}
        # Energy: NVML's counter is in mJ and ticks about every 100 ms.
        energy_j = mean_power_w = None
        note = ""
        e1, w = _call(mod, "nvmlDeviceGetTotalEnergyConsumption", h)
        if "energy" not in start:
            w = why0.get("energy", w)
        elif w is None and e1 < start["energy"]:
            w = "energy counter went backwards"
        if w is None:
            energy_j = (e1 - start["energy"]) / 1000.0
            if duration > 0:
                mean_power_w = energy_j / duration
            if duration < 1.0:
                note = f"window {duration:.1f} s < 1 s: energy resolves ~100 ms, figure is rough"
        if energy_j is None:
            why["energy_j"] = why["mean_power_w"] = w or "energy not read"
        elif mean_power_w is None:
            why["mean_power_w"] = "zero-length window"

        throttle_s: dict[str, float] = {}
        for name, policy in PERF_POLICIES:
            v, w = _call(mod, "nvmlDeviceGetViolationStatus", h, policy)
            w = why0.get(f"viol.{name}", w)
            if w is None:  # cumulative nanoseconds of violation
                throttle_s[name] = max(0, int(v.violationTime) - start[f"viol.{name}"]) / 1e9
            else:
                why[f"throttle_s.{name}"] = w
        reasons, w = _clock_reasons(mod, h)
        if w is not None:
            why["throttle_reasons"] = w

        utilization: dict[str, float | int] = {}
        if "util" in start:
            util, w = _sample_values(mod, h, NVML_GPU_UTILIZATION_SAMPLES, start["util"])
        else:
            util, w = None, why0["util"]
        if util is None:
            why["utilization"] = w or "no samples"
        else:
            utilization["samples"] = len(util)
            if util:  # "some kernel was running" percentage, per driver sample period
                utilization["mean"] = sum(v for _, v in util) / len(util)
                utilization["max"] = max(v for _, v in util)
            else:
                why["utilization.mean"] = why["utilization.max"] = "no samples in window"

        mean_clk: float | None = None
        clk_note = ""
        if "clk" in start:
            clk, w = _sample_values(mod, h, NVML_PROCESSOR_CLK_SAMPLES, start["clk"])
        else:
            clk, w = None, why0["clk"]
        if clk:
            mean_clk = sum(v for _, v in clk) / len(clk)
        else:
            once, w2 = _call(mod, "nvmlDeviceGetClockInfo", h, NVML_CLOCK_SM)
            lack = f"clock samples unavailable ({w})" if w else "no clock samples in window"
            if w2 is None:
                mean_clk, clk_note = float(once), f"{lack}: SM clock read once at stop, not a mean"
            else:
                why["mean_sm_clock_mhz"] = f"{lack}; clock at stop: {w2}"

        # Only a lower bound on the peak: we read memory at the two ends, not in between.
        mem_end, w = _call(mod, "nvmlDeviceGetMemoryInfo", h)
        used = [m.used for m in (start.get("memory_used"), mem_end) if m is not None]
        peak = int(max(used)) if used else None
        if peak is None:
            why["peak_memory_used_bytes"] = w or why0.get("memory_used", "memory not read")

        foreign: tuple[str, ...] = ()
        procs_end, w = _processes(mod, h)
        w = why0.get("processes", w)
        if w is None:
            before = {pid for pid, _ in start["processes"]}
            foreign = tuple(_format_process(p) for p in procs_end or ()
                            if p[0] not in before and p[0] != self._own_pid)
        else:
            why["foreign_processes"] = w

        return TelemetrySummary(
            duration_s=duration, energy_j=energy_j, energy_note=note, mean_power_w=mean_power_w,
            throttle_s=throttle_s, throttle_reasons=reasons or (), mean_sm_clock_mhz=mean_clk,
            sm_clock_note=clk_note, utilization=utilization, peak_memory_used_bytes=peak,
            foreign_processes=foreign, gpm=self._gpm_stop(), unavailable=why,
        )

